"""Tiny offline policy: builds, saves, reloads offline; chat format; token-exact batched generation."""

from __future__ import annotations

import json

import pytest
import torch

from autoforge.errors import ConfigError
from autoforge.rl import chat
from autoforge.rl.erpo import token_logprobs
from autoforge.rl.policy import (
    build_tiny_policy,
    continuation_ids,
    count_parameters,
    encode_dialogue,
    load_policy,
    prompt_ids,
)
from autoforge.rl.trajectory import Trajectory, TrajectoryBuilder, collate, generate_turn

CORPUS = [f"Book flight F{i:03d} for customer C{i % 7} and move the date by {i % 5} days." for i in range(200)]
TOOLS = [{"type": "function", "function": {"name": "book_flight", "parameters": {"type": "object"}}}]
DIALOGUE = [
    {"role": "system", "content": "You are a travel agent."},
    {"role": "user", "content": "Book F001 for C1."},
    {"role": "assistant", "content": "<think>need the booking tool</think>",
     "tool_calls": [{"name": "book_flight", "arguments": {"flight": "F001", "customer": "C1"}}]},
    {"role": "tool", "content": '{"status": "booked", "id": "B1"}'},
    {"role": "assistant", "content": "Booked: B1."},
]


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    d = build_tiny_policy(tmp_path_factory.mktemp("tiny"), CORPUS, vocab_size=600, hidden_size=64, num_layers=2,
                          num_heads=4)
    return load_policy(d, device="cpu")


def test_build_save_reload_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    d = build_tiny_policy(tmp_path / "p", CORPUS, vocab_size=600)
    assert {"config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja"} <= {p.name for p in d.iterdir()}
    cfg = json.loads((d / "config.json").read_text())
    assert cfg["model_type"] == "llama"  # not qwen2: AutoTokenizer would swap the tokenizer (docs/design.md#default-policy)
    pol = load_policy(d, device="cpu")
    assert 1_000_000 <= count_parameters(pol.model) <= 5_000_000  # default size: ~2M
    # reload twice gives identical weights (saved, not re-initialised)
    again = load_policy(d, device="cpu")
    for a, b in zip(pol.model.parameters(), again.model.parameters()):
        assert torch.equal(a, b)
    # special and added tokens are single ids and survive a round trip
    for t in chat.SPECIAL_TOKENS + chat.ADDED_TOKENS:
        assert len(pol.tokenizer(t, add_special_tokens=False)["input_ids"]) == 1, t
    text = '<tool_call>\n{"name": "x", "arguments": {}}\n</tool_call><|im_end|>'
    assert pol.tokenizer.decode(pol.tokenizer(text, add_special_tokens=False)["input_ids"]) == text
    assert pol.stop_ids == [pol.tokenizer.convert_tokens_to_ids("<|im_end|>")]


def test_values_tokenize_the_same_wherever_they_appear(policy):
    """A value copied from the user's message into a JSON call is the same token ids (no leading-space variants)."""
    tok = policy.tokenizer
    value = "ava.patel70@example.com"
    ids = tok(value, add_special_tokens=False)["input_ids"]
    for context in ("- email: {}\n", '{{"email": "{}"}}', "my email is {} thanks", "({})"):
        text = context.format(value)
        enc = tok(text, add_special_tokens=False)["input_ids"]
        assert any(enc[i:i + len(ids)] == ids for i in range(len(enc))), (context, tok.convert_ids_to_tokens(enc))
        assert tok.decode(enc) == text


def test_load_refuses_to_download(tmp_path):
    with pytest.raises(ConfigError, match="not a local model directory"):
        load_policy("Qwen/Qwen3-0.6B")
    with pytest.raises(ConfigError, match="not a local model directory"):
        load_policy(tmp_path / "missing")


def test_chat_template_matches_python_renderer(policy):
    for tools in (None, TOOLS):
        for gen in (False, True):
            jinja = policy.tokenizer.apply_chat_template(DIALOGUE, tools=tools, tokenize=False, add_generation_prompt=gen)
            assert jinja == chat.render_messages(DIALOGUE, tools, add_generation_prompt=gen)
    text = chat.render_messages(DIALOGUE)
    assert '<|im_start|>tool\n{"status": "booked", "id": "B1"}<|im_end|>' in text
    assert '<tool_call>\n{"name": "book_flight", "arguments": {"flight": "F001", "customer": "C1"}}\n</tool_call>' in text


def test_parse_assistant():
    out = chat.parse_assistant('<think>plan</think>\n<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>'
                               '<tool_call>{"name": "b", "arguments": "{\\"y\\": 2}"}</tool_call><tool_call>oops</tool_call>'
                               "<|im_end|>")
    assert out["tool_calls"] == [{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {"y": 2}}]
    assert len(out["errors"]) == 1 and "oops" in out["errors"][0]
    assert out["content"] == "<think>plan</think>"
    assert chat.strip_thinking(out["content"] + " hi") == "hi"


def test_encode_dialogue_masks_only_assistant_bodies(policy):
    tok = policy.tokenizer
    ids, mask = encode_dialogue(tok, DIALOGUE, TOOLS)
    assert len(ids) == len(mask) and ids == tok(chat.render_messages(DIALOGUE, TOOLS), add_special_tokens=False)["input_ids"]
    trained = tok.decode([i for i, m in zip(ids, mask) if m])
    assert trained == ('<think>need the booking tool</think>\n<tool_call>\n{"name": "book_flight", "arguments": '
                       '{"flight": "F001", "customer": "C1"}}\n</tool_call><|im_end|>Booked: B1.<|im_end|>')
    context = tok.decode([i for i, m in zip(ids, mask) if not m])
    assert "booked" in context and "Book F001" in context and "travel agent" in context


def test_generation_logprobs_match_a_recomputed_forward(policy):
    tok = policy.tokenizer
    prompts = [prompt_ids(tok, DIALOGUE[:2], TOOLS), prompt_ids(tok, DIALOGUE[1:2]), [5, 6, 7]]  # ragged -> left pad
    g = torch.Generator().manual_seed(0)
    new, lps = generate_turn(policy.model, tok, prompts, max_new_tokens=12, temperature=0.8, generator=g)
    assert [len(n) for n in new] == [len(lp) for lp in lps] and all(len(n) > 0 for n in new)
    for p, n, lp in zip(prompts, new, lps):
        full = torch.tensor([p + n])
        with torch.no_grad():
            logits = policy.model(full).logits[:, :-1]
        recomputed = token_logprobs(logits, full[:, 1:], temperature=0.8)[0, len(p) - 1:]
        assert torch.allclose(recomputed, torch.tensor(lp), atol=1e-4)


def test_greedy_batched_equals_single_and_stops(policy):
    tok = policy.tokenizer
    prompts = [prompt_ids(tok, DIALOGUE[:2]), [5, 6, 7, 8, 9]]
    batched, _ = generate_turn(policy.model, tok, prompts, 10, temperature=0.0)
    for p, b in zip(prompts, batched):
        single, _ = generate_turn(policy.model, tok, [p], 10, temperature=0.0)
        assert single[0] == b
    # every token a stop token -> each sequence stops after exactly one token (the stop token is kept)
    one, _ = generate_turn(policy.model, tok, prompts, 10, temperature=1.0, stop_ids=range(len(tok)))
    assert [len(x) for x in one] == [1, 1]


def test_rows_that_stop_early_leave_the_batch_without_changing_the_others(policy):
    """Finished sequences are dropped from the batch (KV cache included); the rest continue exactly:
    every row's log-probs equal a fresh forward pass over its own prompt + output."""
    tok = policy.tokenizer
    prompts = [prompt_ids(tok, DIALOGUE[:2]), [5, 6, 7, 8, 9], prompt_ids(tok, DIALOGUE[1:2]), [9, 8, 7],
               [11, 12], prompt_ids(tok, DIALOGUE[:2], TOOLS)]
    stops = list(range(3, len(tok), 9))  # ~11% of the vocabulary: rows stop after different numbers of tokens
    g = torch.Generator().manual_seed(3)
    new, lps = generate_turn(policy.model, tok, prompts, 16, temperature=1.0, stop_ids=stops, generator=g)
    for p, n, lp in zip(prompts, new, lps):
        assert not set(n[:-1]) & set(stops) and (n[-1] in stops or len(n) == 16)
        full = torch.tensor([p + n])
        with torch.no_grad():
            logits = policy.model(full).logits[:, :-1]
        assert torch.allclose(token_logprobs(logits, full[:, 1:], 1.0)[0, len(p) - 1:], torch.tensor(lp), atol=1e-4)
    assert len({len(n) for n in new}) >= 3  # rows really left at different steps


def test_builder_and_collate(policy):
    tok = policy.tokenizer
    b = TrajectoryBuilder(prompt_ids(tok, DIALOGUE[1:2]))
    n_prompt = len(b)
    new, lps = generate_turn(policy.model, tok, [b.token_ids], 5, 1.0)
    b.add_generated(new[0], lps[0])
    b.add_context(continuation_ids(tok, [DIALOGUE[3]]))
    t = b.build("t1", "e1", reward=1.0)
    assert t.n_generated == len(new[0]) and t.loss_mask[:n_prompt] == [0] * n_prompt
    assert tok.decode(t.token_ids[n_prompt + len(new[0]):]).startswith('\n<|im_start|>tool\n{"status"')
    cut = continuation_ids(tok, [DIALOGUE[3]], close_turn=True)
    assert tok.decode(cut).startswith('<|im_end|>\n<|im_start|>tool') and tok.decode(cut).endswith("<|im_start|>assistant\n")
    short = Trajectory("t2", "e1", [1, 2, 3], [0, 1, 1], [0.0, -1.0, -2.0], 0.0)
    batch = collate([t, short], pad_id=policy.pad_id, advantages=[0.5, -0.5])
    L = len(t.token_ids)
    assert batch["input_ids"].shape == (2, L) and batch["advantages"].tolist() == [0.5, -0.5]
    assert batch["attention_mask"][1].tolist() == [1, 1, 1] + [0] * (L - 3)
    assert batch["loss_mask"][1, 3:].sum() == 0 and batch["old_logprobs"][1, :3].tolist() == [0.0, -1.0, -2.0]
    with pytest.raises(ConfigError, match="aligned"):
        Trajectory("t", "e", [1, 2], [0], [0.0, 0.0], 1.0)
