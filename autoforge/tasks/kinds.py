"""The registry of task kinds: what a task asks of the agent and what its reward compares.

``Task.kind`` (autoforge/types.py) refuses a name that is not here, and the warehouse stores it as
a plain string (``tasks.kind``, no CHECK list). The stages read a kind's properties, not its
name: generation builds an answer task from a DAG whose sequence goal is ``answer``
(:mod:`autoforge.tasks.generate`), verification picks the checks of a kind that changes nothing
(:mod:`autoforge.tasks.verify`), and the reward adds the answer match of a kind whose final
message must state the gold answer (:func:`autoforge.rollout.reward.score`).

=======  =============  ======================================================================
kind     state change   what R = 1 needs
=======  =============  ======================================================================
state    S* != S        the final state's hash equals S*'s
answer   none (S* = S)  the state left as it was and the final message stating ``gold_answer``
boundary none (S* = S)  the user asks for a write a runtime rule forbids: no rule broken (the
                        requested write is refused by the rule, and trying it is a rule break),
                        the state left as it was and the final message stating why
                        (``gold_answer``: the record value or limit that blocks it)
=======  =============  ======================================================================

A boundary task's DAG (:mod:`autoforge.tasks.boundary`) ends in the write the user asks for; its
gold calls are the reads before it, never the write. ``Task.rules[0]`` is the rule it exercises.
"""

from __future__ import annotations

from dataclasses import dataclass

from autoforge.errors import ConfigError


@dataclass(frozen=True)
class TaskKind:
    """One kind of task."""

    name: str
    description: str
    changes_state: bool  # the gold run changes the state (S* != S); False: it must leave it as it was
    states_answer: bool  # the agent's final message must state the task's gold_answer


STATE, ANSWER, BOUNDARY = "state", "answer", "boundary"
TASK_KINDS: dict[str, TaskKind] = {k.name: k for k in (
    TaskKind(STATE, "the user wants something done: the reward compares the final state with S*", True, False),
    TaskKind(ANSWER, "the user wants to know something (a read-only DAG): S* == S and the final message must state "
                     "the answer its last read gives", False, True),
    TaskKind(BOUNDARY, "the user asks for a write a runtime rule forbids: S* == S, no rule broken, and the final "
                       "message must state why (the record value or limit that blocks it)", False, True),
)}


def task_kind(name: str) -> TaskKind:
    """The registered kind ``name``; an unknown name raises with the list of valid ones."""
    try:
        return TASK_KINDS[name]
    except KeyError:
        raise ConfigError(f"unknown task kind {name!r}; valid kinds: {', '.join(TASK_KINDS)}") from None
