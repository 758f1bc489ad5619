"""Copy warm-up: synthetic recall dialogues (values only recoverable from the context), trained and resumed."""

from __future__ import annotations

import json

import torch

from autoforge.rl.config import TrainConfig
from autoforge.rl.policy import build_tiny_policy, load_policy
from autoforge.rl.trainer import copy_warmup
from autoforge.rl.warmup import exact_rate, recall_examples

CORPUS = [f"- first name: Ava\n- email: ava.patel{i}@example.com\n" + json.dumps({"first_name": "Ava", "user_id": f"U{i:04d}"})
          for i in range(60)] + ["Please update the shipping address of my order and tell me when it is done."] * 20


def _policy(tmp_path):
    torch.set_num_threads(1)
    return load_policy(build_tiny_policy(tmp_path / "p", CORPUS, vocab_size=400, hidden_size=32, num_layers=2,
                                         num_heads=2), device="cpu")


def test_recall_examples_train_only_the_calls_and_every_value_is_in_the_context(tmp_path):
    from autoforge.dialogue import fact_line

    pol = _policy(tmp_path)
    tok = pol.tokenizer
    ex = recall_examples(tok, 60, seed=0)
    assert list(ex) == list(recall_examples(tok, 60, seed=0)) and list(ex) != list(recall_examples(tok, 60, seed=1))
    assert ex[5] == ex[5] == ex[3:7][2] and len(ex) == 60  # built on demand, the same every time
    shapes = {"object": 0, "list": 0, "lookup": 0}
    for ids, mask in ex:
        first, last = mask.index(1), len(mask) - 1 - mask[::-1].index(1)
        trained = tok.decode([i for i, m in zip(ids, mask) if m])
        calls = [json.loads(c.split("</tool_call>")[0]) for c in trained.split("<tool_call>")[1:]]
        assert "- " not in trained and calls[-1]["name"] == "submit"
        assert list(calls[-1]["arguments"]) == sorted(calls[-1]["arguments"])
        # what the final call copies is in the context before it: a fact line or the lookup's output
        start = max(i for i in range(first, last + 1) if mask[i] and not mask[i - 1])
        context = tok.decode(ids[:start])
        for key, value in calls[-1]["arguments"].items():
            if len(calls) == 2 and key.endswith("_id") and json.dumps({key: value}, separators=(",", ":")) in context:
                shapes["lookup"] += 1
                continue
            assert fact_line(key, value) in context  # recoverable only by recall
            shapes["object"] += isinstance(value, dict)
            shapes["list"] += isinstance(value, list)
            if isinstance(value, (dict, list)):  # the call writes it token for token as the user did
                assert json.dumps(value, ensure_ascii=False) in context
    assert min(shapes.values()) > 0, shapes  # nested objects, lists of objects and two-step lookups all occur
    assert 0.0 <= exact_rate(pol, ex) <= 1.0


def test_toolbox_dialogues_name_one_listed_tool_and_copy_its_arguments(tmp_path):
    import random

    from autoforge.dialogue import fact_line
    from autoforge.rl.warmup import _vocab_words, toolbox_dialogue

    pol = _policy(tmp_path)
    words, caps = _vocab_words(pol.tokenizer)
    lookups = 0
    for i in range(200):
        msgs, tools = toolbox_dialogue(random.Random(i), words, caps)
        listed = {t["name"]: t["arguments"] for t in tools}
        assert [t["name"] for t in tools] == sorted(listed) and 2 <= len(tools) <= 6
        request = msgs[0].content.splitlines()[0]
        calls = [m.tool_calls[0] for m in msgs if m.role == "assistant"]
        target = calls[-1]
        verb, *nouns = target.name.split("_")
        assert request == f"Please {verb} the {' '.join(nouns)}."
        # only the target has both the request's verb and its nouns (a lookup tool is find_<noun>_id)
        assert [n for n in listed if n.split("_")[0] == verb and n.split("_")[1:] == nouns] == [target.name]
        for call in calls:  # names and argument order from the list, values from the facts or the lookup's output
            assert list(call.arguments) == list(listed[call.name])
            for k, v in call.arguments.items():
                if k.endswith("_id") and len(calls) == 2 and call is target and k not in msgs[0].content:
                    assert json.loads(msgs[2].content) == {k: v}
                    lookups += 1
                else:
                    assert fact_line(k, v) in msgs[0].content
    assert lookups > 20
    ex = recall_examples(pol.tokenizer, 40, seed=0, toolbox=0.5)
    with_tools = sum("<tools>" in pol.tokenizer.decode(ids) for ids, _ in ex)
    assert 5 < with_tools < 35 and list(ex) == list(recall_examples(pol.tokenizer, 40, seed=0, toolbox=0.5))


def test_copy_warmup_trains_checkpoints_and_is_not_redone(tmp_path):
    pol = _policy(tmp_path)
    cfg = TrainConfig(copy_warmup_steps=4, copy_warmup_batch_size=4, sft_lr=3e-3, device="cpu",
                      checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every=2)
    before = [p.detach().clone() for p in pol.model.parameters()]
    hist = copy_warmup(pol, cfg)
    assert len(hist) == 4 and all(h["loss"] == h["loss"] for h in hist)
    assert all(not torch.equal(a, b) for a, b in zip(before, pol.model.parameters()))
    assert (tmp_path / "ckpt" / "warmup" / "latest.json").is_file()
    # a second run (e.g. a resumed training run) loads the finished warm-up instead of redoing it
    again = _policy(tmp_path)
    assert copy_warmup(again, cfg) == hist
    assert all(torch.equal(a, b) for a, b in zip(pol.model.parameters(), again.model.parameters()))
    assert copy_warmup(again, cfg.model_copy(update={"copy_warmup_steps": 0})) == []
