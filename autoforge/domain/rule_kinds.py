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
time_window    runtime    "within 24 hours of booking", "before check-in" (a ``window`` guard)
cross_record   runtime    "the payment method belongs to the user", "the item is in the order"
quantity_limit runtime    "at most 5 passengers", "up to 2 GB", "one certificate per reservation"
count_limit    runtime    "can be modified only once", "renewed at most twice" (a counter on the record)
money          runtime    "a refund cannot exceed the amount paid", "the payment must cover the total"
prohibition    runtime    "cannot change the number of passengers", "reference books are never lent"
conversation   judged     "verify the customer's identity before any change", "confirm before ..."
procedure      judged     "check with retrievePolicy() before calling checkEligibility()", "refund: a, b, c"
unparsed       none       a sentence that reads like a rule but matches no form
=============  =========  ==============================================================

Policy text (``policy.md``) and a tool's prose are read into the same records; a rule the
offline templates write into the tool's code is enforced ``code``, one checked by the rule
engine before the tool runs (:mod:`autoforge.envs.guards`, the rule's ``check``) ``runtime``,
one checked over the conversation ``judged``, any other ``not enforced`` with its ``why``.
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
    # runtime: a guard the rule engine checks before the tool runs (autoforge.envs.guards);
    # judged: checked over the episode's conversation (autoforge.rollout.judge)
    enforced_by: Literal["template", "argument", "runtime", "judged", "none"]


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
    RuleKind("time_window", "a time window on a record's date (\"within 24 hours of booking\", \"before check-in\")",
             "runtime"),
    RuleKind("cross_record", "a condition between records (\"the payment method belongs to the user\", "
             "\"the item is in the order\")", "runtime"),
    RuleKind("quantity_limit", "a limit on a quantity per call or per record (\"at most 5 passengers\", "
             "\"up to 2 GB\", \"one certificate per reservation\")", "runtime"),
    RuleKind("count_limit", "how often a call may happen to one record (\"can be modified only once\")", "runtime"),
    RuleKind("money", "amounts that must agree (\"a refund cannot exceed the amount paid\", \"the payment must "
             "cover the total\")", "runtime"),
    RuleKind("prohibition", "a change that is never allowed (\"cannot change the number of passengers\")", "runtime"),
    RuleKind("conversation", "how the agent must talk (\"verify the customer's identity before any change\", "
             "\"confirm before a consequential write\")", "judged"),
    RuleKind("procedure", "the order tools must be called in (\"call X before Y\", a numbered runbook of tool "
             "steps, \"refund: look_up, verify, refund\"; autoforge.domain.policy_order)", "judged"),
)}
# The judged checks' ops the rule judge checks over a transcript (autoforge.rollout.rule_judge): identify first,
# confirm first, the procedures (autoforge.domain.policy_order) and the tool-calling protocol
# (autoforge.domain.policy_protocol). A judged check may also be ``transfer_when`` (listed, not judged yet).
JUDGED_OPS = ("identify_first", "confirm_first", "call_before", "sequence", "one_call_per_turn", "silent_call",
              "announce_call", "cite_source")
VALID_JUDGED_OPS = JUDGED_OPS + ("transfer_when",)


# The start of the ``why`` of a rule no call or record of its tool set could show kept or broken (it names
# no tool, argument, field or status of the set: autoforge.domain.policy_world.named_in). The rest are the
# *mechanically checkable* rules (v_rule_coverage.checkable, sql/094; benchmarks/policy.py).
OUTSIDE = "outside the tools: "


def checkable(enforcement: str, why: str | None) -> bool:
    """Whether a rule is mechanically checkable: enforced, or not enforced for a reason other than :data:`OUTSIDE`."""
    return enforcement != "not enforced" or not (why or "").startswith(OUTSIDE)


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
    # "code": the template wrote the check / effect into the tool; "runtime": ``check`` is a guard the
    # rule engine runs before the tool; "judged": ``check`` is judged over the conversation
    enforcement: str = "not enforced"
    forbidden: list[str] = dc_field(default_factory=list)  # source_status read from a negation
    source: str = "tool"  # "tool" (the tool's own prose) or the policy document's source ("policy.md")
    offset: int | None = None  # the sentence's character offset in that document
    tools: list[str] = dc_field(default_factory=list)  # the tools the rule binds
    check: dict[str, Any] | None = None  # the guard or judged check (autoforge.envs.guards); None: not enforced
    why: str | None = None  # not enforced: why

    def __post_init__(self) -> None:
        rule_kind(self.kind)
