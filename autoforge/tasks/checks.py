"""The registry of verification checks: every check a task must pass to be curated, in run order.

:mod:`autoforge.tasks.verify` runs them and stores one ``VerificationResult`` per check and task
(``VerificationResult.check`` in autoforge/types.py refuses a name that is not here; the warehouse
stores it as a plain string). A task is kept only if every check passes; its first failed check
is the reason of its rejection. Paper (arXiv 2512.22857, Sec. 3.3) judges completion on the final
state and gets solvability by construction (the gold DAG was executed); it reports no further
filter, so these are ours (docs/design.md#stage-5-verification-and-curation). An answer task
(a kind that changes nothing, :mod:`autoforge.tasks.kinds`) runs the same checks, read as below, and
so does a boundary task (the user asks for a write a rule forbids: :mod:`autoforge.tasks.boundary`).
"""

from __future__ import annotations

from dataclasses import dataclass

from autoforge.errors import ConfigError


@dataclass(frozen=True)
class Check:
    """One verification check."""

    name: str
    description: str  # what passing means (answer tasks: how they read it, when it differs)


CHECKS: dict[str, Check] = {c.name: c for c in (
    Check("policy_rule", "the gold keeps every rule of the environment (issue 33): no gold call is refused by a runtime "
                         "rule (autoforge.envs.guards: the replay names the rule and its message) and no judged rule "
                         "is broken by the order of the gold calls (an identify_first write before any of its "
                         "lookups); boundary tasks: the gold makes no write, and the write the user asks for, made "
                         "after the gold reads, is refused by the task's rule (Task.rules[0]) and changes nothing"),
    Check("replay_deterministic", "the gold DAG, replayed twice from S with the task's facts, gives the stored S* hash "
                                  "both times and the same calls (docs/conventions.md#verify-by-replay); answer tasks: "
                                  "and the stored gold answer"),
    Check("changes_state", "S* != S (a read-only task would be passed by doing nothing); answer and boundary tasks: "
                           "the converse, S* == S, and a gold answer is stored"),
    Check("do_nothing_fails", "an agent that calls nothing ends in S, not S*; answer tasks: an empty final message "
                              "does not match the answer; boundary tasks: nor does a reply that says nothing "
                              "(autoforge.tasks.boundary.IDLE_MESSAGES: 'I have completed your request')"),
    Check("read_only_fails", "an agent that makes only the gold read calls does not reach S* (this also catches a tool "
                             "tagged read that writes); answer tasks: no earlier output of the chain already states "
                             "the answer (every read is needed); boundary tasks: an agent that does what the user asked "
                             "(the gold reads, then the requested write) makes a call a rule refuses (a rule break)"),
    Check("traceable", "every argument of every gold call is a user fact, an earlier output or a reasoning result, "
                       "equal to what the replay computed; no identifier the agent must look up appears in the request "
                       "or the user's facts"),
    Check("not_duplicate", "no other task has the same DAG shape and the same state change (answer tasks: the same "
                           "DAG shape, facts and answer)"),
    Check("writes_observable", "every gold write shows in S*: it changes something, not all of it overwritten later "
                               "(autoforge.tasks.quality), and no gold call is of a kind no task calls (a scratchpad, "
                               "a calculator, a hand-off: autoforge.domain.tool_kinds); answer tasks: only the latter"),
    Check("args_in_domain", "every gold argument is in its documented domain (enum, vocabulary, pattern, format, "
                            "range, ordered pair, past birth date, positive amount)"),
    Check("no_placeholders", "no gold argument and no initial-state value is a documentation hint instead of a value "
                             "(a format template such as YYYY-MM-DD, a type name, an \"e.g.\" phrase, a <slot>, xxx, "
                             "TBD; an empty required argument): autoforge.domain.placeholders"),
    Check("world", "the task's world holds no world-check finding of a kind that rejects "
                   "(autoforge.domain.world_checks.FINDING_KINDS): the records of its initial state that its gold run "
                   "uses have no dangling reference field, placeholder, empty required container or value of another "
                   "JSON type; its gold arguments no empty required value, placeholder or mismatch with the tool's "
                   "parameter schema; no gold write changes a collection or field its parameters, name, description "
                   "and plan do not name. The reason names each finding's kind, path and value; every finding is "
                   "stored in world_checks"),
    Check("answer_not_given", "answer tasks: the request does not already state the gold answer, and a final message "
                              "that states nothing does not match it; state tasks pass it"),
    Check("near_duplicate", "the task's blueprint (tool sequence + argument sources) holds less than its cap of the "
                            "environment's tasks (tasks.quality.BLUEPRINT_SHARE), counting tasks verified earlier; "
                            "checked last, so only tasks that pass everything else count"),
    Check("ids_bound", "every identifier a gold call passes (an id-named argument, also inside an object or list "
                       "argument) is a value the user was told (the user facts, the request) or one an earlier gold "
                       "call returned (autoforge.tasks.quality.check_ids_bound); the reason names the call, argument "
                       "and value. Listed last, run before near_duplicate (which counts only tasks passing it)"),
)}


def check(name: str) -> Check:
    """The registered check ``name``; an unknown name raises with the list of valid ones."""
    try:
        return CHECKS[name]
    except KeyError:
        raise ConfigError(f"unknown verification check {name!r}; valid checks: {', '.join(CHECKS)}") from None
