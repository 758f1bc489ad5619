"""A policy document as the rule reader sees it: statements with their offsets, and word helpers.

Policy text comes as Markdown handbooks, numbered SOPs, FAQs, bullet lists and tables. The reader
(:mod:`autoforge.domain.policy`) works on *statements*: a sentence of a paragraph, a list item
(its sentences), or a table row read as ``header: cell`` pairs. Headings, code blocks and HTML
comments state no rule and are skipped; a heading's words are kept as the statement's
``context`` (a rule under "## Refunds" that says "at most once" is about refunds).
"""

from __future__ import annotations

import re
from functools import lru_cache
from dataclasses import dataclass

from autoforge.domain import words as nm

NUMBER_WORDS = {"zero": 0, "one": 1, "a single": 1, "single": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
                "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20,
                "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "ninety": 90, "hundred": 100}
TIMES_WORDS = {"once": 1, "twice": 2, "thrice": 3}
# A number: digits (1,000 / 2.5 / $50) or a number word.
NUM = r"(\$?\d[\d,]*(?:\.\d+)?|" + "|".join(sorted(NUMBER_WORDS, key=len, reverse=True)) + r")"
STOP = {"the", "a", "an", "of", "for", "to", "in", "on", "at", "by", "per", "any", "each", "every", "their", "its",
        "his", "her", "your", "our", "this", "that", "these", "those", "and", "or", "be", "is", "are", "was", "can",
        "may", "must", "not", "no", "with", "from", "as", "it", "they", "all", "same", "such", "than", "more", "less",
        "total", "number", "amount", "customer", "customers", "user", "users", "request", "requests", "call"}


@dataclass
class Statement:
    text: str  # one sentence (whitespace collapsed)
    offset: int  # its character offset in the document
    context: str = ""  # the heading it falls under
    cells: list[tuple[str, str]] | None = None  # a table row: (header, cell) pairs


# **bold**, _em_, `code`: the marks go, the words stay; an identifier's own underscores (find_guest_id) are no marks
_EMPHASIS = re.compile(r"(?<![\w*_`])([*_`]{1,3})(?=[^\s*_`])(.+?)(?<=[^\s*_`])\1(?![\w*_`])")
_SENT = re.compile(r"(?<=[.!?;])[*_`]*\s+(?=[A-Z0-9\"'(*_`])")


def statements(text: str) -> list[Statement]:
    """The document's sentences, list items and table rows, in order, with offsets. A JSON value (a
    conversation state machine, a list of rules) gives its prose strings, not its sample phrases."""
    out: list[Statement] = []
    heading = ""
    in_code = False
    in_comment = False
    header: list[str] | None = None
    pos = 0
    para: list[tuple[int, str]] = []

    def flush() -> None:
        if not para:
            return
        start = para[0][0]
        joined = " ".join(t for _, t in para)
        # offsets: walk the joined text back onto the document (sentences split within the paragraph)
        cursor = 0
        for part in _SENT.split(joined):
            part = part.strip()
            if not part:
                continue
            k = joined.find(part, cursor)
            cursor = k + len(part) if k >= 0 else cursor
            first = part[:40]
            at = text.find(first, start)
            out.append(Statement(" ".join(part.split()), at if at >= 0 else start, heading))
        para.clear()

    skip_to = 0  # the end of a JSON block read as statements
    tries = 0  # JSON values tried that did not parse (a pathological document stops being tried at _JSON_TRIES)
    for line in text.splitlines(keepends=True):
        start, raw = pos, line
        pos += len(line)
        if start < skip_to:
            continue
        s = raw.strip()
        if not in_code and not in_comment and tries < _JSON_TRIES and _JSON_START.match(s):
            block = _json_block(text, start + raw.find(s[0]))
            if block is not None:
                flush()
                end, found = block
                out += [Statement(" ".join(t.split()), at, heading) for at, t in found]
                skip_to = end
                continue
            tries += 1
        if s.startswith("```") or s.startswith("~~~"):
            flush()
            in_code = not in_code
            continue
        if in_code:
            continue
        if in_comment or s.startswith("<!--"):
            in_comment = "-->" not in s
            flush()
            continue
        if not s:
            flush()
            header = None
            continue
        if s.startswith("#"):
            flush()
            heading = s.lstrip("#").strip()
            header = None
            continue
        if s.startswith("|"):
            flush()
            cells = [c.strip() for c in s.strip("|").split("|")]
            if all(re.fullmatch(r":?-{2,}:?", c) for c in cells if c):
                continue
            if header is None:
                header = cells
                continue
            pairs = [(h, c) for h, c in zip(header, cells) if c]
            row = "; ".join(f"{h}: {c}" for h, c in pairs)
            out.append(Statement(row, start + raw.find("|"), heading, pairs))
            continue
        item = re.match(r"^\s*(?:[-*+\u2022]|\d+[.)]|[ivx]+[.)]|[a-z][.)]|Q:|A:)\s+", raw, re.I)
        if item:
            flush()
            body = raw[item.end():]
            para.append((start + item.end(), body.strip()))
            flush()
            continue
        para.append((start + len(raw) - len(raw.lstrip()), s))
    flush()
    # Markdown emphasis and stray markup carry no meaning for the reader
    for st in out:
        st.text = _EMPHASIS.sub(r"\2", st.text).strip()
    return [st for st in out if len(st.text) > 3]


# keys of a JSON policy (a conversation state machine, a rule list) whose strings are no rules: sample
# phrases the agent may say, ids and names, where to go next (a state machine's order of steps is read
# as a procedure: autoforge.domain.policy_order)
_JSON_SKIP = {"examples", "example", "samples", "sample", "sample_phrases", "phrases", "id", "name", "next_step",
              "next", "title", "url", "type", "transitions"}


_JSON_TRIES = 50
# a line that opens a JSON value: "[" or "{" alone, or followed by a quote or another bracket ("[Pull up Account]"
# and "{ id: ... }" do not)
_JSON_START = re.compile(r'^[\[{]\s*(?:$|["\[{])')


def _balanced_end(text: str, at: int) -> int | None:
    """The index after the bracket that closes the one at ``at`` (strings skipped); None when none does."""
    depth, in_str, esc = 0, False, False
    for i in range(at, min(len(text), at + 50_000)):
        c = text[i]
        if in_str:
            esc, in_str = (not esc and c == "\\"), in_str and (esc or c != '"')
            continue
        if c == '"':
            in_str = True
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def _loads(s: str):
    """``json.loads`` with the trailing commas outside strings dropped; None when it still does not parse."""
    import json

    out, in_str, esc = [], False, False
    for i, c in enumerate(s):
        if in_str:
            esc, in_str = (not esc and c == "\\"), in_str and (esc or c != '"')
        elif c == '"':
            in_str = True
        elif c == "," and re.match(r"\s*[\]}]", s[i + 1:]):
            continue
        out.append(c)
    try:
        return json.loads("".join(out))
    except (ValueError, RecursionError):
        return None


def json_value(text: str, at: int) -> tuple[object, int] | None:
    """The JSON value that starts at ``at`` and where it ends. Prompts' JSON is forgiven: trailing commas
    (``[1, 2,]``), and in a list of objects, an object that does not parse (an unescaped quote) is left
    out. None when no value starts there."""
    import json

    try:
        return json.JSONDecoder().raw_decode(text, at)
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than Python's stack
        pass
    end = _balanced_end(text, at)
    if end is None:
        return None
    whole = _loads(text[at:end])
    if whole is not None or text[at] != "[":
        return (whole, end) if whole is not None else None
    items, i = [], at + 1
    while (k := text.find("{", i, end)) >= 0:
        e = _balanced_end(text, k)
        if e is None or e > end:
            break
        got = _loads(text[k:e])
        if got is not None:
            items.append(got)
        i = e
    return (items, end) if items else None


def _json_block(text: str, at: int) -> tuple[int, list[tuple[int, str]]] | None:
    """A JSON value starting at ``at`` (a conversation state machine, a list of rules): its end, and its
    prose strings (three words or more, under keys other than :data:`_JSON_SKIP`) with their offsets;
    None when no JSON value starts there, or it holds no prose."""
    import json

    got = json_value(text, at)
    if got is None or not isinstance(got[0], (list, dict)):
        return None
    value, end = got
    found: list[tuple[int, str]] = []
    cursor = at

    def walk(v, key: str = "") -> None:
        nonlocal cursor
        if key.lower() in _JSON_SKIP:
            return
        if isinstance(v, dict):
            for k, x in v.items():
                walk(x, str(k))
        elif isinstance(v, list):
            for x in v:
                walk(x, key)
        elif isinstance(v, str) and len(v.split()) >= 3:
            k = text.find(json.dumps(v, ensure_ascii=False)[1:41], cursor, end)
            cursor = k if k >= 0 else cursor
            found.append((k if k >= 0 else at, v))

    walk(value)
    return (end, found) if found else None


def number(word: str) -> float | None:
    """``"5"`` / ``"$1,000"`` / ``"five"`` -> the number; None when it is none."""
    w = word.strip().lower().lstrip("$").replace(",", "")
    if w in NUMBER_WORDS:
        return float(NUMBER_WORDS[w])
    if w in TIMES_WORDS:
        return float(TIMES_WORDS[w])
    try:
        return float(w)
    except ValueError:
        return None


IRREGULAR = {"frozen": "freeze", "unfrozen": "unfreeze", "froze": "freeze", "chosen": "choose", "given": "give",
             "taken": "take", "written": "write", "sent": "send", "paid": "pay", "sold": "sell", "bought": "buy",
             "held": "hold", "kept": "keep", "made": "make", "lent": "lend", "spent": "spend", "withdrawn": "withdraw",
             "brought": "bring", "left": "leave", "put": "put", "shut": "shut", "seen": "see", "done": "do",
             "rebooked": "rebook", "reissued": "reissue", "undone": "undo", "drawn": "draw", "borne": "bear"}


@lru_cache(maxsize=65536)  # a pure function of one word, asked ~200,000 times per factory run
def stem(w: str) -> str:
    """A crude stem shared by nouns and verbs: cancellation ~ cancelled ~ cancel, delivery ~ delivered."""
    w = w.lower().strip("'\"`")
    w = IRREGULAR.get(w, w)
    for suf in ("ations", "ation", "ments", "ment", "ings", "ing", "ions", "ion", "ies", "ied", "ed", "es", "s", "y",
                "e"):
        if len(w) - len(suf) >= 3 and w.endswith(suf):
            w = w[: -len(suf)]
            break
    if len(w) > 4 and w[-1] == w[-2]:  # cancell -> cancel, shipp -> ship
        w = w[:-1]
    return w


def words_of(text: str) -> list[str]:
    """Lower-case words; a hyphenated or snake_case compound is kept whole and split (check-in ->
    check_in, check, in)."""
    out: list[str] = []
    for m in re.finditer(r"[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*", text.replace("\u2019", "'")):
        w = m.group(0).lower()
        if "-" in w or "_" in w:
            out.append(w.replace("-", "_"))
            out += re.split(r"[-_]", w)
        else:
            out.append(w)
    return out


def name_words(name: str) -> list[str]:
    """A field's or argument's words (guests_count -> guests, count)."""
    return [w for w in nm.words(name) if w]


def overlap(phrase: list[str], name: str) -> float:
    """How well the words of ``phrase`` name ``name`` (a field or argument): the whole compound
    counts most, then shared stems; 0 when nothing is shared."""
    nws = name_words(name)
    if not nws:
        return 0.0
    joined = "_".join(nws)
    ph = [w for w in phrase if w not in STOP]
    if joined in phrase or joined in {nm.singular(w) for w in phrase}:
        return 3.0
    stems = {stem(nm.singular(w)) for w in nws}
    hits = {stem(nm.singular(w)) for w in ph} & stems
    if not hits:
        return 0.0
    return len(hits) / len(stems) + 0.5 * len(hits)


_VERB_SPAN = re.compile(r"(\b(?:can|may|must|cannot|should|will|could)\s+(?:only\s+|not\s+|never\s+)?be\s+)"
                        r"((?:[a-z_-]+(?:,\s*|\s+(?:or|and)\s+|\s+in\b\s*)?)+?(?=\s*(?:\b(?:if|when|while|unless|only|once|after|before|by|"
                        r"for|on|at|until)\b|[.;:(]|$)))", re.I)


def verb_span_free(text: str) -> str:
    """``text`` without the actions a modal lists ("can be changed, cancelled or checked in"): words that
    name what is done, not the state a record must be in."""
    return _VERB_SPAN.sub(lambda m: m.group(1) + " " * len(m.group(2)), text)
