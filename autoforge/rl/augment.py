"""Value-substitution augmentation of gold replays: SFT data that can only be fit by copying.

A policy solves a task by copying argument values — an email the user gave, the user id a
lookup returned — into its tool calls. On a few hundred gold replays a small policy can fit
the SFT loss by *memorising* the values it saw (it writes a train-set email on a held-out
task) instead of copying them. Here each gold dialogue is re-told with fresh values: every
string value the task's facts and the gold calls carry (``ava.patel70@example.com``,
``U0004``, ``"73948"``) is replaced, everywhere it occurs in the dialogue — request, user
replies, tool calls, tool outputs — by a new value of the same shape (each letter run swapped
for one seen at the same place in another value of the same key, each digit run redrawn).
The dialogue stays self-consistent (the lookup now returns the new id, the next call uses
it), so the only way to predict the calls is to copy from the context.

Augmented dialogues are training text only: they are never executed against an environment
or stored as tasks. Entity substitution is a standard augmentation for copy-heavy
generation; using it for the ERPO cold start is ours (``TrainConfig.sft_augment_copies``).
"""

from __future__ import annotations

import random
import re
from typing import Any, Iterable

from autoforge.tasks.leaves import ADJ, FIRST, LAST, NOUN
from autoforge.types import Episode, Message, Task, ToolCall

# name-like words to draw from when a dialogue's own pools are used up (the task generator's names)
NAME_WORDS = frozenset(FIRST + LAST + ADJ + NOUN)
_RUN = re.compile(r"[A-Za-z]+|[0-9]+|[^A-Za-z0-9]+")


def _runs(value: str) -> list[str]:
    return _RUN.findall(value)


def _string_leaves(obj: Any, key: str = "") -> Iterable[tuple[str, str]]:
    """``(key, value)`` for every string leaf of a JSON value (the innermost key names it)."""
    if isinstance(obj, str):
        yield key, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _string_leaves(v, str(k))
    elif isinstance(obj, list):
        for v in obj:
            yield from _string_leaves(v, key)


def _copyable(value: str) -> bool:
    """Values worth re-drawing: identifier-like strings (a digit, an '@', or a capitalised name)."""
    v = value.strip()
    if len(v) < 2 or len(v) > 80 or "\n" in v:
        return False
    return any(c.isdigit() for c in v) or "@" in v or (v[:1].isupper() and v.replace(" ", "").replace("-", "").isalpha()
                                                         and len(v.split()) <= 3)


class ValuePools:
    """Letter runs seen at each place of each key's values (what a re-drawn value is made of)."""

    def __init__(self, tasks: Iterable[Task], episodes: Iterable[Episode] = ()):
        self.runs: dict[tuple[str, int], list[str]] = {}
        for key, value in self._values(tasks, episodes):
            for i, r in enumerate(_runs(value)):
                if r.isalpha():
                    pool = self.runs.setdefault((key, i), [])
                    if r not in pool:
                        pool.append(r)

    @staticmethod
    def _values(tasks: Iterable[Task], episodes: Iterable[Episode]) -> Iterable[tuple[str, str]]:
        for t in tasks:
            yield from ((k, v) for k, v in _string_leaves(t.user_facts) if _copyable(v))
        for ep in episodes:
            for m in ep.messages:
                for tc in m.tool_calls or []:
                    yield from ((k, v) for k, v in _string_leaves(tc.arguments) if _copyable(v))

    def redraw(self, key: str, value: str, rng: random.Random, wide: bool = False,
               avoid: frozenset[str] = frozenset()) -> str:
        """A new value shaped like ``value``: letter runs from the pool at the same place, digits redrawn.

        Single capital letters (id prefixes such as ``U`` or ``PM``) and fixed parts every value
        of the key shares (``example``, ``com``) come out unchanged, since their pool has one entry.
        ``wide``: capitalised words may come from any key's pool (when the key's own is used up),
        except those in ``avoid`` (the words of the values being replaced).
        """
        out = []
        for i, r in enumerate(_runs(value)):
            if r.isdigit():
                out.append("".join(rng.choice("0123456789") for _ in r))
            elif r.isalpha():
                pool = self.runs.get((key, i)) or [r]
                if wide and len(r) > 3 and r[:1].isupper():
                    # every value of its key is taken (a last name seen once): borrow a name-like
                    # run of another key, so no original value survives the substitution
                    seen = {x for runs in self.runs.values() for x in runs} | NAME_WORDS
                    pool = sorted(x for x in seen if x != r and x not in avoid and len(x) > 3 and x[:1].isupper()
                                  and x[1:].islower() == r[1:].islower()) or pool
                out.append(rng.choice(pool))
            else:
                out.append(r)
        return "".join(out)


def _replacer(mapping: dict[str, str]):
    """``text -> text`` with every old value replaced by its new one.

    Longest first, and never inside a longer token ("P0003" is not replaced inside "PP0003x");
    a value quoted in text (a fact line writes "73948") still matches, quotes not being alphanumeric.
    """
    if not mapping:
        return lambda text: text
    pattern = re.compile("|".join(f"(?<![A-Za-z0-9]){re.escape(k)}(?![A-Za-z0-9])"
                                  for k in sorted(mapping, key=len, reverse=True)))
    return lambda text: pattern.sub(lambda m: mapping[m.group(0)], text) if text else text


def _replace_json(obj: Any, replace) -> Any:
    if isinstance(obj, str):
        return replace(obj)
    if isinstance(obj, dict):
        return {k: _replace_json(v, replace) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_replace_json(v, replace) for v in obj]
    return obj


def substitute_values(episode: Episode, task: Task, pools: ValuePools, rng: random.Random) -> Episode:
    """``episode`` re-told with every copyable value of its facts and calls re-drawn (see module doc)."""
    found: dict[str, str] = {}
    for k, v in _string_leaves(task.user_facts):
        if _copyable(v):
            found.setdefault(v, k)
    for m in episode.messages:
        for tc in m.tool_calls or []:
            for k, v in _string_leaves(tc.arguments):
                if _copyable(v):
                    found.setdefault(v, k)
    mapping: dict[str, str] = {}
    used = set(found)
    old_words = frozenset(r for v in found for r in _runs(v) if r.isalpha())
    for value, key in found.items():
        for attempt in range(30):  # a value distinct from every other old or new value of this dialogue
            new = pools.redraw(key, value, rng, wide=attempt >= 20, avoid=old_words)
            if new not in used:
                break
        mapping[value] = new
        used.add(new)
    replace = _replacer(mapping)
    messages = []
    for m in episode.messages:
        calls = None
        if m.tool_calls is not None:
            calls = [ToolCall(name=tc.name, arguments=_replace_json(tc.arguments, replace), id=tc.id) for tc in m.tool_calls]
        messages.append(Message(role=m.role, content=replace(m.content), tool_calls=calls,
                                tool_call_id=m.tool_call_id, name=m.name))
    return episode.model_copy(update={"messages": messages,
                                      "diagnostics": {**episode.diagnostics, "augmented": len(mapping)}})


def augmented_episodes(episodes: Iterable[Episode], tasks: Iterable[Task], copies: int, seed: int = 0) -> list[Episode]:
    """``copies`` value-substituted re-tellings of each episode (0 = none). Deterministic in ``seed``."""
    episodes, by_id = list(episodes), {t.task_id: t for t in tasks}
    if copies <= 0 or not episodes:
        return []
    pools = ValuePools(by_id.values(), episodes)
    out = []
    for ep in episodes:
        task = by_id.get(ep.task_id)
        if task is None:
            continue
        for c in range(copies):
            aug = substitute_values(ep, task, pools, random.Random(f"augment:{seed}:{ep.episode_id}:{c}"))
            out.append(aug.model_copy(update={"episode_id": f"{ep.episode_id}~aug{c}"}))
    return out

