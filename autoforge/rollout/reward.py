"""Outcome reward: does the final state equal the gold state S*?

Paper (arXiv 2512.22857, Eq. 1): R = 1 if S* == Ŝ else 0 — compared on the final state, not
on the call sequence, because one task has many valid solutions. States are compared by
canonical-JSON hash (:func:`autoforge.types.state_hash`). Each component is a small named
function (verifiers-style rubrics); the components are logged in ``Episode.reward_info`` for
diagnosis. "Could not score" (no final state, no gold hash) is ``None``, never 0. An episode that
broke a rule (issue 33) scores 0 by default (:func:`rule_break_reward`).
"""

from __future__ import annotations

from typing import Any

from autoforge.tasks.kinds import task_kind
from autoforge.types import STATE_HASH_PREFIX, Task, canonical_json, state_hash, state_hash_like


def state_match(final_hash: str | None, gold_hash: str | None) -> bool | None:
    """True/False when both hashes are known, else None (cannot score)."""
    if not final_hash or not gold_hash:
        return None
    return final_hash == gold_hash


def differing_collections(final: dict[str, Any] | None, gold: dict[str, Any] | None) -> list[str]:
    """Names of the collections whose content differs (present in only one state counts)."""
    if final is None or gold is None:
        return []
    names = set(final) | set(gold)
    return sorted(n for n in names if canonical_json(final.get(n)) != canonical_json(gold.get(n)))


def differing_records(final: dict[str, Any] | None, gold: dict[str, Any] | None, limit: int = 20) -> dict[str, list[str]]:
    """Per differing collection, the ids of records that differ (missing, extra or changed)."""
    out: dict[str, list[str]] = {}
    for name in differing_collections(final, gold):
        a, b = (final or {}).get(name), (gold or {}).get(name)
        if isinstance(a, dict) and isinstance(b, dict):
            ids = sorted(str(k) for k in set(a) | set(b) if canonical_json(a.get(k)) != canonical_json(b.get(k)))
            out[name] = ids[:limit]
        else:
            out[name] = ["<whole collection>"]
    return out


def unchanged_from_initial(final: dict[str, Any] | None, initial: dict[str, Any] | None) -> bool | None:
    """Did the agent leave the state untouched (a do-nothing episode)?"""
    if final is None or initial is None:
        return None
    return state_hash(final) == state_hash(initial)


def _same_version(a: str, b: str | None) -> bool:
    """Both hashes of one version of :func:`autoforge.types.state_hash` (or no gold hash to compare with)."""
    return not b or a.startswith(STATE_HASH_PREFIX) == b.startswith(STATE_HASH_PREFIX)


def outcome_reward(match: bool | None) -> float | None:
    """Eq. 1: 1.0 on an exact state match, 0.0 on a mismatch, None when it could not be scored."""
    if match is None:
        return None
    return 1.0 if match else 0.0


def final_message(messages: list[Any]) -> str:
    """The agent's last words: the content of the last assistant message ("" when it said nothing)."""
    for m in reversed(messages or []):
        if getattr(m, "role", None) == "assistant" and getattr(m, "content", ""):
            return m.content
    return ""


def score(task: Task, final_state: dict[str, Any] | None, final_hash: str | None = None,
          message: str | None = None) -> tuple[float | None, dict[str, Any]]:
    """The reward of an episode and its components (``Episode.reward`` and ``reward_info``).

    An answer task (``task.kind == "answer"``) is solved when the state is left as it was (S* == S)
    *and* the final ``message`` states the gold answer (component ``answer_match``,
    :func:`autoforge.tasks.answers.answer_match`): R = 1 iff both hold."""
    if final_state is not None and (final_hash is None or not _same_version(final_hash, task.gold_state_hash)):
        final_hash = state_hash_like(final_state, task.gold_state_hash)  # a version-1 S* (older warehouses) as one
    match = state_match(final_hash, task.gold_state_hash)
    if task_kind(task.kind).states_answer:
        from autoforge.tasks.answers import answer_match

        said = answer_match(message, task.gold_answer) if task.gold_answer is not None else None
        info_a = {"answer_match": said, "gold_answer": task.gold_answer.value if task.gold_answer else None}
        both = None if match is None or said is None else (match and said)
        rew, info = _state_score(task, final_state, final_hash, match)
        return outcome_reward(both), {**info, **info_a}
    return _state_score(task, final_state, final_hash, match)


def _state_score(task: Task, final_state: dict[str, Any] | None, final_hash: str | None,
                 match: bool | None) -> tuple[float | None, dict[str, Any]]:
    info: dict[str, Any] = {
        "state_match": match,
        "differing_collections": differing_collections(final_state, task.gold_state) if match is False else [],
        "differing_records": differing_records(final_state, task.gold_state) if match is False else {},
        "unchanged": unchanged_from_initial(final_state, task.initial_state),
    }
    if match is None:
        info["unscored_reason"] = "no final state" if not final_hash else "task has no gold state hash"
    return outcome_reward(match), info


def rule_break_reward(reward: float | None, info: dict[str, Any], breaks: list[str],
                      zero: bool | None = None) -> tuple[float | None, dict[str, Any]]:
    """The reward after the episode's rule breaks (issue 33; :mod:`autoforge.rollout.rule_judge`): a
    rule-breaking episode scores 0 when ``zero`` (None: the ``AUTOFORGE_ZERO_ON_RULE_BREAK`` setting, on by
    default); ``info`` gets ``rule_breaks`` and, where the reward was lowered, ``reward_before_rule_break``.
    An episode that could not be scored (None) stays None."""
    if not breaks:
        return reward, info
    if zero is None:
        from autoforge.settings import setting

        zero = bool(setting("zero_on_rule_break"))
    info = {**info, "rule_breaks": list(breaks)}
    if zero and reward is not None and reward != 0.0:
        info["reward_before_rule_break"] = reward
        reward = 0.0
    return reward, info

