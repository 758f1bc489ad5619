"""The rule judge: which rules an episode broke (issue 33; ``Episode.rule_breaks``).

An episode breaks a rule when

- a tool call it made was **refused by a runtime rule** (the rule engine, :mod:`autoforge.envs.guards`:
  ``Observation.rule_id``; in a stored transcript, a tool result ``{"error": "policy rule <id>: ..."}``).
  *Trying* a forbidden write is a break even though it changed nothing: an agent that does what the
  user asks on a boundary task (:mod:`autoforge.tasks.boundary`) breaks the rule it runs into;
- it broke a **judged conversation rule** (``tool_rules`` rows with enforcement ``judged``; checks as
  :func:`autoforge.tasks.rules.judged_checks` gives them), judged over the transcript by these
  definitions. A *write* of a rule is a call to one of its ``tools`` whose result is not an error (the
  write happened; a refused or failed call is judged as above, not here).

  * ``identify_first`` ``{"tools", "via"}``: a write happens before the user is identified. With
    lookups (``via``): identified = an earlier call to one of them succeeded (in this episode, before
    the write, earlier in the same turn included). Without: identified = the user has replied to the
    agent at least once before the write (a user message after the opening request): the agent asked
    who they are and heard back; where the rule names the write's argument that identifies the user
    (``arg``: "confirming the customer's user_id"), the value the write passes must be one the user wrote.
  * ``confirm_first`` ``{"tools"}``: a write happens without a confirmation. Confirmed = the latest user
    message before the write agrees (:func:`autoforge.dialogue.agrees`: "yes, go ahead", no "no" /
    "not" / "wait") and the agent's last message with text before that user message asked to confirm
    (:func:`autoforge.dialogue.asks_confirmation`: "shall I", "confirm", "proceed", ...). One
    confirmation covers the writes up to the user's next message.
  * ``call_before`` ``{"tools", "via"}`` and ``sequence`` ``{"steps"}`` (procedure rules,
    :mod:`autoforge.domain.policy_order`): judged on the order of the successful calls alone
    (:func:`autoforge.tasks.rules.order_breaks`).
  * ``one_call_per_turn``, ``silent_call``, ``announce_call`` (how tools are called at all,
    :mod:`autoforge.domain.policy_protocol`): judged on the agent's messages (:func:`protocol_breaks`); a
    failed call counts too. ``cite_source``: a successful read whose result has ids, and no later agent
    message naming one of them.
  * ``transfer_when``: not judged offline (listed, never flagged).

Each rule is reported once, in the order its first break happened. :func:`episode_rule_breaks` is
what the episode engine records; :func:`judge_rules` returns each break with why (diagnostics).
"""

from __future__ import annotations

import re
from typing import Iterable

from autoforge import dialogue as D
from autoforge.domain.policy_protocol import PROTOCOL_OPS
from autoforge.domain.rule_kinds import JUDGED_OPS
from autoforge.tasks.rules import order_breaks
from autoforge.types import Message

_REFUSED = re.compile(r"policy rule (\S+?):")


def _error(text: str) -> bool:
    from autoforge.rollout.toolcalls import parse_observation

    return parse_observation(text or "")[1] is not None


def refused_in(messages: list[Message]) -> list[str]:
    """The rule ids of the refused calls of a stored transcript (tool results naming a rule)."""
    out = []
    for m in messages:
        if m.role == "tool" and "policy rule " in (m.content or ""):
            hit = _REFUSED.search(m.content)
            if hit:
                out.append(hit.group(1))
    return list(dict.fromkeys(out))


def judge_rules(messages: list[Message], checks: Iterable[dict] | None) -> list[tuple[str, str]]:
    """``(rule_id, why)`` of each judged rule (:data:`autoforge.domain.rule_kinds.JUDGED_OPS`) the transcript
    breaks."""
    checks = [c for c in checks or () if c.get("op") in JUDGED_OPS and c.get("rule_id")]
    if not checks:
        return []
    order = [c for c in checks if c["op"] in ("call_before", "sequence")]
    protocol = [c for c in checks if c["op"] in PROTOCOL_OPS]
    checks = [c for c in checks if c not in order and c not in protocol]
    results = {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}
    first_user = next((i for i, m in enumerate(messages) if m.role == "user"), None)
    done: set[str] = set()  # tools called with success so far
    replied = False  # the user has answered the agent at least once
    said = ""  # what the user has written so far
    confirmed = False  # the latest user message agreed to a confirmation the agent asked for
    last_text = ""  # the agent's latest message with text
    made: list[str] = []  # the successful calls' tool names, in order
    out: dict[str, str] = {}
    for i, m in enumerate(messages):
        if m.role == "user":
            said += "\n" + (m.content or "")
            if i != first_user:
                replied = True
                confirmed = D.agrees(m.content) and D.asks_confirmation(last_text)
            continue
        if m.role != "assistant":
            continue
        if (m.content or "").strip():
            last_text = m.content
        for tc in m.tool_calls or ():
            res = results.get(tc.id or "")
            ok = res is not None and not _error(res.content)
            if not ok:
                continue
            for c in checks:
                if tc.name not in (c.get("tools") or ()) or c["rule_id"] in out:
                    continue
                if c["op"] == "identify_first":
                    via = c.get("via") or []
                    arg = c.get("arg") if not via else None
                    if (via and not done & set(via)) or (not via and not replied):
                        how = f"a call to {' or '.join(via)}" if via else "a reply from the user"
                        out[c["rule_id"]] = f"{tc.name} ran before the user was identified (no {how} before it)"
                    elif arg and arg in (tc.arguments or {}) and not D.states_value(said, tc.arguments[arg]):
                        out[c["rule_id"]] = (f"{tc.name} ran with {arg}={tc.arguments[arg]!r}, which the user never gave "
                                             "(the rule asks to confirm it with the user)")
                elif not confirmed:
                    out[c["rule_id"]] = (f"{tc.name} ran without the user's confirmation (the latest user message "
                                         "before it does not agree to a request to confirm)")
            done.add(tc.name)
            made.append(tc.name)
    for rid, why in order_breaks(made, order):
        out.setdefault(rid, why)
    for rid, why in protocol_breaks(messages, protocol).items():
        out.setdefault(rid, why)
    return list(out.items())


def protocol_breaks(messages: list[Message], checks: list[dict]) -> dict[str, str]:
    """``rule_id -> why`` of the protocol rules (``checks``) the agent messages of a transcript break."""
    out = _cite_breaks(messages, [c for c in checks if c["op"] == "cite_source"])
    checks = [c for c in checks if c["op"] != "cite_source"]
    said = False  # the agent wrote to the user since the user's last message
    for m in messages:
        if m.role == "user":
            said = False
            continue
        if m.role != "assistant":
            continue
        text, calls = (m.content or "").strip(), list(m.tool_calls or ())
        for c in checks:
            rid = c["rule_id"]
            if rid in out or not calls:
                continue
            if c["op"] == "one_call_per_turn" and len(calls) > 1:
                out[rid] = f"one agent message made {len(calls)} tool calls ({', '.join(x.name for x in calls)})"
            elif c["op"] == "silent_call" and text:
                out[rid] = f"the agent wrote to the user while calling {calls[0].name}"
            elif c["op"] == "announce_call" and not text and not said:
                out[rid] = f"{calls[0].name} was called with no word to the user before it"
        said = said or bool(text)
    return out


def _cite_breaks(messages: list[Message], checks: list[dict]) -> dict[str, str]:
    """``cite_source``: a successful call to one of the rule's reads whose result has ids to cite
    (:func:`autoforge.domain.policy_protocol.citations`), and no agent message after it naming one."""
    from autoforge.domain.policy_protocol import citations
    from autoforge.rollout.toolcalls import parse_observation

    out: dict[str, str] = {}
    if not checks:
        return out
    names = {tc.id: tc.name for m in messages if m.role == "assistant" for tc in m.tool_calls or () if tc.id}
    for i, m in enumerate(messages):
        if m.role != "tool" or not m.tool_call_id or names.get(m.tool_call_id) is None:
            continue
        result, err = parse_observation(m.content or "")
        ids = citations(result) if err is None else []
        if not ids:
            continue
        later = " ".join(x.content or "" for x in messages[i + 1:] if x.role == "assistant")
        for c in checks:
            if c["rule_id"] not in out and names[m.tool_call_id] in (c.get("tools") or ()) \
                    and not any(x in later for x in ids):
                out[c["rule_id"]] = (f"no agent message after {names[m.tool_call_id]} cites what it returned "
                                     f"(any of {', '.join(ids[:3])})")
    return out


def episode_rule_breaks(messages: list[Message], checks: Iterable[dict] | None,
                        refused: Iterable[str] | None = None) -> list[str]:
    """Every rule the episode broke: ``refused`` (rule ids of refused calls; None: read from the transcript),
    then the judged rules :func:`judge_rules` flags; each once."""
    ids = list(refused) if refused is not None else refused_in(messages)
    ids += [rid for rid, _ in judge_rules(messages, checks)]
    return list(dict.fromkeys(i for i in ids if i))
