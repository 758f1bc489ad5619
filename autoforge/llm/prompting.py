"""Generic helpers for prompt templates; the templates themselves live with the step that uses them.

Each template is a plain function returning chat messages (``list[dict]``) that a stage sends
through ``client.structured(step, messages, ResponseModel)`` (or ``client.chat``). The response
model belongs to the stage; the JSON schema travels in the request's ``response_format``, so
prompts describe the *task*, not the format. Inputs are records from :mod:`autoforge.types` or
plain dicts; payloads are sent as canonical JSON, so identical inputs give identical prompts and
hit the response cache on a re-run.

Where the prompts are (steps of arXiv 2512.22857):

* environment synthesis, Sec. 3.1 (``state_schema``, ``tool_code``, ``tool_repair``): the
  registered templates of :mod:`autoforge.envs.prompts`;
* the others build their messages where they call the client: the tool graph's edge judgement,
  Sec. 3.2 (``tool_graph``, :mod:`autoforge.dags.graph`), the request rewrite, Sec. 3.3
  (``task_request``, :mod:`autoforge.tasks.phrasing`), the simulated user and ERPO's user-error
  judge, Sec. 4 (``user_sim``, :mod:`autoforge.rollout.users`; ``judge``,
  :mod:`autoforge.rollout.judge`) and the agent (``agent``, :mod:`autoforge.rollout.agents`).

A template registers itself under its step name with :func:`register` when its module is
imported; look one up with :func:`get_prompt` (an unknown step name raises with the steps
registered so far).
"""

from __future__ import annotations

from typing import Any, Callable

from pydantic import BaseModel

from autoforge.errors import ConfigError
from autoforge.types import canonical_json

PromptFn = Callable[..., list[dict]]
PROMPTS: dict[str, PromptFn] = {}


def register(step: str) -> Callable[[PromptFn], PromptFn]:
    def deco(fn: PromptFn) -> PromptFn:
        if step in PROMPTS:
            raise ConfigError(f"prompt step {step!r} is registered twice")
        PROMPTS[step] = fn
        return fn

    return deco


def get_prompt(step: str) -> PromptFn:
    try:
        return PROMPTS[step]
    except KeyError:
        raise ConfigError(f"no prompt template for step {step!r}; known steps: {', '.join(sorted(PROMPTS))}") from None


def dump(obj: Any) -> Any:
    """JSON-ready form of pydantic models (``exclude_none``), lists, tuples and dicts of them."""
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json", exclude_none=True)
    if isinstance(obj, (list, tuple)):
        return [dump(o) for o in obj]
    if isinstance(obj, dict):
        return {k: dump(v) for k, v in obj.items()}
    return obj


def tool_brief(tool: Any) -> dict:
    """Name, description, parameters and output schema of a ToolSpec/ToolCode/dict."""
    d = dump(tool)
    return {k: d[k] for k in ("name", "description", "parameters", "output_schema", "effect") if d.get(k) not in (None, "")}


def msgs(system: str, payload: dict) -> list[dict]:
    """A system message plus the payload as one user message of canonical JSON."""
    return [{"role": "system", "content": system}, {"role": "user", "content": canonical_json(dump(payload))}]
