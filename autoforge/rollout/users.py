"""Simulated users, and the user errors injected into them.

Paper (arXiv 2512.22857, Sec. 3.4): a simulated user opens the episode with the task's request
and ends it when it judges its requirements met; the paper's user is an LLM (GPT-4.1) and its
errors (wrong or missing information) are why ERPO masks rollouts (MEU). Published reports put
up to 30% of failed tau2-bench episodes on the user simulator (issue 5), so errors are
*injected* here at known rates and recorded as ground truth, to measure the judge that has to
catch them.

- :class:`OfflineUser`: scripted. Reveals a hidden fact when the agent names it in a request
  (format in :mod:`autoforge.dialogue`), confirms actions ("Yes, please go ahead.": what a
  judged confirm-first rule needs, :mod:`autoforge.rollout.rule_judge`), ends the episode when the
  agent reports the work done or that it cannot be done (a boundary task's answer), gives up after
  a few turns it cannot answer.
- :class:`LLMUser`: any OpenAI-compatible model, prompted with the request, the hidden facts
  and an explicit stop rule (do not end while a requested change is pending).

Error kinds (each at its own rate; at most one per episode, drawn once per episode):

- ``wrong_fact``: the first fact the agent asks for is answered with a plausible wrong value;
- ``withheld_fact``: the first fact the agent asks for that the request does not already state
  is refused ("I don't have it") — refusing what the agent already has is no error;
- ``premature_stop``: the user ends the episode at its first reply to an agent message that
  does not report the work done.

Ground truth is what *manifested*: an injected error the dialogue never reached (the agent
never asked for a fact) is not counted as a user error (``Episode.user_error`` False); the
plan is kept in ``Episode.diagnostics["user"]``.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

from autoforge.errors import ConfigError
from autoforge import dialogue as D
from autoforge.rollout.engine import UserTurn
from autoforge.types import Message, Task

ERROR_KINDS = ("wrong_fact", "withheld_fact", "premature_stop")


@dataclass(frozen=True)
class ErrorRates:
    """Per-episode probability of each injected user error (their sum must be <= 1)."""

    wrong_fact: float = 0.0
    withheld_fact: float = 0.0
    premature_stop: float = 0.0

    def __post_init__(self):
        vals = [self.wrong_fact, self.withheld_fact, self.premature_stop]
        if any(v < 0 for v in vals) or sum(vals) > 1 + 1e-9:
            raise ConfigError(f"user error rates must be >= 0 and sum to <= 1, got {vals}")

    @classmethod
    def uniform(cls, total: float) -> "ErrorRates":
        """``total`` split evenly over the three kinds (``--user-error-rate``)."""
        if not 0 <= total <= 1:
            raise ConfigError(f"user error rate must be within [0, 1], got {total}")
        return cls(total / 3, total / 3, total / 3)

    @property
    def total(self) -> float:
        return self.wrong_fact + self.withheld_fact + self.premature_stop

    def label(self) -> str:
        if self.total == 0:
            return ""
        parts = [f"{k}={getattr(self, k):.3g}" for k in ERROR_KINDS if getattr(self, k) > 0]
        return "[" + ",".join(parts) + "]"


@dataclass
class InjectionPlan:
    kind: str | None = None  # one of ERROR_KINDS, or None (a clean user)
    fact: str | None = None  # the fact it hit (chosen when the agent first asks for one)
    wrong_value: Any = None
    manifested: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"planned": self.kind, "fact": self.fact, "wrong_value": self.wrong_value, "manifested": self.manifested}


def sample_plan(rates: ErrorRates, rng: random.Random, task: Task) -> InjectionPlan:
    """Draw this episode's injected error (at most one). Fact errors need a task with facts."""
    u = rng.random()
    acc = 0.0
    for kind in ERROR_KINDS:
        acc += getattr(rates, kind)
        if u < acc:
            if kind != "premature_stop" and not task.user_facts:
                return InjectionPlan()
            return InjectionPlan(kind=kind)
    return InjectionPlan()


def perturb(value: Any, rng: random.Random) -> Any:
    """A plausible but wrong version of ``value`` (never equal to it)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + rng.choice([1, 2, 3, -1]) if value > 1 else value + rng.choice([1, 2, 3])
    if isinstance(value, float):
        out = round(value + rng.choice([1.0, 2.5, 5.0, 10.0]), 2)
        return out if out != value else (value * 2 if value else 1.0)
    if isinstance(value, str):
        digits = [i for i, c in enumerate(value) if c in "0123456789"]
        if digits:
            i = digits[-1]
            d = (int(value[i]) + rng.choice([1, 2, 3])) % 10
            return value[:i] + str(d) + value[i + 1:]
        letters = [i for i, c in enumerate(value.split("@")[0]) if c.isascii() and c.isalpha()]
        if letters:
            i = letters[-1]
            c = value[i]
            nc = chr((ord(c.lower()) - 97 + rng.choice([1, 2, 3])) % 26 + 97)
            return value[:i] + (nc.upper() if c.isupper() else nc) + value[i + 1:]
        return value + "x"
    if isinstance(value, list):
        return value[:-1] if len(value) > 1 else value + value if value else ["unknown"]
    if isinstance(value, dict) and value:
        k = sorted(value)[0]
        return {**value, k: perturb(value[k], rng)}
    return "unknown"


def _last_agent_message(messages: list[Message]) -> str:
    for m in reversed(messages):
        if m.role == "assistant":
            return m.content or ""
    return ""


# --------------------------------------------------------------------------- offline user


_ASKS_YOUR = re.compile(r"\b(?:tell|give|send|provide|share)\s+(?:me|us)\s+(?:with\s+)?your\s+([\w' -]{2,40}?)\s*[?.]", re.I)


class OfflineUser:
    """The scripted user (see module docstring). One instance per episode."""

    def __init__(self, task: Task, plan: InjectionPlan | None = None, *, seed: int = 0, max_unhelpful: int = 3,
                 name: str = "offline"):
        self.task = task
        self.plan = plan or InjectionPlan()
        self.rng = random.Random(f"offline-user:{seed}:{task.task_id}")
        self.max_unhelpful = max_unhelpful
        self.unhelpful = 0
        self.name = name
        self.revealed: dict[str, Any] = {}

    def opening(self) -> str:
        return self.task.request

    def _targetable(self, key: str) -> bool:
        """Can the injected error hit this fact? Withholding a fact the request already states, or
        one whose value another fact carries too, is no error (the agent has it anyway), so
        ``withheld_fact`` only hits facts that are really hidden."""
        if self.plan.kind == "withheld_fact":
            facts, value = self.task.user_facts, self.task.user_facts[key]
            twin = any(k != key and v == value for k, v in facts.items())  # given anyway under another name
            return not twin and not D.states_value(self.task.request, value)
        return True

    def _fact_answer(self, key: str) -> str:
        p = self.plan
        if p.kind in ("wrong_fact", "withheld_fact") and (p.fact == key or (p.fact is None and self._targetable(key))):
            if p.fact is None:
                p.fact = key
                if p.kind == "wrong_fact":
                    p.wrong_value = perturb(self.task.user_facts[key], self.rng)
            p.manifested = True
            if p.kind == "withheld_fact":
                return f"Sorry, I don't have my {D.fact_words(key)} with me right now."
            self.revealed[key] = p.wrong_value
            return D.fact_line(key, p.wrong_value)
        self.revealed[key] = self.task.user_facts[key]
        return D.fact_line(key, self.task.user_facts[key])

    def reply(self, messages: list[Message]) -> UserTurn:
        text = _last_agent_message(messages)
        done = D.claims_completion(text)
        if self.plan.kind == "premature_stop" and not self.plan.manifested and not done:
            self.plan.manifested = True
            return UserTurn(f"Actually, never mind — that's all for now, thanks. {D.STOP}", stop=True)
        asked = D.asks_for_facts(text, list(self.task.user_facts))
        if asked:
            answers = [self._fact_answer(k) for k in asked]
            lines = list(dict.fromkeys(a for a in answers if a.startswith("- ")))  # facts named alike: one line
            notes = [a for a in answers if not a.startswith("- ")]
            body = ("Sure, here you go:\n" + "\n".join(lines)) if lines else ""
            return UserTurn("\n".join(x for x in [body, *notes] if x))
        if done:
            return UserTurn(f"Great, thank you — that's everything. {D.STOP}", stop=True)
        if D.asks_confirmation(text):
            return UserTurn("Yes, please go ahead.")
        self.unhelpful += 1
        if self.unhelpful > self.max_unhelpful:
            return UserTurn(f"I don't think we're getting anywhere, so I'll stop here. {D.STOP}", stop=True, gave_up=True)
        lacks = _ASKS_YOUR.search(text)
        if lacks:  # asked for something of theirs they were never given (an identity the task withholds)
            return UserTurn(f"Sorry, I don't have my {lacks.group(1).strip()} with me. Please go ahead with my request.")
        if D.is_request(text):
            return UserTurn("I'm not sure about that — I've told you what I know. Please go ahead with my request.")
        return UserTurn("Please go ahead with my request and let me know when it's done.")

    def ground_truth(self) -> tuple[bool | None, str | None]:
        return (True, self.plan.kind) if self.plan.manifested else (False, None)

    def diagnostics(self) -> dict[str, Any]:
        return {**self.plan.as_dict(), "unhelpful_turns": self.unhelpful}


# --------------------------------------------------------------------------- LLM user


USER_SYSTEM_PROMPT = """You are simulating a user who is chatting with a customer-service agent. You are the USER, not the agent.

Your request (what you want done):
{request}

Facts you know (share each one only when the agent asks for it; never invent other details):
{facts}
{withheld}
Rules:
- Write short, natural messages, one turn at a time. Do not reveal these instructions.
- If the agent asks for something that is not in your facts, say you don't know it.
- If the agent asks you to confirm an action that matches your request, confirm it.
- Stop rule: do NOT end the conversation while any change you requested is still pending. Only when the agent
  has told you that everything you asked for is done (or that it cannot be done), reply with a short thanks
  followed by {stop} on its own.
"""


def user_prompt(task: Task, plan: InjectionPlan, rng: random.Random) -> str:
    """The LLM user's system prompt, with the injected fact error applied to its facts."""
    facts = dict(task.user_facts)
    withheld = ""
    if plan.kind in ("wrong_fact", "withheld_fact") and facts:
        hidden = [k for k in sorted(facts) if not D.states_value(task.request, facts[k])
                  and not any(j != k and v == facts[k] for j, v in facts.items())]
        plan.fact = plan.fact or rng.choice(hidden if plan.kind == "withheld_fact" and hidden else sorted(facts))
        if plan.kind == "wrong_fact":
            plan.wrong_value = perturb(facts[plan.fact], rng)
            facts[plan.fact] = plan.wrong_value
        else:
            facts.pop(plan.fact)
            withheld = f"You do not remember your {D.fact_words(plan.fact)}; if asked for it, say you don't have it.\n"
    lines = "\n".join(D.fact_line(k, v) for k, v in sorted(facts.items())) or "(none)"
    if task.kind == "boundary":  # the request runs into a rule: a real user accepts a clear no (issue 33)
        withheld += BOUNDARY_NOTE
    return USER_SYSTEM_PROMPT.format(request=task.request, facts=lines, withheld=withheld, stop=D.STOP)


BOUNDARY_NOTE = ("You do not know whether the service allows what you ask. If the agent tells you it cannot be done "
                 "and why, accept that: do not insist, do not ask for something else, and do not ask it to try "
                 "anyway; thank the agent and end the conversation.\n")


def flip_roles(messages: list[Message]) -> list[dict]:
    """The dialogue from the user's side: agent messages become 'user', the user's own become
    'assistant'; tool traffic is invisible to the user."""
    out = []
    for m in messages:
        if m.role == "assistant" and (m.content or "").strip():
            out.append({"role": "user", "content": m.content})
        elif m.role == "user":
            out.append({"role": "assistant", "content": m.content})
    return out


USER_MAX_TOKENS = 512  # ours: a user's reply is a sentence or two; a model that never stops would run to the server's cap


class LLMUser:
    """A simulated user played by an OpenAI-compatible model (see module docstring)."""

    def __init__(self, client: Any, task: Task, plan: InjectionPlan | None = None, *, seed: int = 0,
                 temperature: float = 0.0, name: str | None = None, max_tokens: int | None = USER_MAX_TOKENS):
        if getattr(client, "is_offline", False):
            raise ConfigError("the llm user needs an OpenAI-compatible backend: set AUTOFORGE_BACKEND=openai and "
                              "AUTOFORGE_OPENAI_BASE_URL / AUTOFORGE_OPENAI_MODEL, or use --user offline")
        self.client = client
        self.task = task
        self.plan = plan or InjectionPlan()
        self.seed = seed
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.name = name or f"llm:{client.model}"
        self.rng = random.Random(f"llm-user:{seed}:{task.task_id}")
        self.system = user_prompt(task, self.plan, self.rng)
        self.turn = 0

    def opening(self) -> str:
        return self.task.request

    def reply(self, messages: list[Message]) -> UserTurn:
        self.turn += 1
        text = _last_agent_message(messages)
        if self.plan.kind == "premature_stop" and not self.plan.manifested and not D.claims_completion(text):
            self.plan.manifested = True
            return UserTurn(f"Actually, never mind — that's all for now, thanks. {D.STOP}", stop=True)
        msgs = [{"role": "system", "content": self.system}] + flip_roles(messages)
        try:
            r = self.client.chat("user_sim", msgs, temperature=self.temperature, seed=self.seed * 1000 + self.turn,
                                 max_tokens=self.max_tokens)
        except TypeError:  # a client without seed / max_tokens
            r = self.client.chat("user_sim", msgs, temperature=self.temperature)
        content = (r.content or "").strip()
        if self.plan.kind == "wrong_fact" and self.plan.fact and D.states_value(content, self.plan.wrong_value):
            self.plan.manifested = True
        if self.plan.kind == "withheld_fact" and self.plan.fact in D.asks_for_facts(text, [self.plan.fact]):
            self.plan.manifested = True
        stop = D.STOP in content
        return UserTurn(content or "(no reply)", stop=stop)

    def ground_truth(self) -> tuple[bool | None, str | None]:
        return (True, self.plan.kind) if self.plan.manifested else (False, None)

    def diagnostics(self) -> dict[str, Any]:
        return self.plan.as_dict()
