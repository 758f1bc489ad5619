"""Prompt templates of the rollout: the simulated user (``user_sim``) and ERPO's user-error
judge (``judge``, arXiv 2512.22857 Sec. 4).

See :mod:`autoforge.llm.prompting` for what a template is and how it is registered.
"""

from __future__ import annotations

from autoforge.llm.prompting import dump, msgs, register
from autoforge.types import Message, canonical_json

USER_STOP = "###STOP###"


@register("user_sim")
def user_sim(request: str, user_facts: dict, conversation: list[dict | Message]) -> list[dict]:
    """Messages for the simulated user's next turn (``client.chat``).

    Roles are flipped: the agent's messages become ``user`` turns and the simulated user's
    own earlier turns ``assistant`` turns; tool traffic is hidden from the user. The user ends
    the episode by replying with :data:`USER_STOP`."""
    system = (
        "You play a customer talking to a support agent. Your goal: " + request + "\n"
        "Facts you know (reveal one only when the agent asks for it; never invent others): "
        + canonical_json(user_facts) + "\n"
        "Write short, natural replies. Confirm an action only if it matches your goal. "
        f"When every part of your goal is done, reply with exactly {USER_STOP}. Do not stop while a "
        "change you asked for is still pending."
    )
    out: list[dict] = [{"role": "system", "content": system}]
    for m in conversation:
        d = dump(m)
        role, content = d.get("role"), d.get("content") or ""
        if role == "assistant" and content:
            out.append({"role": "user", "content": content})
        elif role == "user":
            if len(out) == 1:  # chat templates want a user turn first: the agent's greeting
                out.append({"role": "user", "content": "Hi! How can I help you today?"})
            out.append({"role": "assistant", "content": content})
    return out


@register("judge")
def judge(user_facts: dict, request: str, conversation: list[dict | Message]) -> list[dict]:
    """ERPO's user-error judge (masking): did the simulated user give incorrect information?"""
    system = (
        "You audit a simulated user. Given the facts the user was told and the dialogue, decide "
        "whether the user gave incorrect information: a value that contradicts a fact, a fact that "
        "was asked for but withheld, or ending the conversation while a requested change was still "
        "pending. The agent's mistakes do not count. Answer with user_error true/false and a reason."
    )
    turns = []
    for m in conversation:
        d = dump(m)
        if d.get("role") in ("user", "assistant") and d.get("content"):
            turns.append({"role": d["role"], "content": d["content"]})
    return msgs(system, {"request": request, "user_facts": user_facts, "dialogue": turns})
