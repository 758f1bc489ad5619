"""Copy warm-up: synthetic associative-recall dialogues that teach a small policy to copy values.

Every task is solved by copying: the email the user gave, the id a lookup returned, into a
tool call's arguments. A policy built from nothing and trained only on gold replays fits them
by memorising the values it saw, and on a held-out task writes a train-set email
(benchmarks/learning_evidence.py). The skill it lacks is *associative recall*: find a value by
its key in the context and copy it. This warm-up trains exactly that, before SFT, in the
policy's own dialogue format:

    <|im_start|>user
    Sure, here you go:
    - cabin class: Zorb
    - email: quo.tas52@lim.com<|im_end|>
    <|im_start|>assistant
    <tool_call>
    {"name": "submit", "arguments": {"cabin_class": "Zorb", "email": "quo.tas52@lim.com"}}
    </tool_call><|im_end|>

Keys and values are random words of the tokenizer's own vocabulary. Values are shaped like the
factory's: emails, ids, names, quoted digit strings, numbers, and JSON objects (an address) or
lists of objects (order items) whose inner keys may repeat another fact's key. Half of the
dialogues with 2+ facts have the tasks' two-step shape: a lookup call copies some facts, its
tool output returns a new id, and ``submit`` copies that id and the rest. The final call lists
its arguments with keys sorted, so nothing but recall lowers the loss (only the assistant turns
are trained on). Measured on the CPU: with flat values only (benchmarks/copy_skill.py) held-out
exact recall goes from 0 to ~0.37 in 1,500 steps of 32 dialogues; with these shapes, 3,000 steps
(40 min) reach 0.44 exact on whole dialogues, and SFT from there solves 66% of held-out retail
tasks, against 0% without the warm-up (benchmarks/learning_evidence.py). Synthetic recall curricula are
standard in the study of in-context copying (associative recall / MQAR); using one as a warm-up
for ERPO is ours (``TrainConfig.copy_warmup_steps``).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from typing import Any, Iterable

from autoforge.types import Message, ToolCall


def _vocab_words(tokenizer) -> tuple[list[str], list[str]]:
    vocab = [tokenizer.decode([i]) for i in range(len(tokenizer))]
    words = [w for w in vocab if re.fullmatch(r"[a-z]{2,}", w)]
    caps = [w for w in vocab if re.fullmatch(r"[A-Z][a-z]+", w)]
    if len(words) < 8:  # a tokenizer with few whole-word tokens: fall back to letter pairs
        words = [a + b for a in "abcdefghij" for b in "klmnopqrst"]
    return words, caps or [w.title() for w in words]


def _word_key(rng: random.Random, words: list[str], taken: Iterable[str] = ()) -> str:
    while True:
        k = "_".join(rng.choice(words) for _ in range(rng.randint(1, 2)))
        if k not in taken:
            return k


def _scalar(rng: random.Random, words: list[str], caps: list[str]) -> Any:
    kind = rng.random()
    if kind < 0.25:
        return f"{rng.choice(words)}.{rng.choice(words)}{rng.randint(10, 99)}@{rng.choice(words)}.com"
    if kind < 0.5:
        return f"{rng.choice('ABCDEFGHIJKLMNOPQRSTUVWXYZ')}{rng.choice(['', 'M', 'X'])}{rng.randint(0, 9999):04d}"
    if kind < 0.65:
        return rng.choice(caps)
    if kind < 0.75:
        return f"{rng.choice(words)}-{rng.randint(1, 999)}"
    if kind < 0.85:
        return f"{rng.randint(0, 99999):05d}"  # a digit string: the user quotes it, like a zip code
    if kind < 0.92:
        return rng.randint(1, 20)
    return f"{rng.randint(1, 999)} {rng.choice(caps)} {rng.choice(['St', 'Ave', 'Rd'])}"


def _value(rng: random.Random, words: list[str], caps: list[str], keys: list[str]) -> Any:
    """A fact value: mostly a scalar; sometimes a JSON object (an address) or a list of objects
    (order items), whose inner keys may repeat a top-level fact's key, so the copy must follow
    the value's own tokens, not just a key."""
    kind = rng.random()
    if kind < 0.65:
        return _scalar(rng, words, caps)
    inner = lambda: rng.choice(keys) if rng.random() < 0.3 else _word_key(rng, words)  # noqa: E731
    if kind < 0.85:
        obj: dict[str, Any] = {}
        for _ in range(rng.randint(2, 5)):
            obj[inner()] = _scalar(rng, words, caps)
        return dict(sorted(obj.items()))  # keys sorted, as the user writes them (value_text)
    shape = [inner() for _ in range(2)]
    if shape[0] == shape[1]:
        shape[1] = _word_key(rng, words, shape)
    shape.sort()
    return [{shape[0]: _scalar(rng, words, caps), shape[1]: rng.randint(1, 9)} for _ in range(rng.randint(1, 3))]


def recall_dialogue(rng: random.Random, words: list[str], caps: list[str], max_facts: int = 5) -> list[Message]:
    """One recall dialogue (see the module docstring).

    Half of them (when there are 2+ facts) have the shape of the factory's tasks: a lookup call
    copies some facts, its tool output returns a new id, and the final ``submit`` call copies
    that id and the remaining facts.
    """
    from autoforge.dialogue import fact_line

    keys: list[str] = []
    for _ in range(rng.randint(1, max_facts)):
        keys.append(_word_key(rng, words, keys))
    facts = {k: _value(rng, words, caps, keys) for k in keys}
    msgs = [Message(role="user", content="Sure, here you go:\n" + "\n".join(fact_line(k, v) for k, v in facts.items()))]
    submit = dict(facts)
    if len(keys) >= 2 and rng.random() < 0.5:
        looked = sorted(rng.sample(keys, rng.randint(1, len(keys) - 1)))
        tool = f"find_{_word_key(rng, words)}"
        id_key = _word_key(rng, words, keys) + "_id"
        id_value = _scalar(rng, words, caps)
        msgs += [Message(role="assistant", content="",
                         tool_calls=[ToolCall(id="call_0", name=tool, arguments={k: facts[k] for k in looked})]),
                 Message(role="tool", tool_call_id="call_0", name=tool,
                         content=json.dumps({id_key: id_value}, separators=(",", ":"), ensure_ascii=False))]
        submit = {k: v for k, v in facts.items() if k not in looked}
        submit[id_key] = id_value
    msgs.append(Message(role="assistant", content="",
                        tool_calls=[ToolCall(id="call_1", name="submit", arguments={k: submit[k] for k in sorted(submit)})]))
    return msgs


def _schema_of(value: Any) -> dict[str, Any]:
    """A JSON Schema a warm-up value satisfies (objects: every key required), to render with the real
    ``brief`` shorthand (:func:`autoforge.rollout.toolcalls.brief_schema`)."""
    if isinstance(value, dict):
        return {"type": "object", "properties": {k: _schema_of(v) for k, v in value.items()}, "required": list(value)}
    if isinstance(value, list):
        return {"type": "array", "items": _schema_of(value[0])} if value else {"type": "array"}
    kind = ("boolean" if isinstance(value, bool) else "integer" if isinstance(value, int)
            else "number" if isinstance(value, float) else "string")
    return {"type": kind}


def toolbox_dialogue(rng: random.Random, words: list[str], caps: list[str],
                     max_facts: int = 4) -> tuple[list[Message], list[dict[str, Any]]]:
    """A recall dialogue with a tool list: pick the tool a request names, copy its argument names
    from the list and their values from the facts.

    2-5 tools named ``verb_noun[_noun]`` from random words, shown in the ``brief`` shorthand; the
    distractors share a verb or a noun with the target, so only both words pick it. The user asks
    "please <verb> the <noun ...>" and lists the facts; half the time a lookup tool of the list
    (``find_<noun>_id``) must first turn some facts into an id. Arguments are written in the tool's
    own order, as a schema lists them.
    """
    from autoforge.dialogue import fact_line
    from autoforge.rollout.toolcalls import brief_schema

    verb, nouns = rng.choice(words), [rng.choice(words) for _ in range(rng.randint(1, 2))]
    target = "_".join([verb, *nouns])
    keys: list[str] = []
    for _ in range(rng.randint(1, max_facts)):
        keys.append(_word_key(rng, words, keys))
    facts = {k: _value(rng, words, caps, keys) for k in keys}
    names = {target}
    while len(names) < rng.randint(2, 5):  # distractors: same verb, other noun / other verb, same noun
        names.add("_".join([verb, rng.choice(words)] if rng.random() < 0.5 else [rng.choice(words), *nouns]))
    tools = {n: {_word_key(rng, words): _scalar(rng, words, caps) for _ in range(rng.randint(1, 3))}
             for n in names - {target}}  # tool -> example arguments (the listed schema is derived from them)
    calls: list[tuple[str, dict[str, Any], Any]] = []
    args = dict(facts)
    if len(keys) >= 2 and rng.random() < 0.5:  # look an id up first
        looked = rng.sample(keys, rng.randint(1, len(keys) - 1))
        finder, id_key = f"find_{nouns[0]}_id", f"{nouns[0]}_id"
        id_value = _scalar(rng, words, caps)
        tools[finder] = {k: facts[k] for k in looked}
        calls.append((finder, {k: facts[k] for k in looked}, {id_key: id_value}))
        args = {id_key: id_value, **{k: v for k, v in facts.items() if k not in looked}}
    order = list(args)
    rng.shuffle(order)
    tools[target] = {k: args[k] for k in order}
    calls.append((target, {k: args[k] for k in order}, None))
    request = f"Please {verb} the {' '.join(nouns)}."
    msgs = [Message(role="user", content=request + "\n" + "\n".join(fact_line(k, v) for k, v in facts.items()))]
    for i, (name, a, out) in enumerate(calls):
        msgs.append(Message(role="assistant", content="", tool_calls=[ToolCall(id=f"call_{i}", name=name, arguments=a)]))
        if out is not None:
            msgs.append(Message(role="tool", tool_call_id=f"call_{i}", name=name,
                                content=json.dumps(out, separators=(",", ":"), ensure_ascii=False)))
    return msgs, [{"name": n, "arguments": brief_schema(_schema_of(tools[n]))} for n in sorted(tools)]


class RecallExamples(Sequence):
    """``n`` warm-up dialogues as ``(token_ids, loss_mask)`` in the policy's layout (mask on the calls).

    Built on demand, example ``i`` from its own seed: a warm-up of 6,000 x 32 dialogues starts at
    once instead of tokenizing 192,000 up front, and holds no more than a batch in memory.
    Indexing (and slicing) is deterministic: the same ``(seed, i)`` always gives the same example.
    """

    lazy = True  # trainer.sft: every example trains on its calls, nothing to filter up front

    def __init__(self, tokenizer, n: int, seed: int = 0, toolbox: float = 0.0):
        self.tokenizer, self.n, self.seed, self.toolbox = tokenizer, int(n), seed, float(toolbox)
        self.words, self.caps = _vocab_words(tokenizer)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.n))]
        if not -self.n <= i < self.n:
            raise IndexError(i)
        from autoforge.rl.policy import encode_episode

        rng = random.Random(f"copy-warmup:{self.seed}:{i % self.n}")
        if self.toolbox and rng.random() < self.toolbox:
            msgs, tools = toolbox_dialogue(rng, self.words, self.caps)
            return encode_episode(self.tokenizer, msgs, tools)
        return encode_episode(self.tokenizer, recall_dialogue(rng, self.words, self.caps), None)


def recall_examples(tokenizer, n: int, seed: int = 0, toolbox: float = 0.0) -> RecallExamples:
    """``n`` warm-up dialogues (:class:`RecallExamples`, generated on demand); a share ``toolbox`` of
    them are :func:`toolbox_dialogue` (a tool list to choose from), the rest :func:`recall_dialogue`."""
    return RecallExamples(tokenizer, n, seed, toolbox)


def exact_rate(policy, examples, batch: int = 50) -> float:
    """Share of examples whose every trained token is the greedy prediction (teacher-forced)."""
    import torch

    from autoforge.rl.trajectory import Trajectory, collate

    was_training = policy.model.training
    policy.model.eval()
    ok = 0
    with torch.no_grad():
        for i in range(0, len(examples), batch):
            b = collate([Trajectory("t", "e", ids, m, [0.0] * len(ids), 0.0) for ids, m in examples[i:i + batch]],
                        policy.pad_id, device=policy.device)
            pred = policy.model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits[:, :-1].argmax(-1)
            tgt, mask = b["input_ids"][:, 1:], b["loss_mask"][:, 1:].bool()
            ok += int(((pred == tgt) | ~mask).all(-1).sum())
    if was_training:
        policy.model.train()
    return ok / max(1, len(examples))
