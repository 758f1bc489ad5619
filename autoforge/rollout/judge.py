"""The user-error judge: did the simulated user give incorrect information? (ERPO's MEU input)

Paper (arXiv 2512.22857, Sec. 3.4 and App. A.1): an LLM judge reads each rollout and answers
True/False — did the simulated user return any incorrect information? A flagged rollout is
removed from the group (1_MEU = 0). The judge's input here is the task (request + the hidden
facts the user should convey) and the dialogue, so statements can be checked against the
truth (our choice where the paper is silent: docs/paper_notes.md#where-the-paper-is-silent).

Two judges with one interface, ``judge(task, episode) -> JudgeVerdict``:

- :class:`RuleJudge` (offline default) flags
  * ``wrong_fact``: a user reply states a value for a hidden fact that is not the true value
    (in a ``- fact: value`` line, or in free text answering a request for that fact);
  * ``withheld_fact``: the agent asked for a hidden fact and the user's reply neither gives
    it nor has given it before;
  * ``premature_stop``: the user ended the episode (``###STOP###``) in reply to an agent
    message that did not report the work done — the stop rule ("do not end while a
    requested change is pending").
  The task's opening request is the generator's text, not the simulator's, and is not judged.
- :class:`LLMJudge` asks a model for ``{"user_error": bool, "kind": ..., "reason": ...}``.

:func:`judge_metrics` measures precision and recall against injected errors
(``Episode.user_error``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Literal, Optional

from pydantic import BaseModel, Field

from autoforge.errors import ConfigError
from autoforge import dialogue as D
from autoforge.types import Episode, Message, Task


@dataclass
class JudgeVerdict:
    flag: bool | None  # None: the judge could not decide (LLM failure)
    kind: str | None = None
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"flag": self.flag, "kind": self.kind, "reason": self.reason}


# --------------------------------------------------------------------------- rule-based


class RuleJudge:
    name = "rule"

    def judge(self, task: Task, episode: Episode) -> JudgeVerdict:
        return judge_dialogue(task, episode.messages, episode.termination)


def judge_dialogue(task: Task, messages: list[Message], termination: str) -> JudgeVerdict:
    keys = sorted(task.user_facts)
    truth = task.user_facts
    said = ""  # everything the user has said so far (request included)
    asked: list[str] = []  # facts the latest agent message asked for
    last_agent = ""
    first_user = True
    findings: list[tuple[str, str]] = []
    last_user_idx = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    for i, m in enumerate(messages):
        if m.role == "assistant" and (m.content or "").strip():
            last_agent = m.content
            asked = D.asks_for_facts(m.content, keys)
            continue
        if m.role != "user":
            continue
        text = m.content or ""
        if first_user:
            first_user, said = False, text
            continue
        stopped = D.STOP in text
        # wrong values: fact lines anywhere; free-text statements for facts the agent asked for
        stated = D.parse_fact_lines(text, keys)
        for k in keys:
            if k in stated:
                if stated[k] != truth[k] and not D.states_value(D.value_text(stated[k]), truth[k]):
                    findings.append(("wrong_fact", f"said {D.fact_words(k)} is {D.value_text(stated[k])!r}, "
                                                   f"the truth is {D.value_text(truth[k])!r}"))
            elif k in asked:
                v = D.stated_value(text, k)
                if v is not None and not D.states_value(text, truth[k]) and not D.states_value(v, truth[k]):
                    findings.append(("wrong_fact", f"said {D.fact_words(k)} is {v!r}, the truth is "
                                                   f"{D.value_text(truth[k])!r}"))
        # withheld: asked, not given now or before (a stopping reply is judged by the stop rule)
        if not stopped:
            for k in asked:
                if k in stated or any(f[0] == "wrong_fact" and D.fact_words(k) in f[1] for f in findings):
                    continue
                if not D.states_value(said + "\n" + text, truth[k]):
                    findings.append(("withheld_fact", f"the agent asked for {D.fact_words(k)} and the user did not give it"))
        # premature stop: the final stop answered a message that did not report the work done
        if stopped and i == last_user_idx and termination == "user_stop" and not D.claims_completion(last_agent):
            findings.append(("premature_stop", f"ended the episode in reply to {last_agent[:120]!r}, which does not "
                                               "report the work done"))
        said += "\n" + text
        asked = []
    if not findings:
        return JudgeVerdict(flag=False, reason="no incorrect information or premature stop found")
    kind = findings[0][0]
    return JudgeVerdict(flag=True, kind=kind, reason="; ".join(f"{k}: {r}" for k, r in findings)[:1000])


# --------------------------------------------------------------------------- LLM-based


class JudgeReply(BaseModel):
    """The LLM judge's answer (paper App. A.1: a True/False verdict)."""

    user_error: bool = Field(description="True if the simulated user gave incorrect or incomplete information, "
                                         "refused information it had, or ended while a requested change was pending")
    kind: Optional[Literal["wrong_fact", "withheld_fact", "premature_stop"]] = None
    reason: str = ""


JUDGE_PROMPT = """You are checking a simulated USER in a conversation between a user and a customer-service agent.
The user was given a request and a list of true facts. Decide whether the USER made an error:
- wrong_fact: the user stated a value for one of its facts that differs from the true value;
- withheld_fact: the agent asked for one of the facts and the user did not provide it (said it did not know, refused,
  or ignored the question);
- premature_stop: the user ended the conversation (###STOP###) before the agent reported that the requested changes
  were done.
Judge only the USER, never the agent. Mistakes by the agent are not user errors.

User's request:
{request}

The user's true facts:
{facts}

Conversation (tool traffic omitted):
{dialogue}

Answer with JSON: {{"user_error": true/false, "kind": "wrong_fact" | "withheld_fact" | "premature_stop" | null, "reason": "..."}}"""


def render_dialogue(messages: list[Message], limit: int = 12_000) -> str:
    lines = []
    for m in messages:
        if m.role == "user":
            lines.append(f"USER: {m.content}")
        elif m.role == "assistant" and (m.content or "").strip():
            lines.append(f"AGENT: {m.content}")
        elif m.role == "assistant" and m.tool_calls:
            lines.append(f"AGENT: [calls tools: {', '.join(tc.name for tc in m.tool_calls)}]")
    text = "\n".join(lines)
    return text if len(text) <= limit else text[-limit:]


class LLMJudge:
    def __init__(self, client: Any):
        if getattr(client, "is_offline", False):
            raise ConfigError("the llm judge needs an OpenAI-compatible backend (AUTOFORGE_BACKEND=openai); "
                              "use the rule judge offline")
        self.client = client
        self.name = f"llm:{client.model}"

    def judge(self, task: Task, episode: Episode) -> JudgeVerdict:
        facts = "\n".join(D.fact_line(k, v) for k, v in sorted(task.user_facts.items())) or "(none)"
        prompt = JUDGE_PROMPT.format(request=task.request, facts=facts, dialogue=render_dialogue(episode.messages))
        try:
            r = self.client.structured("judge", [{"role": "user", "content": prompt}], JudgeReply)
        except Exception as exc:  # noqa: BLE001 - an undecided verdict, not a crash of the run
            return JudgeVerdict(flag=None, reason=f"judge failed: {exc}"[:500])
        return JudgeVerdict(flag=bool(r.user_error), kind=r.kind if r.user_error else None, reason=r.reason)


JUDGES = ("rule", "llm", "none")


def make_judge(name: str, client: Any = None):
    if name == "rule":
        return RuleJudge()
    if name == "llm":
        return LLMJudge(client)
    if name == "none":
        return None
    raise ConfigError(f"unknown judge {name!r}; valid judges: {', '.join(JUDGES)}")


# --------------------------------------------------------------------------- metrics


def judge_metrics(pairs: Iterable[tuple[bool | None, bool | None]]) -> dict[str, Any]:
    """Precision/recall of judge flags against ground truth; pairs are ``(user_error, judge_flag)``.

    Pairs with an unknown side are skipped (counted in ``n_skipped``). Precision is None when
    nothing was flagged, recall None when there was no error.
    """
    tp = fp = fn = tn = skipped = 0
    for truth, flag in pairs:
        if truth is None or flag is None:
            skipped += 1
        elif truth and flag:
            tp += 1
        elif flag:
            fp += 1
        elif truth:
            fn += 1
        else:
            tn += 1
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / (tp + fn) if tp + fn else None
    f1 = 2 * precision * recall / (precision + recall) if precision and recall else None
    return {"tp": tp, "fp": fp, "fn": fn, "tn": tn, "n_skipped": skipped, "precision": precision, "recall": recall,
            "f1": f1}


def episode_metrics(episodes: Iterable[Episode]) -> dict[str, Any]:
    return judge_metrics((e.user_error, e.judge_flag) for e in episodes)
