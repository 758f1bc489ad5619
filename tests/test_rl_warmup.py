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


def test_recall_examples_train_only_the_call_and_every_value_is_in_the_context(tmp_path):
    pol = _policy(tmp_path)
    tok = pol.tokenizer
    ex = recall_examples(tok, 30, seed=0)
    assert ex == recall_examples(tok, 30, seed=0) and ex != recall_examples(tok, 30, seed=1)
    for ids, mask in ex:
        first = mask.index(1)
        context, trained = tok.decode(ids[:first]), tok.decode([i for i, m in zip(ids, mask) if m])
        assert "<tool_call>" in trained and "submit" in trained and "- " not in trained
        call = json.loads(trained.split("<tool_call>")[1].split("</tool_call>")[0])
        assert list(call["arguments"]) == sorted(call["arguments"])
        for key, value in call["arguments"].items():
            assert f"- {key.replace('_', ' ')}: {value}" in context  # recoverable only by recall
    assert 0.0 <= exact_rate(pol, ex) <= 1.0


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
