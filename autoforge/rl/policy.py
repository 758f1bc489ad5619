"""The policy: building the tiny offline default, loading any causal LM, encoding dialogues.

The default policy for tests, CI and the demo is built from nothing (docs/design.md#default-policy: no download
on the default path): a byte-level BPE tokenizer trained locally with ``tokenizers`` on a
text corpus (the warehouse's task texts), a chat template (:mod:`autoforge.rl.chat`), and a
small Llama model initialised from a config. It is saved with ``save_pretrained`` and loads
like any transformers model directory. A Llama config, not Qwen2: with a Qwen2 config
``AutoTokenizer`` silently swaps in ``Qwen2Tokenizer`` (docs/design.md#default-policy).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import torch

from autoforge.errors import CheckpointError, ConfigError
from autoforge.rl import chat
from autoforge.rl.checkpoint import save_model_dir


@dataclass
class Policy:
    """A causal LM with its tokenizer, on one device. What ``rollout_fn`` receives."""

    model: Any  # transformers PreTrainedModel (causal LM)
    tokenizer: Any  # PreTrainedTokenizerFast with a chat template
    device: torch.device

    @property
    def pad_id(self) -> int:
        return int(self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id)

    @property
    def stop_ids(self) -> list[int]:
        """Token ids that end an assistant turn: ``<|im_end|>`` and the tokenizer's eos."""
        ids = {self.tokenizer.eos_token_id, self.tokenizer.convert_tokens_to_ids(chat.IM_END)}
        unk = self.tokenizer.unk_token_id
        return sorted(int(i) for i in ids if i is not None and i != unk)


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} requested but CUDA is not available; use device='cpu' or 'auto'")
    return torch.device(device)


# --------------------------------------------------------------------------- tokenizer


def build_tokenizer(corpus_texts: Iterable[str], vocab_size: int = 2048, min_frequency: int = 2):
    """Train a byte-level BPE on ``corpus_texts`` and wrap it as ``PreTrainedTokenizerFast``.

    Byte-level: any UTF-8 text encodes (no unknown token). The chat boilerplate (tool preamble)
    is added to the corpus so the system prompt tokenizes compactly.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    def corpus():
        yield chat.TOOLS_PREAMBLE + chat.TOOLS_POSTAMBLE
        for role in ("system", "user", "assistant", "tool"):
            yield f"{chat.IM_START}{role}\n"
        n = 0
        for t in corpus_texts:
            n += 1
            yield t
        if n == 0:
            raise ConfigError("build_tokenizer: the corpus is empty; pass the task texts (requests, tool docs) to train on")

    tok = Tokenizer(models.BPE())
    # Pre-tokens: letter runs, digit runs, punctuation runs with one trailing space, whitespace.
    # A word never carries a leading space, so a value tokenizes the same after a space, a quote
    # or a colon ("email: ava.patel70@..." in the user's message and '"email": "ava.patel70@..."'
    # in the call share the ids of "ava", ".", "patel", "70", ...): copying an argument from the
    # context is token-identical, which a tiny policy can learn. (GPT-2's regex gives " ava"
    # there and "ava" here: two unrelated ids.) JSON's '": ' and ', ' stay one pre-token each.
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\p{L}+|\p{N}+|[^\s\p{L}\p{N}]+(?: [^\s\p{L}\p{N}]+)* ?|\s+"), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=chat.SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=chat.IM_END,  # generation stops at the end of an assistant turn
        pad_token=chat.EOS,
        bos_token=None,
        model_max_length=1_000_000,
    )
    fast.add_tokens(chat.ADDED_TOKENS)
    fast.chat_template = chat.CHAT_TEMPLATE
    fast.padding_side = "left"  # generation pads on the left; training collate pads itself
    return fast


# --------------------------------------------------------------------------- model


def tiny_llama_config(vocab_size: int, hidden_size: int = 128, num_layers: int = 2, num_heads: int = 4,
                      max_positions: int = 4096, **overrides):
    from transformers import LlamaConfig

    kw = dict(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=int(hidden_size * 8 / 3 // 16 * 16) or 32,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        rms_norm_eps=1e-5,
    )
    kw.update(overrides)
    return LlamaConfig(**kw)


def build_tiny_policy(
    out_dir: str | Path,
    corpus_texts: Iterable[str],
    vocab_size: int = 2048,
    hidden_size: int = 192,
    num_layers: int = 4,
    num_heads: int = 4,
    max_positions: int = 4096,
    seed: int = 0,
    model_vocab_size: int | None = None,
) -> Path:
    """Build, initialise and save the tiny default policy; returns the model directory.

    With the defaults: ~2.2M parameters (vocab 2048, hidden 192, 4 layers, tied embeddings).
    ``vocab_size`` caps the BPE vocabulary; a small corpus yields fewer merges. The model's
    embedding has ``max(len(tokenizer), model_vocab_size)`` rows (extra rows are never produced
    by the tokenizer; benchmarks use them to size a model like a real one).
    """
    from transformers import LlamaForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(corpus_texts, vocab_size=vocab_size)
    cfg = tiny_llama_config(max(len(tok), model_vocab_size or 0), hidden_size, num_layers, num_heads, max_positions,
                            pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, bos_token_id=None)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(cfg)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    return save_model_dir(out, model, tok)


MODEL_FIX = "it needs config.json, *.safetensors weights and a tokenizer with a chat template"


def check_model_dir(folder: str | Path) -> list[Path]:
    """The safetensors weight files of the local model folder ``folder``, after checking what a loader
    would trip over or must never run, each as one CheckpointError line naming the file:

    * config.json missing, not JSON, not an object, without ``model_type``;
    * pickle weights (``pytorch_model.bin``, ``*.pt``, ...) and no safetensors: refused, because
      unpickling a file runs whatever it says; convert them to safetensors where you trust them;
    * a sharded index (``model.safetensors.index.json``) that is not JSON or names shards that are
      missing or outside the folder;
    * a safetensors file that is truncated, padded or not safetensors
      (:func:`autoforge.rl.checkpoint.check_safetensors`)."""
    from autoforge.rl.checkpoint import PICKLE_SUFFIXES, STATE_TENSORS, _read_json, check_safetensors

    p = Path(folder)
    config = p / "config.json"
    if not config.is_file():
        raise CheckpointError(f"{config}: missing, so {p} is not a transformers model folder; {MODEL_FIX}")
    doc = _read_json(config, f"restore it from the model's source; {MODEL_FIX}")
    if not isinstance(doc, dict) or not isinstance(doc.get("model_type"), str):
        raise CheckpointError(f"{config}: not a transformers model config (a JSON object with 'model_type'); "
                              f"restore it from the model's source; {MODEL_FIX}")
    index = p / "model.safetensors.index.json"
    fix = f"the file is damaged or cut short: restore the model folder {p} from its source (or rerun the save)"
    if index.is_file():
        doc = _read_json(index, fix)
        weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
        if not isinstance(weight_map, dict) or not weight_map:
            raise CheckpointError(f"{index}: expected a JSON object with a non-empty 'weight_map'; {fix}")
        shards = sorted(set(map(str, weight_map.values())))
        bad = [s for s in shards if Path(s).name != s or not s.endswith(".safetensors")]
        if bad:
            raise CheckpointError(f"{index}: shard {bad[0]!r} is not a .safetensors file name inside {p}; refusing "
                                  f"to follow it; {fix}")
        files = [p / s for s in shards]
        missing = [f for f in files if not f.is_file()]
        if missing:
            raise CheckpointError(f"{missing[0]}: missing (named in {index.name}); {fix}")
    else:
        files = [f for f in [p / "model.safetensors"] if f.is_file() or f.is_symlink()]
    if not files:
        pickles = sorted(f for f in p.iterdir() if f.suffix in PICKLE_SUFFIXES and f.is_file())
        if pickles:
            raise CheckpointError(
                f"{pickles[0]}: pickle weights are refused (loading a pickle can run any code it carries); "
                "convert them to safetensors where you trust the file, e.g. AutoModelForCausalLM.from_pretrained(DIR, "
                "use_safetensors=False).save_pretrained(DIR) in a sandbox, then load the folder again")
        others = sorted(f.name for f in p.glob("*.safetensors") if f.name != STATE_TENSORS)
        hint = f" (found {', '.join(others)}: name it model.safetensors or add its index)" if others else ""
        raise CheckpointError(f"{p}: no model.safetensors (or model.safetensors.index.json) weights{hint}; {MODEL_FIX}")
    for f in files:
        check_safetensors(f, fix)
    return files


def _load_error(what: str, folder: Path, exc: BaseException) -> CheckpointError:
    from autoforge.rl.checkpoint import _first_line

    return CheckpointError(f"{folder}: cannot load the {what} ({type(exc).__name__}: {_first_line(exc)}); the folder "
                           f"is damaged or not a model this transformers version reads; {MODEL_FIX}")


def load_model(path: str | Path, dtype: torch.dtype | None = None, local: bool = True, **kw):
    """A causal LM from safetensors weights only (``use_safetensors=True``: a ``pytorch_model.bin``
    is never unpickled) and never with the folder's own code (``trust_remote_code=False``). A local
    folder is checked first (:func:`check_model_dir`); weights that leave parameters of the config
    uninitialised or of the wrong shape (a foreign or damaged folder: transformers would fill them
    with random values and only warn) are a CheckpointError."""
    from transformers import AutoModelForCausalLM

    p = Path(path).expanduser() if local else Path(str(path))
    if local:
        check_model_dir(p)
    opts = {"use_safetensors": True, "trust_remote_code": False, "output_loading_info": True, **kw}
    if dtype is not None:
        opts["dtype"] = dtype
    try:
        model, info = AutoModelForCausalLM.from_pretrained(str(p) if local else str(path), **opts)
    except OSError as exc:
        if exc.errno is not None or not local:  # the system refused (permission, disk): the CLI says so as such
            raise
        raise _load_error("model", p, exc) from None
    except Exception as exc:  # noqa: BLE001 - safetensors / torch / transformers errors of a damaged folder
        raise _load_error("model", p, exc) from None
    missing = sorted(info.get("missing_keys") or ())
    mismatched = sorted(info.get("mismatched_keys") or ())
    if missing or mismatched:
        what = f"{len(missing)} parameters missing (e.g. {missing[0]})" if missing else ""
        if mismatched:
            m = mismatched[0][0] if isinstance(mismatched[0], tuple) else mismatched[0]
            what += ("; " if what else "") + f"{len(mismatched)} of the wrong shape (e.g. {m})"
        raise CheckpointError(f"{p}: the weights do not match config.json ({what}); the folder mixes files of "
                              f"different models or is damaged; {MODEL_FIX}")
    return model


def load_policy(path: str | Path, device: str | torch.device = "auto", dtype: str = "float32",
                allow_download: bool = False) -> Policy:
    """Load a causal LM and its tokenizer from a local directory (or the hub, if allowed).

    Without ``allow_download`` nothing is fetched: a path that is not a local directory is an
    error (HF_HUB_OFFLINE behaviour), so the default path never touches the network. Weights
    come from safetensors only and no code from the folder runs (:func:`load_model`); a damaged
    or foreign folder is one CheckpointError line naming the file.
    """
    from transformers import AutoTokenizer

    p = Path(path).expanduser()
    local = p.is_dir()
    if not local and not allow_download:
        raise ConfigError(
            f"policy {str(path)!r} is not a local model directory; build one with build_tiny_policy(), point "
            "model_path at a directory holding config.json + weights + tokenizer, or set allow_download=True "
            "to fetch a hub id"
        )
    src = str(p) if local else str(path)
    kw = {"local_files_only": True} if local or os.environ.get("HF_HUB_OFFLINE") == "1" else {}
    torch_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    dev = resolve_device(device)
    if local:
        check_model_dir(p)  # before the tokenizer: the weights are what a damaged folder usually lacks
    try:
        tok = AutoTokenizer.from_pretrained(src, trust_remote_code=False, **kw)
    except OSError as exc:
        if exc.errno is not None or not local:
            raise
        raise _load_error("tokenizer", p, exc) from None
    except Exception as exc:  # noqa: BLE001 - tokenizers' plain Exception for a damaged tokenizer.json, ...
        if not local:
            raise
        raise _load_error("tokenizer", p, exc) from None
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    if not getattr(tok, "chat_template", None):
        raise ConfigError(f"tokenizer of {src} has no chat template; the policy needs one to render dialogues")
    model = load_model(p if local else path, dtype=torch_dtype, local=local, **kw).to(dev)
    return Policy(model=model, tokenizer=tok, device=dev)


def count_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters())


# --------------------------------------------------------------------------- dialogues -> (ids, mask)


def encode_dialogue(tokenizer, messages: Sequence[Any], tools: list[dict] | None = None) -> tuple[list[int], list[int]]:
    """Token ids of a whole dialogue and its loss mask (1 on assistant bodies, 0 elsewhere).

    For SFT on gold replays rendered as dialogues. The mask covers what the policy would have
    generated: each assistant turn's text, tool calls and closing ``<|im_end|>`` — never the
    role headers, tool outputs or user turns. Uses the tokenizer's own chat template and its
    offsets, so it works for any Hermes/Qwen-style template.
    """
    msgs = [chat._as_dict(m) for m in messages]
    text = tokenizer.apply_chat_template(msgs, tools=tools, tokenize=False)
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    spans = chat.assistant_spans(text)
    mask = []
    for (s, e) in enc["offset_mapping"]:
        mask.append(int(any(b <= s < f for b, f in spans)))
    return list(enc["input_ids"]), mask


def prompt_ids(tokenizer, messages: Sequence[Any], tools: list[dict] | None = None) -> list[int]:
    """The opening context of an episode: the rendered messages plus ``<|im_start|>assistant\\n``."""
    text = tokenizer.apply_chat_template([chat._as_dict(m) for m in messages], tools=tools, tokenize=False,
                                         add_generation_prompt=True)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def continuation_ids(tokenizer, messages: Sequence[Any], add_generation_prompt: bool = True,
                     close_turn: bool = False) -> list[int]:
    """Context tokens to append after an assistant turn ended with ``<|im_end|>``.

    Renders ``"\\n"`` + each observation/user turn + ``<|im_start|>assistant\\n``. The policy's
    generated ids are kept as they are (token-in/token-out); only the new context is
    tokenized. ``close_turn=True`` first adds the ``<|im_end|>`` the policy did not emit (its
    turn was cut at max_new_tokens); that token is context, not trained on.
    """
    text = (chat.IM_END if close_turn else "") + "\n" + "".join(chat.render_message(m) for m in messages)
    if add_generation_prompt:
        text += f"{chat.IM_START}assistant\n"
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def encode_episode(tokenizer, messages: Sequence[Any], tools: list[dict] | None = None) -> tuple[list[int], list[int]]:
    """An episode's messages as the token sequence the HF agent would have grown, and its loss mask.

    Segment by segment, exactly like :class:`autoforge.rl.agent.HFAgent`: the opening
    context (:func:`prompt_ids`: system + tools + request + ``<|im_start|>assistant\\n``), then
    for each assistant turn its body through ``<|im_end|>`` tokenized on its own (mask 1: what
    the policy generates, interleaved ``<think>`` included), then the observations / user reply
    that follow it plus the next assistant header (:func:`continuation_ids`, mask 0). SFT on
    this layout teaches the tokens the policy is later sampled and scored on; a whole-text
    tokenization (:func:`encode_dialogue`) can merge a header's newline into the body.
    Messages after the last assistant turn (the user's closing line) are not included.
    """
    msgs = [chat._as_dict(m) for m in messages]
    turns = [i for i, m in enumerate(msgs) if m["role"] == "assistant"]
    if not turns:
        raise ConfigError("encode_episode: the dialogue has no assistant turn to train on")
    head = f"{chat.IM_START}assistant\n"
    ids = prompt_ids(tokenizer, msgs[:turns[0]], tools=tools)
    mask = [0] * len(ids)
    for k, i in enumerate(turns):
        body = chat.render_message(msgs[i])[len(head):-1]  # drop the header and the trailing "\n" (context)
        gen = list(tokenizer(body, add_special_tokens=False)["input_ids"])
        ids += gen
        mask += [1] * len(gen)
        if k + 1 < len(turns):
            ctx = continuation_ids(tokenizer, msgs[i + 1:turns[k + 1]])
            ids += ctx
            mask += [0] * len(ctx)
    return ids, mask
