"""TRL's ``GRPOTrainer`` over AutoForge environments, and ERPO's environment-level advantage in it.

TRL 1.16 (``GRPOTrainer(environment_factory=...)``) plays tool-using rollouts itself: it calls
``env.reset(**row)`` for each example, shows the model the environment's public methods as tools
(their JSON schemas come from the type hints and Google-style docstrings, through
``transformers.utils.get_json_schema``), runs the tool calls the model makes, and scores each
rollout with ``env.get_reward()``; a ``None`` reward is "unscorable": TRL leaves that rollout out
of its group's mean and std and gives it advantage 0. This module supplies those environments::

    from trl import GRPOConfig
    from autoforge.integrations.rows import task_rows
    from autoforge.integrations.trl import TRL_SYSTEM_PROMPT, ERPOTrainer, TRLEnvironments, add_response_template

    rows = task_rows(warehouse, split="train", system_prompt=TRL_SYSTEM_PROMPT, tool_schema="compact")
    envs = TRLEnvironments(warehouse, rows)                  # one environment class per AutoForge environment
    trainer = ERPOTrainer(model=model, args=GRPOConfig(...), processing_class=add_response_template(tokenizer),
                          train_dataset=envs.dataset(), environment_factory=envs.factories)
    trainer.train(); envs.close()

* **One class per environment** (:func:`environment_class`). TRL reads the tools off the class,
  so each AutoForge environment gets its own class whose methods are its accepted tools, built
  from the tool's OpenAI schema (``TaskRow.tools``, what the AutoForge agent is given): keyword
  parameters with type hints (``Literal`` for enums, ``list[...]`` for arrays, unions for
  ``anyOf``/``oneOf``/type lists), and a docstring holding the tool's description and each
  argument's. Where a hint cannot say all of a parameter's schema (an object's properties, a
  pattern, a format, bounds), the argument's description ends with that schema as JSON, so the
  model still sees it under a plain ``GRPOTrainer``; :class:`ERPOTrainer` renders the exact schema
  instead (``exact_tool_schemas``). A call runs in the sandbox (:class:`autoforge.envs.runtime.Environment`,
  all or nothing) and returns the observation text the AutoForge agent would see.
* **The user** is reached through one more tool, ``talk_to_user(message)``: TRL ends a rollout
  at the first turn without a tool call, so a question to the simulated user (offline scripted or
  ``llm[:model]``, :mod:`autoforge.rollout.users`, with injected errors at ``user_error_rate``) is a
  tool call whose result is the user's reply. After the user ends the conversation, tools no
  longer run (the AutoForge engine ends the episode there).
* **Reset** ``reset(**row)`` needs the row's ``task_id``; it loads that task's initial state into
  the sandbox and returns the opening user message (what the simulated user opens with) — or
  ``None`` when the row's prompt already ends with it (a :func:`task_rows` / ``--format hf``
  row used as it is), so the request is never shown twice. Multiple environments route by the
  ``environment`` column (the environment's name); :meth:`TRLEnvironments.dataset` writes it.
* **Reward** ``get_reward()`` is AutoForge's own (:func:`autoforge.rollout.reward.score`: the
  final state's hash equals S*; answer tasks also need the final message to state the answer),
  and ``None`` when the user-error judge (``rule`` by default, ``llm``, or ``none``) flags the
  dialogue (ERPO's MEU masking) or the rollout cannot be scored. The final message is the
  rollout's last assistant text: :class:`ERPOTrainer` hands it to each environment before
  scoring; under a plain ``GRPOTrainer`` it is the last message passed to ``talk_to_user``.
* **ERPO** :class:`ERPOTrainer` is a ``GRPOTrainer`` whose advantages are
  :func:`autoforge.rl.erpo.compute_advantages` over the whole generation batch (paper Eq. 4:
  per-task mean, std pooled over every valid rollout of the same environment; DAPO dynamic
  sampling drops tasks without reward variance; masked and dropped rollouts get advantage 0 and
  leave the loss). TRL's own GRPO normalizes per prompt group instead.
* **Tool calls in the chat template.** TRL (and ``transformers serve``) parse tool calls with the
  tokenizer's ``response_template``; TRL ships them only for the chat templates it knows.
  :func:`add_response_template` gives a Hermes/Qwen-format tokenizer — the tiny policy AutoForge
  builds (:mod:`autoforge.rl.chat`) — the one that reads its ``<tool_call>{json}</tool_call>``
  blocks, and saves it into a model directory for ``transformers serve``.

Needs the ``trl`` extra (``pip install -e ".[trl]"``). Defaults are ours unless noted.
"""

from __future__ import annotations

import inspect
import json
import random
import re
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Literal, Union

import torch
from trl import GRPOTrainer

from autoforge.errors import ConfigError
from autoforge.integrations.bundle import Bundle
from autoforge.integrations.episode import USER_TOOL, USER_TOOL_SYSTEM_PROMPT, LiveEpisode
from autoforge.integrations.rows import TaskRow
from autoforge.rl.erpo import advantages_with_info
from autoforge.rollout import reward as R
from autoforge.rollout.judge import make_judge
from autoforge.rollout.users import ErrorRates, sample_plan
from autoforge.types import Episode, Message, Task, ToolCode, content_id

__all__ = ["RESPONSE_TEMPLATE", "TRL_SYSTEM_PROMPT", "USER_TOOL", "ERPOTrainer", "TRLEnvironments",
           "add_response_template", "batch_advantages", "environment_class", "tool_method"]

RESERVED = ("reset", "get_reward", USER_TOOL)

TRL_SYSTEM_PROMPT = USER_TOOL_SYSTEM_PROMPT  # the engine's system prompt + how to reach the user (integrations.episode)

# How a Hermes/Qwen-format assistant turn reads back (transformers' declarative response parser): text, then
# <tool_call>{"name": ..., "arguments": {...}}</tool_call> blocks, up to <|im_end|>. The same layout as
# transformers serve's built-in fallback for Qwen2 models; <think> stays in the content (interleaved thinking).
RESPONSE_TEMPLATE: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "tool_calls": {
            "open_pattern": r"\s*<tool_call>",
            "close": "</tool_call>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {
            "close_pattern": r"\s*(?:<\|im_end\|>|<\|endoftext\|>)",
            "content": "text",
        },
    },
}


def add_response_template(tokenizer_or_dir: Any) -> Any:
    """Give a Hermes-format tokenizer :data:`RESPONSE_TEMPLATE` so TRL and ``transformers serve`` parse its tool calls.

    A tokenizer is changed in place and returned (pass it to ``GRPOTrainer`` as ``processing_class``).
    A model directory (a path) gets the template written into its ``tokenizer_config.json``
    (the weights are not touched) and its path is returned: ``transformers serve DIR`` then
    answers with native ``tool_calls``. A tokenizer whose chat template does not render
    ``<tool_call>`` blocks is refused (the template would never match what it generates).
    """
    if isinstance(tokenizer_or_dir, (str, Path)):
        path = Path(tokenizer_or_dir).expanduser()
        cfg_path = path / "tokenizer_config.json"
        if not cfg_path.is_file():
            raise ConfigError(f"{str(path)!r} is not a model directory with a tokenizer (no tokenizer_config.json)")
        cfg = json.loads(cfg_path.read_text())
        jinja = path / "chat_template.jinja"
        _check_hermes(cfg.get("chat_template") or (jinja.read_text() if jinja.is_file() else ""), str(path))
        cfg["response_template"] = RESPONSE_TEMPLATE
        tmp = cfg_path.with_name(cfg_path.name + ".tmp")
        tmp.write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n")
        tmp.replace(cfg_path)  # all or nothing: the weights and the other tokenizer files are not touched
        return path
    tok = tokenizer_or_dir
    _check_hermes(getattr(tok, "chat_template", None) or "", type(tok).__name__)
    tok.response_template = RESPONSE_TEMPLATE
    return tok


def _check_hermes(template: Any, where: str) -> None:
    if not isinstance(template, str) or "<tool_call>" not in template or "<|im_start|>" not in template:
        raise ConfigError(f"add_response_template: the chat template of {where} does not render Hermes <|im_start|> "
                          "turns with <tool_call> blocks, so this response template would never match what the model "
                          "generates; set a response_template that reads its own tool-call format instead "
                          "(transformers docs: chat response parsing)")


# --------------------------------------------------------------------------- tools as methods


class _Unset:
    """The default of an optional tool argument the model left out (it is not sent to the tool)."""

    def __repr__(self) -> str:
        return "<not given>"


UNSET = _Unset()
_JSON_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "null": type(None),
                               "object": dict, "array": list}


def _hint(schema: Any) -> Any:
    """The Python type hint closest to a JSON Schema (what transformers turns back into a schema)."""
    if not isinstance(schema, dict):
        return Any
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(v, (str, int, float, bool)) or v is None for v in enum):
        return Literal[tuple(enum)]
    alts = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(alts, list) and alts:
        hints = tuple(dict.fromkeys(_hint(a) for a in alts))
        return hints[0] if len(hints) == 1 else Union[hints]
    t = schema.get("type")
    if isinstance(t, list) and t:
        hints = tuple(dict.fromkeys(_hint({**schema, "type": x}) for x in t))
        return hints[0] if len(hints) == 1 else Union[hints]
    if t == "array":
        items = schema.get("items")
        return list[_hint(items)] if isinstance(items, dict) and items else list
    if t == "object":
        extra = schema.get("additionalProperties")
        return dict[str, _hint(extra)] if isinstance(extra, dict) and extra and not schema.get("properties") else dict
    return _JSON_TYPES.get(t, Any) if isinstance(t, str) else Any


_SECTION = re.compile(r"\b(Args|Returns|Raises):")


def _one_line(text: Any) -> str:
    """Docstring-safe text: one line (a new line would start a new argument), no section headers."""
    return _SECTION.sub(r"\1 :", " ".join(str(text or "").split()))


def _schema_without_description(schema: dict) -> dict:
    return {k: v for k, v in schema.items() if k != "description"}


def tool_method(schema: dict[str, Any], call: Callable[[Any, str, dict], str]) -> Callable:
    """A method for one OpenAI function schema: ``method(self, **arguments) -> call(self, name, arguments)``.

    Its ``__name__`` is the tool's name, its signature lists the tool's parameters (keyword-only;
    the optional ones default to :data:`UNSET` and are left out of the call), and its annotations
    and docstring are what ``transformers.utils.get_json_schema`` reads: the tool's description,
    each parameter's type hint and description. A parameter whose schema the hint cannot carry
    whole gets its JSON Schema appended to its description.
    """
    from transformers.utils import get_json_schema

    fn_schema = schema.get("function", schema)
    name = fn_schema.get("name")
    if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
        raise ConfigError(f"tool {name!r}: TRL calls tools as Python methods, so the name must be an identifier "
                          "that does not start with '_'")
    params = fn_schema.get("parameters") or {}
    props: dict[str, Any] = params.get("properties") or {}
    required = set(params.get("required") or [])
    bad = [p for p in props if not p.isidentifier() or p == "self"]
    if bad:
        raise ConfigError(f"tool {name!r}: parameters {bad} are not Python identifiers; TRL passes arguments as "
                          "keyword arguments, so rename them in the tool docs")

    def method(self, **arguments):
        return call(self, name, {k: v for k, v in arguments.items() if v is not UNSET})

    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    hints: dict[str, Any] = {}
    for p, sub in props.items():
        hints[p] = _hint(sub)
        default = inspect.Parameter.empty if p in required else UNSET
        parameters.append(inspect.Parameter(p, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=hints[p]))
    method.__name__ = method.__qualname__ = name
    method.__signature__ = inspect.Signature(parameters)
    method.__annotations__ = hints

    def docstring(extra: dict[str, str]) -> str:
        lines = [_one_line(fn_schema.get("description")) or name]
        if props:
            lines += ["", "Args:"]
            for p, sub in props.items():
                desc = _one_line(sub.get("description") if isinstance(sub, dict) else "") or p
                lines.append(f"    {p}: {desc}{extra.get(p, '')}")
        return "\n".join(lines)

    method.__doc__ = docstring({})
    method.tool_schema = {"type": "function", "function": fn_schema}  # the exact schema (ERPOTrainer renders it)
    seen = get_json_schema(method)["function"]["parameters"]["properties"]
    extra = {}
    for p, sub in props.items():
        want = _schema_without_description(sub) if isinstance(sub, dict) else {}
        if _schema_without_description(seen.get(p, {})) != want:
            extra[p] = " JSON Schema: " + json.dumps(want, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    if extra:
        method.__doc__ = docstring(extra)
    return method


# --------------------------------------------------------------------------- the environment


class _Spec:
    """What every instance of one environment class shares (built once by :class:`TRLEnvironments`)."""

    def __init__(self, env_id: str, name: str, tools: list[ToolCode], tasks: dict[str, Task], options: dict[str, Any]):
        self.env_id, self.name, self.tools, self.tasks, self.options = env_id, name, tools, tasks, options
        self.instances: list["AutoForgeEnvironment"] = []
        self.lock = threading.Lock()


class AutoForgeEnvironment:
    """One rollout's AutoForge environment for TRL (subclassed per environment by :func:`environment_class`).

    Public methods are tools (TRL's rule): ``reset`` and ``get_reward`` are TRL's, ``talk_to_user``
    and the environment's tools are the model's; everything else is private.
    """

    _spec: _Spec  # set on each subclass

    def __init__(self):
        spec = self._spec
        # the sandbox, the user, the transcript and the engine's scorer (integrations.episode: the bundle's too)
        self._live = LiveEpisode(spec.tools, env_id=spec.env_id, judged=spec.options.get("judged"),
                                 max_observation_chars=spec.options["max_observation_chars"])
        self._final: str | None = None  # the rollout's last assistant text (ERPOTrainer sets it)
        self._episodes = 0
        self.last_reward_info: dict[str, Any] = {}  # the components of the last get_reward(), for diagnosis
        with spec.lock:
            self._index = len(spec.instances)  # (seeds the user's injected errors: the same run, the same draws)
            spec.instances.append(self)

    # ------------------------------------------------------------------ TRL's interface
    def reset(self, **row: Any) -> str | None:
        spec, opts = self._spec, self._spec.options
        task_id = row.get("task_id")
        task = spec.tasks.get(task_id) if isinstance(task_id, str) else None
        if task is None:
            known = ", ".join(sorted(spec.tasks)[:5])
            raise ConfigError(f"environment {spec.name!r}: reset got task_id {task_id!r}, which is not one of its "
                              f"{len(spec.tasks)} tasks (e.g. {known}); rows need the task_id of a task of this "
                              "environment (route rows by their 'environment' column)")
        self._episodes += 1
        seed = random.Random(f"trl:{opts['seed']}:{task.task_id}:{self._index}:{self._episodes}").randrange(2**31)
        plan = sample_plan(opts["error_rates"], random.Random(f"plan:{seed}"), task)
        self._final = None
        opening = self._live.start(task, opts["user_factory"](task, plan, seed), _system_text(row))
        return None if _prompt_ends_with(row.get("prompt"), opening) else opening

    def get_reward(self) -> float | None:
        """1.0 / 0.0 as AutoForge scores the episode; None when the judge flags a user error or it cannot be scored."""
        task = self._require_task()
        # the engine's reward; a call the rule engine refused is a rule break (issue 33): 0 unless
        # AUTOFORGE_ZERO_ON_RULE_BREAK is off
        reward, info, messages = self._live.score(self._final)
        judge = self._spec.options["judge"]
        if judge is not None and reward is not None:
            termination = "user_stop" if self._live.ended else "agent_done"
            verdict = judge.judge(task, _episode(task, messages, termination, self._spec.options["user_name"]))
            info["judge"] = verdict.as_dict()
            if verdict.flag:
                reward, info["unscored_reason"] = None, f"user error ({verdict.kind}): masked (ERPO MEU)"
        try:
            info["user_error"] = self._live.user.ground_truth()
        except Exception:  # noqa: BLE001 - diagnostics only
            pass
        self.last_reward_info = {**info, "reward": reward, "task_id": task.task_id}
        return reward

    # ------------------------------------------------------------------ the user as a tool
    def talk_to_user(self, message: str) -> str:
        """Send a message to the user (a question, a confirmation, a report) and return the user's reply.

        Args:
            message: What you say to the user.
        """
        self._require_task()
        return self._live.talk(message)

    # ------------------------------------------------------------------ private helpers
    def _call_tool(self, name: str, arguments: dict) -> str:
        self._require_task()
        return self._live.call(name, arguments)

    def _set_final_message(self, text: str | None) -> None:
        self._final = text

    def _last_said(self) -> str:
        return R.final_message(self._live.messages)

    def _require_task(self) -> Task:
        if self._live.task is None:
            raise ConfigError(f"environment {self._spec.name!r}: call reset(**row) before its tools or get_reward()")
        return self._live.task

    def _close(self) -> None:
        self._live.close()


def _system_text(row: dict[str, Any]) -> str:
    prompt = row.get("prompt")
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], dict) and prompt[0].get("role") == "system":
        return str(prompt[0].get("content") or "")
    return str(row.get("system_prompt") or TRL_SYSTEM_PROMPT)


def _prompt_ends_with(prompt: Any, opening: str) -> bool:
    if not isinstance(prompt, list) or not prompt or not isinstance(prompt[-1], dict):
        return False
    last = prompt[-1]
    return last.get("role") == "user" and str(last.get("content") or "").strip() == opening.strip()


def _episode(task: Task, messages: list[Message], termination: str, user_name: str) -> Episode:
    """The dialogue as an :class:`Episode`, the shape the user-error judges read."""
    return Episode(episode_id=content_id("ep", task.task_id, "trl", user_name, len(messages)), task_id=task.task_id,
                   env_id=task.env_id, agent="trl", user_sim=user_name, messages=messages, termination=termination)


def environment_class(env_id: str, name: str, tool_schemas: list[dict[str, Any]], tools: list[ToolCode],
                      tasks: dict[str, Task], options: dict[str, Any]) -> type[AutoForgeEnvironment]:
    """The TRL environment class of one AutoForge environment: its tools as methods (:func:`tool_method`)."""
    names = [s.get("function", s).get("name") for s in tool_schemas]
    clash = sorted(set(names) & set(RESERVED))
    if clash:
        raise ConfigError(f"environment {name!r}: tools named {clash} clash with TRL's reset/get_reward or the "
                          f"{USER_TOOL} tool; rename them in the tool docs")
    members: dict[str, Any] = {"_spec": _Spec(env_id, name, tools, tasks, options), "__doc__":
                               f"AutoForge environment {name!r} ({env_id}) for TRL: {len(names)} tools + {USER_TOOL}."}
    for s in tool_schemas:
        m = tool_method(s, lambda self, tool, args: self._call_tool(tool, args))
        members[m.__name__] = m
    cls_name = "AutoForge_" + re.sub(r"\W", "_", name)
    return type(cls_name, (AutoForgeEnvironment,), members)


def _load_tasks(source: "str | None | Bundle", task_ids: list[str]
                ) -> tuple[dict[str, Task], dict[str, list[ToolCode]], dict[str, list[dict]]]:
    """The tasks of ``task_ids`` (any status), the accepted tool code and the judged rules of their environments,
    from the warehouse or from a :class:`Bundle`."""
    if isinstance(source, Bundle):
        known = set(source.task_ids())
        tasks = {t: source.task(t).to_task() for t in task_ids if t in known}  # (unknown ones: reported by the caller)
        envs = [source.env(e) for e in sorted({t.env_id for t in tasks.values()})]
        return tasks, {e.env_id: list(e.tools) for e in envs}, {e.env_id: list(e.rules.judged) for e in envs}
    from autoforge.pipeline.corpus import accepted_tools_by_env, judged_rules, tasks_by_id

    tasks = tasks_by_id(source, task_ids)
    env_ids = {t.env_id for t in tasks.values()}
    return tasks, accepted_tools_by_env(source, env_ids), judged_rules(source, env_ids)


class TRLEnvironments:
    """``environment_factory`` for ``GRPOTrainer`` over the tasks of :class:`TaskRow` rows (any environments).

    ``TRLEnvironments(warehouse, rows, user="offline", judge="rule", user_error_rate=0.0, seed=0)``:

    * ``warehouse``: where the tasks, tool code and rules are read: a warehouse, or an environment
      bundle (:class:`autoforge.integrations.bundle.Bundle`: no warehouse needed);
    * ``rows``: :func:`autoforge.integrations.rows.task_rows` records (their ``tools`` are the
      schemas the methods are built from: ``tool_schema="compact"`` there gives compact ones), or
      :meth:`Bundle.task_rows <autoforge.integrations.bundle.Bundle.task_rows>` from a bundle;
    * ``user``: ``offline`` (scripted) or ``llm[:model]`` (OpenAI-compatible, ``AUTOFORGE_OPENAI_*``);
    * ``judge``: ``rule`` | ``llm`` | ``none``, the user-error judge whose flag masks a rollout;
    * ``user_error_rate``: injected user errors per episode, split evenly over the three kinds
      (``autoforge eval --user-error-rate``), or an :class:`ErrorRates`;
    * ``max_observation_chars``: longer tool outputs are cut (the engine's default, 8,000).

    :attr:`factories` maps each environment's name to its class (pass it as
    ``environment_factory``); :meth:`dataset` is the matching ``train_dataset``; :meth:`close`
    hands every instance's sandbox worker back.
    """

    def __init__(self, warehouse: "str | None | Bundle", rows: Iterable[TaskRow], *, user: str = "offline",
                 judge: str = "rule",
                 user_error_rate: float | ErrorRates = 0.0, seed: int = 0, settings: Any = None,
                 temperature: float = 0.0, max_observation_chars: int = 8_000):
        from autoforge.rollout.evaluate import make_user_factory, openai_client

        self.rows = [r if isinstance(r, TaskRow) else TaskRow.model_validate(r) for r in rows]
        if not self.rows:
            raise ConfigError("TRLEnvironments: no task rows; build them with task_rows(warehouse, split='train')")
        names: dict[str, str] = {}
        for r in self.rows:
            if names.setdefault(r.env_name, r.env_id) != r.env_id:
                raise ConfigError(f"two environments are named {r.env_name!r} ({names[r.env_name]}, {r.env_id}); "
                                  "TRL routes rows by name, so give them one environment each")
        by_id, tools_by_env, judged = _load_tasks(warehouse, [r.task_id for r in self.rows])
        where = "the bundle" if isinstance(warehouse, Bundle) else "the warehouse's tasks table"
        missing = [r.task_id for r in self.rows if r.task_id not in by_id]
        if missing:
            raise ConfigError(f"{len(missing)} task row(s) are not in {where} (e.g. {missing[0]}); "
                              f"build the rows from this {'bundle' if isinstance(warehouse, Bundle) else 'warehouse'}")
        rates = user_error_rate if isinstance(user_error_rate, ErrorRates) else ErrorRates.uniform(user_error_rate)
        user_factory, user_name = make_user_factory(user, settings=settings, temperature=temperature)
        judge_obj = make_judge(judge, openai_client(settings, None) if judge == "llm" else None)
        options = {"seed": seed, "error_rates": rates, "user_factory": user_factory, "user_name": user_name,
                   "judge": judge_obj, "max_observation_chars": max_observation_chars}
        self.classes: dict[str, type[AutoForgeEnvironment]] = {}
        for env_name, env_id in sorted(names.items()):
            env_rows = [r for r in self.rows if r.env_id == env_id]
            code = tools_by_env.get(env_id) or []
            if not code:
                raise ConfigError(f"environment {env_name!r} ({env_id}) has no accepted tool code in "
                                  f"{'the bundle' if isinstance(warehouse, Bundle) else 'the warehouse'}")
            self.classes[env_name] = environment_class(env_id, env_name, env_rows[0].tools, code,
                                                       {r.task_id: by_id[r.task_id] for r in env_rows},
                                                       {**options, "judged": judged.get(env_id, [])})  # issue 33

    @property
    def factories(self) -> dict[str, type[AutoForgeEnvironment]]:
        """``{environment name: class}``: GRPOTrainer's ``environment_factory`` (a class is a factory)."""
        return dict(self.classes)

    def dataset(self, rows: Iterable[TaskRow] | None = None):
        """A ``datasets.Dataset`` for ``GRPOTrainer``: ``prompt`` (the row's system prompt and an empty user turn
        that ``reset`` fills with the opening request), ``environment`` (routing), ``task_id``, ``env_id``,
        ``kind``, ``split``."""
        from datasets import Dataset

        chosen = list(rows) if rows is not None else self.rows
        return Dataset.from_list([{
            "prompt": [{"role": "system", "content": r.system_prompt}, {"role": "user", "content": ""}],
            "environment": r.env_name, "task_id": r.task_id, "env_id": r.env_id, "kind": r.kind, "split": r.split,
        } for r in chosen])

    def instances(self) -> list[AutoForgeEnvironment]:
        return [i for cls in self.classes.values() for i in cls._spec.instances]

    def close(self) -> None:
        """Hand every instance's sandbox worker back to the pool."""
        for inst in self.instances():
            inst._close()


# --------------------------------------------------------------------------- ERPO inside TRL


def batch_advantages(rewards_per_func: torch.Tensor, weights: torch.Tensor, task_ids: list[str], env_ids: list[str], *,
                     level: Literal["env", "task"] = "env", eps: float = 1e-6, dynamic_sampling: bool = True,
                     mask_user_errors: bool = True):
    """ERPO advantages of one TRL generation batch: ``(advantages [B], kept [B] bool, info)``.

    ``rewards_per_func`` is TRL's ``[B, n_funcs]`` table (NaN where a function returned None).
    A rollout's reward is the weighted sum of its non-NaN entries (TRL's ``sum_then_normalize``);
    a rollout where every entry is NaN is a masked one (MEU: invalid). Then
    :func:`autoforge.rl.erpo.advantages_with_info` (``level="env"``: paper Eq. 4); a masked rollout
    or one of a dropped task (dynamic sampling) is not kept: advantage 0 and out of the loss.
    """
    invalid = torch.isnan(rewards_per_func).all(dim=1)
    if not mask_user_errors and bool(invalid.any()):
        raise ConfigError("mask_user_errors=False needs a reward for every rollout; some were None (judge flags)")
    summed = (rewards_per_func * weights.to(rewards_per_func.device).unsqueeze(0)).nansum(dim=1)
    rewards = [0.0 if bad else float(r) for r, bad in zip(summed.tolist(), invalid.tolist())]
    info = advantages_with_info(rewards, task_ids, env_ids, [not b for b in invalid.tolist()], level, eps,
                                dynamic_sampling)
    adv = torch.tensor([0.0 if a is None else a for a in info.advantages], dtype=torch.float32,
                       device=rewards_per_func.device)
    kept = torch.tensor([a is not None for a in info.advantages], device=rewards_per_func.device)
    return adv, kept, info


class ERPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` with ERPO's advantages (:func:`batch_advantages`) instead of GRPO's per-group ones.

    Extra keyword arguments (the rest are ``GRPOTrainer``'s):

    * ``advantage_level``: ``"env"`` (ERPO, paper Eq. 4: std pooled per environment) or ``"task"``
      (GRPO's per-task std, the ablation; with dynamic sampling and masking still ERPO's);
    * ``dynamic_sampling``: drop tasks whose valid rollouts all score the same (DAPO; default on);
    * ``erpo_eps``: the epsilon under the std (``autoforge.rl.erpo``'s 1e-6);
    * ``exact_tool_schemas``: render each AutoForge tool in the prompt with its own JSON schema
      (``TaskRow.tools``: patterns, formats, bounds, nested objects as they are) instead of what
      ``transformers.utils.get_json_schema`` rebuilds from the method (types, enums, arrays and
      required only; the rest as JSON text in the argument's description). Default on.

    A rollout's environment is its row's ``env_id`` (else ``environment``), its task the row's
    ``task_id`` (else its prompt group). Masked (judge-flagged) rollouts and dropped tasks leave
    the loss: their completion mask is zeroed and the token count the loss divides by recomputed.
    Before scoring, each AutoForge environment is given its rollout's last assistant text (the
    final message an answer task is judged on). ``last_erpo`` holds the last batch's rewards,
    ids, advantages and per-environment std; the metrics log ``erpo/masked``,
    ``erpo/dropped_tasks`` and ``erpo/kept``. ERPO's scale replaces TRL's ``scale_rewards`` (which is
    then only used for TRL's own logging); the rewards are summed with ``reward_weights`` first.
    """

    def __init__(self, *args: Any, advantage_level: Literal["env", "task"] = "env", dynamic_sampling: bool = True,
                 erpo_eps: float = 1e-6, exact_tool_schemas: bool = True, **kwargs: Any):
        if advantage_level not in ("env", "task"):
            raise ConfigError(f"advantage_level must be 'env' or 'task', got {advantage_level!r}")
        super().__init__(*args, **kwargs)
        if self.multi_objective_aggregation != "sum_then_normalize":
            raise ConfigError("ERPOTrainer sums the weighted rewards before its advantage (TRL's sum_then_normalize); "
                              f"multi_objective_aggregation={self.multi_objective_aggregation!r} is not supported")
        self.advantage_level, self.dynamic_sampling, self.erpo_eps = advantage_level, dynamic_sampling, erpo_eps
        if exact_tool_schemas and getattr(self, "_env_tools", None):
            # TRL reads _env_tools only to render each prompt's tools and to type parsed arguments; both take
            # schema dicts. Execution goes through the environment's methods (_sync_tool_dicts), unchanged.
            self._env_tools = {name: [getattr(getattr(t, "__func__", t), "tool_schema", t) for t in tools]
                               for name, tools in self._env_tools.items()}
        self.last_erpo: dict[str, Any] = {}
        self._erpo_batch: dict[str, Any] | None = None

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        from accelerate.utils import gather_object

        for env, completion in zip(self.environments or [], completions):
            if isinstance(env, AutoForgeEnvironment):
                env._set_final_message(_last_assistant_text(completion))
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        n = self.num_generations if self.model.training else self.num_generations_eval
        start = self.accelerator.process_index * len(inputs)
        task_ids = [str(x.get("task_id") or f"group{(start + i) // n}") for i, x in enumerate(inputs)]
        env_ids = [str(x.get("env_id") or x.get("environment") or "env") for x in inputs]
        self._erpo_batch = {"rewards_per_func": rewards_per_func, "task_ids": gather_object(task_ids),
                            "env_ids": gather_object(env_ids)}
        return rewards_per_func

    def _generate_and_score_completions(self, inputs):
        self._erpo_batch = None
        out = super()._generate_and_score_completions(inputs)
        batch = self._erpo_batch
        if batch is None:  # no rewards were computed (nothing to replace)
            return out
        adv, kept, info = batch_advantages(batch["rewards_per_func"], self.reward_weights, batch["task_ids"],
                                           batch["env_ids"], level=self.advantage_level, eps=self.erpo_eps,
                                           dynamic_sampling=self.dynamic_sampling)
        n_local = out["advantages"].shape[0]
        sl = slice(self.accelerator.process_index * n_local, (self.accelerator.process_index + 1) * n_local)
        out["advantages"] = adv[sl].to(out["advantages"].device)
        keep = kept[sl].to(out["completion_mask"].device)
        out["completion_mask"] = out["completion_mask"] * keep.unsqueeze(1).to(out["completion_mask"].dtype)
        mask = out["completion_mask"]
        loss_mask = mask if out.get("tool_mask") is None else mask * out["tool_mask"]
        out["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
        mode = "train" if self.model.training else "eval"
        self._metrics[mode]["erpo/masked"].append(float(info.masked))
        self._metrics[mode]["erpo/dropped_tasks"].append(float(len(info.dropped_tasks)))
        self._metrics[mode]["erpo/kept"].append(float(kept.float().mean().item()))
        self.last_erpo = {"rewards_per_func": batch["rewards_per_func"].detach().cpu(), "task_ids": batch["task_ids"],
                          "env_ids": batch["env_ids"], "advantages": adv.detach().cpu(), "kept": kept.cpu(),
                          "scale": dict(info.scale), "masked": info.masked, "dropped_tasks": list(info.dropped_tasks)}
        return out


def _last_assistant_text(completion: Any) -> str:
    """The last assistant text of a TRL completion (a list of chat messages, or plain text)."""
    if isinstance(completion, str):
        return completion
    for m in reversed(completion or []):
        if isinstance(m, dict) and m.get("role") == "assistant":
            content = m.get("content")
            if isinstance(content, list):
                content = " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
            if content:
                return str(content)
    return ""
