"""The status vocabulary: the workflow statuses a record can be in, and the ones a description mentions.

One list both the state-structure inference (:mod:`autoforge.domain.state`: a status field's
values) and the prose-rule reader (:mod:`autoforge.domain.rules`: which quoted words are
statuses) read.
"""

from __future__ import annotations

import re

from autoforge.domain import words as nm

STATUS_WORDS = set(nm.TERMINAL_STATUSES) | set(nm.INITIAL_STATUSES) | {
    s for targets in nm.STATUS_VERBS.values() for s in targets} | {
    "processing", "shipped", "in_progress", "paid", "overdue", "in_transit", "on_hold", "inactive", "suspended",
    "approved", "checked_in", "checked_out", "waitlisted", "escalated", "unpaid", "partially_paid", "out_of_stock"}


def status_words(text: str) -> list[str]:
    """Status words a description mentions ("Only 'pending' orders can be cancelled")."""
    found: list[str] = []
    for w in re.findall(r"[a-z_]+", (text or "").lower().replace(" ", " ")):
        if w in STATUS_WORDS and w not in found and w not in {"open", "new", "hold", "return", "active"} | {"review", "report"}:
            found.append(w)
    return found


NEGATIONS = {"cannot", "can't", "not", "never", "no", "nor", "unless", "except", "without"}
TARGET_CUES = {"be", "being", "become", "becomes", "to", "as", "marked", "set"}


def status_rules(text: str, enum: list[str], entity: str, target: str | None = None) -> tuple[list[str], list[str]]:
    """Statuses a description allows and forbids before a change (our reading of prose rules).

    "Only pending orders can be cancelled" / "Cancel a confirmed booking" (first sentence) -> allowed;
    "Checked-in bookings cannot be cancelled" -> forbidden. A status right after "be"/"to"
    ("can only be completed", "the status becomes 'returned'") names the outcome, not a
    precondition, and is skipped."""
    allowed: list[str] = []
    forbidden: list[str] = []
    ent_words = {entity.split("_")[-1], nm.plural(entity.split("_")[-1])}
    # a parenthetical restates the status ("only while still pending (not yet shipped)"): its
    # negation is not the sentence's
    text = re.sub(r"\((?:not yet|not|no longer|i\.e\.?|e\.g\.?|that is)\b[^)]*\)", " ", text or "", flags=re.I)
    for k, sentence in enumerate(re.split(r"[.;!?]+", text.lower())):
        flat = " " + re.sub(r"[-_'\"`]+", " ", sentence) + " "
        words_ = flat.split()
        negated = any(w in NEGATIONS for w in words_) or "n't" in sentence
        for value in enum:
            if not isinstance(value, str) or value == target:
                continue
            phrase = value.replace("_", " ").replace("-", " ").lower()
            for m in re.finditer(r"(?<= )" + re.escape(phrase) + r"(?= )", flat):
                before = flat[: m.start()].split()
                after = flat[m.end():].split()
                if before and before[-1] in TARGET_CUES:
                    continue
                if negated:
                    forbidden.append(value)
                elif "only" in words_ or "must" in words_ or (k == 0 and before and before[-1] in ("a", "an", "the")
                                                             and after and after[0] in ent_words):
                    allowed.append(value)
    allowed = [v for v in dict.fromkeys(allowed) if v not in forbidden]
    return allowed, list(dict.fromkeys(forbidden))
