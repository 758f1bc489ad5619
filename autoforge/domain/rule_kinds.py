"""The registry of rule kinds: what each kind of prose rule is and how the code enforces it.

Every rule read from a tool's prose (:mod:`autoforge.domain.rules`) has one of these kinds;
:class:`ParsedRule` refuses any other, and :func:`rule_kind` raises with the valid names.
Adding a kind is an entry here (plus the reader that produces it and the engine that enforces
it); the warehouse stores the kind as a plain string in ``tool_rules.kind``.

=============  =========  ==============================================================
kind           enforced   what the prose says
=============  =========  ==============================================================
source_status  template   the statuses a record must be in before the call
result_status  template   the status the call leaves behind
side_effect    template   a timestamp field the call sets from the sandbox clock
constraint     argument   a limit on the arguments; checked when read into a form
unparsed       none       a sentence that reads like a rule but matches no form
=============  =========  ==============================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field as dc_field
from typing import Any, Literal

from autoforge.errors import ConfigError


@dataclass(frozen=True)
class RuleKind:
    """One kind of prose rule."""

    name: str
    description: str
    # template: the record templates write it into the code (status check, status change, timestamp);
    # argument: a check at the top of the function (autoforge.envs.rule_engine.argument_checks), for
    #           a constraint read into a form (autoforge.domain.argument_rules.is_argument_rule);
    # none: recorded with its sentence, never enforced
    enforced_by: Literal["template", "argument", "none"]


RULE_KINDS: dict[str, RuleKind] = {k.name: k for k in (
    RuleKind("source_status", "the statuses a record must be in before the call (\"only for a draft invoice\", "
             "\"Checked-in bookings cannot be cancelled\")", "template"),
    RuleKind("result_status", "the status the call leaves behind (\"is marked X\", \"becomes X\", \"moves to X\")",
             "template"),
    RuleKind("side_effect", "a timestamp field set from the environment clock (\"records frozen_at\")", "template"),
    RuleKind("constraint", "a limit on the arguments (\"min 1, max 100\", \"at least one of A or B\"); "
             "checked when read into a form", "argument"),
    RuleKind("unparsed", "a sentence that reads like a rule (\"must\", \"only\", \"cannot\" ...) but matches no "
             "form: listed, never silently dropped", "none"),
)}
# The kinds the record templates enforce (and the synthesis probes check on the record).
ENFORCED_KINDS = tuple(name for name, k in RULE_KINDS.items() if k.enforced_by == "template")


def rule_kind(name: str) -> RuleKind:
    """The registered kind ``name``; an unknown name raises with the list of valid ones."""
    try:
        return RULE_KINDS[name]
    except KeyError:
        raise ConfigError(f"unknown rule kind {name!r}; valid kinds: {', '.join(RULE_KINDS)}") from None


@dataclass
class ParsedRule:
    """One rule read from a tool's prose (a :class:`~autoforge.types.ToolRule` before it has ids and a probe)."""

    kind: str  # a name in RULE_KINDS
    text: str
    field: str | None = None
    values: list[Any] = dc_field(default_factory=list)
    enforcement: str = "not enforced"  # "code" once the template has written the check / effect
    forbidden: list[str] = dc_field(default_factory=list)  # source_status read from a negation

    def __post_init__(self) -> None:
        rule_kind(self.kind)
