"""Read/write effect of a tool, and whether a whole tool set can change state at all.

docs/design.md#stage-1-ingest (read/write effect) and docs/conventions.md#tag-side-effects (tau2-bench's READ/WRITE
tool types): verification's read-only-agent check and the offline synthesizer rely on it.

Per tool, the order of evidence is:

1. an explicit hint: MCP ``readOnlyHint``/``destructiveHint``, ``x-effect``/``readOnly`` on the
   tool object, the HTTP method of an OpenAPI operation (the parsers apply these);
2. the description stating that nothing changes ("does not modify the database", "has no side
   effects", "this tool is read-only");
3. the leading verb of the name (``get_order``, ``cancelOrder``; for dotted names the part after
   the last dot, ``orders.get``; a one-word shell command: ``ls``, ``cat``, ``rm``, ``mv``; a
   leading noun that is also a verb gives way to a verb at the end: ``issue_read``);
4. the action verb of the description: the first sentence that says what the tool does, after
   context sentences ("This tool belongs to ...", "It is a ..."), labels ("Tool description:")
   and subjects ("This function ...", "Use this tool to ...") are skipped;
5. the verb at the end of the name (``issue_read``, ``trading_login``);
6. computation nouns in the name (``mean``, ``standard_deviation``, ``si_unit_conversion``) or a
   name of nouns ending in a report noun (``notebook_stats``, ``account_info``);
7. irreversibility in the description ("cannot be undone", "permanently") -> write;
8. ``"unknown"``.

Arithmetic verbs that are also ordinary verbs (``add``, ``round``, ``convert``, ``raise``) read
when what they act on is a quantity ("Add two numbers", ``round_number``, a tool ``add`` whose
arguments are all plain numbers) and fall back to the verb lists otherwise (``add_contact``).

A tool set as a whole (:func:`classify_toolset`, :func:`toolset_kind`) is ``"stateless"`` when no
tool can change state and none refers to stored things (no id/key/path/account arguments, no
listing of a collection): pure computation (math tools) or pure external lookups (web search,
fetch a URL). There, tools still ``"unknown"`` are functions of their arguments too and become
``"read"``. Every other tool set is ``"stateful"``. Explicit hints are never overridden: only
``"unknown"`` effects are ever changed at the tool-set level.

The word lists are our default; the paper leaves this to the LLM.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Literal, Mapping

from autoforge.errors import ToolDocError
from autoforge.types import Effect

ToolsetKind = Literal["stateless", "stateful"]

READ_VERBS = frozenset(
    """get find list search lookup look check calculate compute fetch query read show view describe count
    retrieve estimate quote validate verify browse track preview is has can summarize summarise inspect
    locate compare filter sort rank recommend suggest explain download export
    display print sum average mean median analyze analyse evaluate solve parse translate encode decode
    predict forecast classify detect extract identify recognize recognise scan ping monitor geocode peek
    measure determine derive test diagnose explore audit lint render tally aggregate""".split()
)
WRITE_VERBS = frozenset(
    """create add update cancel delete book assign remove set transfer make place submit register reserve
    modify edit change return exchange pay refund send post put patch approve reject decline close open move
    upgrade downgrade enroll enrol unassign unenroll schedule reschedule renew issue borrow checkin checkout
    archive restore mark apply redeem activate deactivate suspend block unblock rename insert upsert write
    grant revoke confirm complete start stop link unlink attach detach rate review hold release deposit
    withdraw lock unlock dispatch ship file log record request report replace reset clear upload import
    invite accept dismiss terminate hire promote rebook void charge credit debit topup reactivate
    port swap subscribe unsubscribe enable disable flag escalate resolve reopen discharge admit
    refill prescribe waive adjust allocate deallocate extend shorten publish unpublish tag untag freeze unfreeze dispute resume
    fund purchase buy sell rent lease trade invest comment mention retweet repost reply follow like share vote
    upvote downvote star pin bookmark favorite favourite mute fork merge push commit deploy install uninstall
    append prepend fill press save store copy duplicate clone login logout logon logoff signin signout signup
    authenticate authorize authorise connect disconnect notify increase decrease increment decrement toggle
    turn switch raise lower navigate play pause drop truncate kill erase wipe purge destroy discard overwrite
    scale mount unmount""".split()
)
# One-word shell commands (``ls``, ``rm``): only when the whole name is the command.
SHELL_READ = frozenset("ls cat pwd du df wc diff head tail grep egrep fgrep stat tree whoami which less more uniq cmp".split())
SHELL_WRITE = frozenset("cd mkdir rmdir rm mv cp touch chmod chown ln tee".split())
# Verbs of arithmetic that are also ordinary verbs: they read when their object is a quantity.
QUANTITY_VERBS = frozenset("add subtract multiply divide round convert raise scale negate square invert normalize".split())
QUANTITY_NOUNS = frozenset(
    """number numbers value values integer integers float floats decimal decimals fraction fractions digit digits
    vector vectors matrix matrices angle angles quantity quantities measurement measurements unit units currency
    currencies temperature temperatures gallon liter litre meter metre kilometer kilometre km mile foot feet inch
    yard pound lb kilogram kg gram ounce oz celsius fahrenheit kelvin degree radian percent percentage""".split()
)
# Nouns that name a computation ("mean", "standard_deviation", "square_root", "logarithm").
COMPUTE_NOUNS = frozenset(
    """mean median average variance deviation stddev logarithm sqrt factorial percentile percentage
    modulo remainder quotient gcd lcm sine cosine tangent derivative integral exponent minimum maximum min max
    absolute""".split()
)
# Words that name a quantity argument of a stateful thing (money, stock): not "plain numbers".
_MONEY_WORDS = frozenset("amount price cost balance fee total payment salary budget qty quantity deposit limit".split())
# In a description these report a result rather than change something ("Return the current path").
_DESCRIPTION_READ = frozenset("return display print output".split())
# A sentence led by one of these describes the context, not the action ("This tool belongs to ...").
_CONTEXT_WORDS = frozenset(
    "belongs belong is are was were be has have contains contain supports support requires require uses works part "
    "provides offers wraps note".split()
)
# Verbs that are often nouns too: not trusted at the end of a name (``daily_report``, ``todo_list``).
_NOUN_LIKE = frozenset(
    """report log record file issue request review rate book post hold release charge credit debit tag flag lock
    block schedule return transfer exchange place mark deposit refund link set open close start stop comment like
    share star pin store fill press play turn switch trade mention reply vote scale square""".split()
)
# A name made of nouns that ends in one of these reports something (``notebook_stats``, ``order_details``).
REPORT_NOUNS = frozenset(
    "stats statistics summary info information details status overview metadata profile balance report".split()
)
_PHRASAL_WRITE = {("check", "in"), ("check", "out"), ("sign", "in"), ("sign", "out"), ("sign", "up"),
                  ("log", "in"), ("log", "out"), ("opt", "in"), ("opt", "out"), ("set", "up")}
_PHRASAL_READ = {("pull", "up"), ("look", "up"), ("bring", "up"), ("call", "up")}  # "pull up an account": open it to read
_CONTAINERS = frozenset("list set array series pair sequence collection group sample".split())
_PREPOSITIONS = frozenset("to from by in into with for on onto between at as using via per than within".split())
_STATE_REF_WORDS = frozenset(
    "id ids uuid guid key keys slug handle token path file filename folder dir directory username login email phone "
    "account".split()
)
_COLLECTION_WORDS = frozenset("list all history".split())

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NO_CHANGE = re.compile(
    r"\b(?:does\s+not|doesn'?t|do\s+not|don'?t|will\s+not|won'?t|never|cannot|can'?t|without)\s+(?:\w+\s+)?"
    r"(?:(?:\w+\s+){1,4}(?:or|nor)\s+)?"  # "will not obtain new information or change the database"
    r"(?:modif(?:y|ies|ying)|chang(?:e|es|ing)|alter(?:s|ing)?|mutat(?:e|es|ing)|affect(?:s|ing)?|updat(?:e|es|ing)"
    r"|writ(?:e|es|ing)|touch(?:es|ing)?|persist(?:s|ing)?)\s+"
    r"(?:(?:any|the|your|its|their|stored|underlying|existing|persistent|server|system)\s+){0,2}"
    r"(?:state|data|database|db|anything|records?|storage|store|system|server|files?|file\s*system|filesystem|disk"
    r"|environment|memory|backend|world)\b"
    r"|\b(?:has|have|with|causes?|produces?)\s+no\s+side[- ]effects?\b|\bside[- ]effect[- ]free\b"
    r"|\b(?:is|are|operation|tool|call|endpoint|function|method|request)\s+(?:\w+\s+)?read[- ]only\b"
    r"|^\W*read[- ]only\b|\bnon[- ]?destructive\b|\bmakes?\s+no\s+changes\b"
    r"|\bnothing\s+is\s+(?:changed|modified|written|stored|saved)\b",
    re.I,
)
_IRREVERSIBLE = re.compile(r"\birreversibl[ey]\b|\bcan(?:not|'t)\s+be\s+undone\b|\bpermanently\b|\boverwrit(?:e|es|ing)\b", re.I)
_SUBJECTS = (
    re.compile(r"(?:this|the|a|an)\s+(?:tool|function|endpoint|operation|method|api|call|command|action|utility"
               r"|service|route|resource|request)\s+", re.I),
    re.compile(r"(?:tool|function|endpoint|api|method|operation|command|utility)s?\s+(?:to|that|which)\s+", re.I),
    re.compile(r"(?:it|this)\s+", re.I),
    re.compile(r"(?:will|can|may|should|shall|would|could|must)\s+(?:be\s+used\s+to\s+|also\s+)?", re.I),
    re.compile(r"(?:is\s+|are\s+)?used\s+to\s+", re.I),
    re.compile(r"(?:use|call|invoke)\s+(?:this\s+(?:\w+\s+)?)?(?:to|for)\s+", re.I),
    re.compile(r"(?:allows?|lets?|enables?|helps?)\s+(?:(?:the\s+)?(?:users?|you|callers?|clients?|agents?|models?)\s+)?"
               r"(?:to\s+)?", re.I),
)
_LABEL = re.compile(r"([A-Za-z][A-Za-z0-9 _-]{0,40}):\s+")
_TOKEN = re.compile(r"[a-z0-9][a-z0-9'-]*|[^\sa-z0-9]")


def words(name: str) -> list[str]:
    """``findUserIdByEmail`` / ``find_user_id_by_email`` / ``find-user`` -> lowercase words."""
    return [w for w in re.split(r"[^a-z0-9]+", _CAMEL.sub("_", name).lower()) if w]


# --------------------------------------------------------------------------- per tool


def states_no_change(description: str) -> bool:
    """True when the description says the tool changes nothing ("will not change the database")."""
    return bool(_NO_CHANGE.search(description or ""))


def tool_effect(name: str, description: str = "", parameters: Mapping[str, Any] | None = None) -> Effect:
    """The effect from everything a tool says about itself except explicit hints (see the module docstring)."""
    description = description or ""
    if states_no_change(description):
        return "read"
    ws = _operation_words(name)
    return (
        _name_lead_effect(ws, description, parameters)
        or _description_effect(description, parameters)
        or _name_tail_effect(ws)
        or _computation_effect(ws, parameters)
        or ("write" if _IRREVERSIBLE.search(description) else None)
        or "unknown"
    )


def verb_effect(name: str, description: str = "") -> Effect:
    """The effect implied by the name and description alone (no parameters): :func:`tool_effect`."""
    return tool_effect(name, description)


def _operation_words(name: str) -> list[str]:
    """Words of the operation part of a name: after the last dot (``pets.update_weight``) when that part has words."""
    if "." in name:
        tail = words(name.rsplit(".", 1)[1])
        if tail and (_verb_of(tail[0]) or len(tail) > 1):
            return tail
    return words(name)


def _verb_of(w: str) -> Effect | None:
    """read/write from the verb lists, with ``re-``/``un-`` prefixes (``reassign``, ``unfollow``)."""
    if w in WRITE_VERBS:
        return "write"
    if w in READ_VERBS:
        return "read"
    if len(w) > 4 and w.startswith("re") and w[2:] in WRITE_VERBS | READ_VERBS:
        return "write" if w[2:] in WRITE_VERBS else "read"
    if len(w) > 4 and w.startswith("un") and w[2:] in WRITE_VERBS:
        return "write"
    return None


def _name_lead_effect(ws: list[str], description: str, parameters: Mapping[str, Any] | None) -> Effect | None:
    if not ws:
        return None
    first, second = ws[0], (ws[1] if len(ws) > 1 else "")
    if len(ws) == 1 and first in SHELL_READ:
        return "read"
    if len(ws) == 1 and first in SHELL_WRITE:
        return "write"
    if (first, second) in _PHRASAL_WRITE:
        return "write"
    if (first, second) in _PHRASAL_READ:
        return "read"
    if first in _NOUN_LIKE and len(ws) >= 2 and ws[-1] not in _NOUN_LIKE and _verb_of(ws[-1]):
        return _verb_of(ws[-1])  # resource_verb names: issue_read, record_delete, file_upload
    if first in QUANTITY_VERBS:
        if _quantity_object(first, ws[1:], description, parameters):
            return "read"
        return "write" if first in WRITE_VERBS else None
    return _verb_of(first)


def _quantity_object(verb: str, rest: list[str], description: str, parameters: Mapping[str, Any] | None) -> bool:
    """Does an arithmetic verb act on plain quantities here? Name object first, then description, then arguments."""
    if rest:
        return all(_is_quantity(w) or w in ("two", "all", "of", "and") for w in rest)
    for lead in _sentence_leads(description):
        if _base_forms(lead[0]) & {verb}:
            head = _object_head(lead[1:])
            if head is not None:
                return _is_quantity(head)
            break
    return _numeric_signature(parameters)


def _description_effect(description: str, parameters: Mapping[str, Any] | None) -> Effect | None:
    """The effect of the first sentence that says what the tool does (context sentences are skipped)."""
    for lead in _sentence_leads(description):
        w, nxt = lead[0], (lead[1] if len(lead) > 1 else "")
        if w in _CONTEXT_WORDS:
            continue
        forms = _base_forms(w)
        if any((f, nxt) in _PHRASAL_WRITE or (f, _split_particle(lead[1:])) in _PHRASAL_WRITE for f in forms):
            return "write"
        for f in sorted(forms & QUANTITY_VERBS):
            head = _object_head(lead[1:])
            if (_is_quantity(head) if head is not None else _numeric_signature(parameters)):
                return "read"
        if forms & _DESCRIPTION_READ:
            return "read"
        for f in sorted(forms, key=len, reverse=True):
            effect = _verb_of(f)
            if effect:
                return effect
        return None  # the action sentence has a verb we do not know
    return None


def _split_particle(tokens: list[str]) -> str:
    """The particle of a split phrasal verb: "Check a guest in." / "Log the user out for the day" -> in / out."""
    for i, t in enumerate(tokens[1:5], start=1):
        if t in ("in", "out", "up"):
            after = tokens[i + 1] if i + 1 < len(tokens) else "."
            if not after[0].isalnum() or after in ("for", "of", "at", "on", "and", "when", "after", "before"):
                return t
            return ""
        if not t[0].isalnum():
            return ""
    return ""


def _name_tail_effect(ws: list[str]) -> Effect | None:
    if len(ws) >= 2 and ws[-1] not in _NOUN_LIKE:
        return _verb_of(ws[-1])
    return None


def _computation_effect(ws: list[str], parameters: Mapping[str, Any] | None) -> Effect | None:
    if any(w in COMPUTE_NOUNS for w in ws) or (len(ws) >= 2 and ws[-1] in REPORT_NOUNS):
        return "read"
    if ws and ("conversion" in ws or "to" in ws[1:-1]) and _numeric_signature(parameters):
        return "read"  # si_unit_conversion(value, unit_in, unit_out), gallon_to_liter(gallon)
    return None


def _sentence_leads(description: str) -> list[list[str]]:
    """Per sentence, its tokens from the action verb on (labels, subjects, modals and adverbs removed)."""
    out = []
    for sentence in re.split(r"(?<=[.!?;])\s+|\n+", description):
        s = sentence.strip().lstrip("-*#>` ").strip()
        for _ in range(6):
            before = s
            m = _LABEL.match(s)
            if m and len(m.group(1).split()) <= 4:
                s = s[m.end():]
            for rx in _SUBJECTS:
                m = rx.match(s)
                if m:
                    s = s[m.end():]
            m = re.match(r"([A-Za-z]+ly)\s+", s)
            if m and len(m.group(1)) > 4 and not _verb_of(m.group(1).lower()) and m.group(1).lower() not in QUANTITY_VERBS:
                s = s[m.end():]
            if s == before:
                break
        tokens = _TOKEN.findall(s.lower())
        if tokens and tokens[0][0].isalpha():
            out.append(tokens)
    return out


def _base_forms(w: str) -> set[str]:
    """``returns`` -> {returns, return}; ``queries`` -> {queries, query}; ``pushes`` -> {pushes, push, pushe}."""
    forms = {w}
    if w.endswith("ies") and len(w) > 4:
        forms.add(w[:-3] + "y")
    if w.endswith("es") and len(w) > 3:
        forms.add(w[:-2])
    if w.endswith("s") and not w.endswith("ss") and len(w) > 2:
        forms.add(w[:-1])
    return forms


def _object_head(tokens: list[str]) -> str | None:
    """Head noun of the object after a verb: "two numbers" -> numbers; "a list of numbers" -> numbers."""
    segment: list[str] = []
    segments = [segment]
    for t in tokens[:12]:
        if not t[0].isalnum() or t in _PREPOSITIONS or t in ("and", "or"):
            break
        if t == "of":
            segment = []
            segments.append(segment)
            continue
        segment.append(t)
    if not segments[0]:
        return None
    head = segments[0][-1]
    if head in _CONTAINERS and len(segments) > 1 and segments[1]:
        head = segments[1][-1]
    return head


def _is_quantity(w: str | None) -> bool:
    if not w:
        return False
    return w in QUANTITY_NOUNS or (w.endswith("s") and w[:-1] in QUANTITY_NOUNS) or w.isdigit()


def _param_words(pname: str) -> list[str]:
    return words(pname) or [pname.lower()]


def _schema_type(schema: Any) -> str | None:
    if not isinstance(schema, dict):
        return None
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), None)
    return t if isinstance(t, str) else None


def _numeric_signature(parameters: Mapping[str, Any] | None) -> bool:
    """Arguments are plain numbers (or lists of them), units and flags: a function of its arguments."""
    props = (parameters or {}).get("properties") if isinstance(parameters, Mapping) else None
    if not isinstance(props, dict) or not props:
        return False
    numeric = 0
    for pname, schema in props.items():
        pw = _param_words(str(pname))
        if set(pw) & (_STATE_REF_WORDS | _MONEY_WORDS):
            return False
        t = _schema_type(schema)
        if t in ("number", "integer"):
            numeric += 1
        elif t == "array" and _schema_type(schema.get("items")) in ("number", "integer"):
            numeric += 1
        elif t == "boolean":
            continue
        elif t == "string" and (isinstance(schema, dict) and "enum" in schema
                                or set(pw) & {"unit", "units", "currency", "base", "mode", "format", "precision"}):
            continue
        else:
            return False
    return numeric > 0


# --------------------------------------------------------------------------- hints


def explicit_effect(obj: dict[str, Any], path: str, pointer: str) -> Effect | None:
    """An ``x-effect`` ("read"/"write") or boolean ``readOnly``/``x-read-only`` hint on a tool object."""
    if "x-effect" in obj:
        value = obj["x-effect"]
        if value not in ("read", "write"):
            raise ToolDocError(
                f"x-effect must be 'read' or 'write', got {value!r}", path=path, location=f"{pointer}/x-effect"
            )
        return value
    for key in ("readOnly", "x-read-only", "x-readonly", "readOnlyHint"):
        if key in obj:
            value = obj[key]
            if not isinstance(value, bool):
                raise ToolDocError(f"{key} must be true or false, got {value!r}", path=path, location=f"{pointer}/{key}")
            return "read" if value else "write"
    return None


def mcp_effect(annotations: Any, path: str, pointer: str) -> Effect | None:
    """MCP tool annotations: ``readOnlyHint: true`` -> read; ``destructiveHint: true`` or
    ``readOnlyHint: false`` -> write (the MCP spec's default for readOnlyHint is false, but
    only an explicit value counts as evidence here)."""
    if annotations is None:
        return None
    if not isinstance(annotations, dict):
        raise ToolDocError("annotations must be an object", path=path, location=pointer)
    for key in ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"):
        if key in annotations and not isinstance(annotations[key], bool):
            raise ToolDocError(f"{key} must be true or false", path=path, location=f"{pointer}/{key}")
    if annotations.get("readOnlyHint") is True:
        return "read"
    if annotations.get("destructiveHint") is True or annotations.get("readOnlyHint") is False:
        return "write"
    return None


def method_effect(method: str, description: str = "") -> Effect:
    """HTTP semantics: safe methods read, the others write, unless the description says nothing changes
    (``POST /search`` documented as "does not modify any data")."""
    if method.lower() in ("get", "head", "options", "trace"):
        return "read"
    return "read" if states_no_change(description) else "write"


def infer_effect(name: str, description: str = "", *, hint: Effect | None = None,
                 parameters: Mapping[str, Any] | None = None) -> Effect:
    """Public helper: an explicit hint if given, else :func:`tool_effect` (used by the offline backend)."""
    return hint if hint in ("read", "write") else tool_effect(name, description, parameters)


# --------------------------------------------------------------------------- tool sets


def _get(spec: Any, key: str, default: Any = None) -> Any:
    return spec.get(key, default) if isinstance(spec, Mapping) else getattr(spec, key, default)


def refers_to_state(spec: Any) -> bool:
    """Does a tool point at stored things: an id/key/path/account argument, or listing a whole collection?"""
    params = _get(spec, "parameters")
    props = params.get("properties") if isinstance(params, Mapping) else None
    if isinstance(props, Mapping) and any(set(_param_words(str(p))) & _STATE_REF_WORDS for p in props):
        return True
    return bool(set(_operation_words(str(_get(spec, "name", "")))) & _COLLECTION_WORDS)


def classify_toolset(specs: Iterable[Any]) -> tuple[dict[str, Effect], ToolsetKind]:
    """Effects of all tools of one tool set, judged together, and the tool set's kind.

    ``specs``: ``ToolSpec``/``ParsedTool`` objects or dicts with ``name``, ``description``,
    ``parameters`` and ``effect`` (the per-tool effect, explicit hints included). ``"stateless"``
    when no tool writes, none refers to stored things (:func:`refers_to_state`) and reads are at
    least as many as unknowns; then the unknown tools become reads. Only ``"unknown"`` is changed.
    """
    specs = list(specs)
    effects: dict[str, Effect] = {}
    for s in specs:
        e = _get(s, "effect") or "unknown"
        if e == "unknown":
            e = tool_effect(str(_get(s, "name", "")), str(_get(s, "description", "") or ""), _get(s, "parameters"))
        effects[str(_get(s, "name", ""))] = e
    values = list(effects.values())
    reads, unknown = values.count("read"), values.count("unknown")
    if not specs or "write" in values or reads == 0 or unknown > reads or any(refers_to_state(s) for s in specs):
        return effects, "stateful"
    return {n: ("read" if e == "unknown" else e) for n, e in effects.items()}, "stateless"


def toolset_kind(specs: Iterable[Any]) -> ToolsetKind:
    """``"stateless"`` (no tool can change state: pure computation or external lookups) or ``"stateful"``."""
    return classify_toolset(specs)[1]
