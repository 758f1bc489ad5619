"""Answer tasks: read-only DAGs whose last output is what the user wants to know.

Where no tool changes state (math, search, reads), the gold final state S* equals S and says
nothing; the task is verifiable through its *answer* instead (:class:`autoforge.types.GoldAnswer`):
the value at the DAG's :class:`autoforge.types.AnswerSource` in the gold run. The request asks for
it ("... and tell me the result"); the reward's ``answer_match`` component
(:func:`answer_match`, used by :func:`autoforge.rollout.reward.score`) is true when the agent's
final message states it, normalized:

- numbers: any number in the message within ``tolerance`` (relative, at least 1e-6 absolute) of
  the gold value; ``1,234.5`` and ``1234.50`` both read as 1234.5;
- strings: case- and whitespace-insensitive, as a whole phrase of the message;
- lists: every item stated (a set: order and repeats do not matter).

Instantiation of computation tools (``ToolCode.kind == "compute"``) draws operands a person
would ask about (:class:`ComputeChooser`): a handful of readings, a precision of 0–4 places, a
small exponent; everything else falls through to :class:`autoforge.tasks.instantiate.FactChooser`.
"""

from __future__ import annotations

import math
import random
import re
from typing import Any

from autoforge.dags.build import topo_order
from autoforge.domain import words as nm
from autoforge.dialogue import fact_words
from autoforge.domain.operands import own_description, PRECISION_PARAMS, SPOKEN_UNITS, unit_params
from autoforge.tasks.execute import DagExecutionError, DagRun, resolve_path
from autoforge.types import AnswerSource, DagNode, GoldAnswer, TaskDag, ToolCode

TOLERANCE = 1e-4  # relative tolerance of a numeric answer (DEFAULT: the tools round to 4+ places or not at all)
MAX_ANSWER_CHARS = 200  # a longer string is a document, not an answer a message can be checked for (DEFAULT)
MAX_LIST = 6  # an answer set of more items is a listing, not an answer (DEFAULT)
EXPONENT_PARAMS = {"exponent", "power", "exp"}
OPENERS = ["Hi,", "Hello!", "Hey there.", "Good morning.", ""]
ASKS = ["could you {x} and tell me the {f}?", "please {x} and let me know the {f}.", "I'd like to know the {f}: {x}.",
        "can you {x}? I need the {f}."]
TAILS = ["I can tell you the {x}.", "Ask me for the {x}.", "I'll give you the {x} when you ask."]


# --------------------------------------------------------------------------- instantiation


class ComputeChooser:
    """Facts for computation tools: operands a person would ask about; the rest to ``fallback``."""

    def __init__(self, tools: dict[str, ToolCode], rng: random.Random, fallback: Any):
        self.tools, self.rng, self.fallback = tools, rng, fallback
        self.units: dict[str, list[str]] = {}  # node -> its (from, to) units

    def __call__(self, node: DagNode, arg: str, args: dict[str, Any], env: Any) -> Any:
        tool = self.tools.get(node.tool or "")
        if tool is None or tool.kind != "compute":
            return self.fallback(node, arg, args, env)
        schema = ((tool.parameters or {}).get("properties") or {}).get(arg) or {}
        name, rng = nm.snake(arg), self.rng
        conv = unit_params(tool.parameters)
        if conv and arg in conv[1:] and not schema.get("enum"):  # two units of one dimension ("feet" to "meters")
            if node.node_id not in self.units:
                dim = rng.choice(sorted(SPOKEN_UNITS))
                self.units[node.node_id] = rng.sample(SPOKEN_UNITS[dim], 2)
            return self.units[node.node_id][conv.index(arg) - 1]
        typ = schema.get("type")
        if name in PRECISION_PARAMS:
            return rng.randint(0, 4)
        if name in EXPONENT_PARAMS:
            return rng.randint(2, 4)
        if name == "base" and {"log", "logarithm", "ln"} & set(nm.words(tool.name)):
            return rng.choice([2, 10])
        if typ == "array":
            return [self._number("number") for _ in range(rng.randint(3, 6))]
        if typ in ("number", "integer"):
            return self._number(typ)
        return self.fallback(node, arg, args, env)

    def _number(self, typ: str) -> int | float:
        if typ == "integer" or self.rng.random() < 0.4:
            return self.rng.randint(2, 250)
        return round(self.rng.uniform(1, 500), self.rng.choice([1, 2]))


# --------------------------------------------------------------------------- the gold answer


def answer_value(src: AnswerSource, outputs: dict[str, Any]) -> Any:
    """The raw value at ``src`` in node ``outputs``: the leaf, or for ``L.*.f`` the distinct
    non-empty values of ``f`` over the list (sorted), the answer set."""
    out = outputs.get(src.node)
    if ".*." not in src.path:
        return resolve_path(out, src.path, node=src.node)
    list_path, field = src.path.split(".*.", 1)
    items = resolve_path(out, list_path, node=src.node)
    values = [x.get(field) for x in items if isinstance(x, dict)] if isinstance(items, list) else []
    return sorted({v for v in values if v is not None and not isinstance(v, bool)}, key=repr)


def gold_answer(dag: TaskDag, run: DagRun) -> GoldAnswer:
    """The answer of a gold run (raises DagExecutionError when it is missing or ambiguous)."""
    src = dag.answer
    if src is None:
        raise DagExecutionError("no_answer", "the DAG asks for no answer")
    out = run.outputs.get(src.node)
    if ".*." in src.path:
        values = answer_value(src, run.outputs)
        if not 2 <= len(values) <= MAX_LIST or not all(isinstance(v, (int, float, str)) for v in values):
            raise DagExecutionError("ambiguous_answer", f"{src.path} gives {len(values)} values; an answer set holds 2..{MAX_LIST}",
                                    src.node)
        if any(isinstance(v, str) and not _good_string(v) for v in values):
            raise DagExecutionError("no_answer", f"{src.path} holds text that is not a short answer", src.node)
        return GoldAnswer(value=values, kind="list", tolerance=TOLERANCE, field=src.field)
    if ".0." in src.path:
        list_path = src.path.split(".0.", 1)[0]
        items = resolve_path(out, list_path, node=src.node)
        if not isinstance(items, list) or len(items) != 1:
            n = len(items) if isinstance(items, list) else 0
            raise DagExecutionError("ambiguous_answer", f"{list_path} holds {n} records; the answer needs exactly one", src.node)
    value = answer_value(src, run.outputs)
    if isinstance(value, bool) or value is None:
        raise DagExecutionError("no_answer", f"{src.path} is {value!r}: nothing to state", src.node)
    if isinstance(value, (int, float)):
        if value in (0, 1) and src.path.rsplit(".", 1)[-1] in ("count", "n", "num"):
            # a tally of none or one is a lookup's echo ("1 match"), not a count worth asking for
            raise DagExecutionError("no_answer", f"{src.path} is {value}: a tally of none or one is nothing to find", src.node)
        if isinstance(value, float) and not math.isfinite(value):
            raise DagExecutionError("no_answer", f"{src.path} is not a finite number", src.node)
        return GoldAnswer(value=value, kind="number", tolerance=TOLERANCE, field=src.field)
    if isinstance(value, str) and _good_string(value):
        return GoldAnswer(value=value, kind="string", field=src.field)
    raise DagExecutionError("no_answer", f"{src.path} is not a short number or text ({str(value)[:40]!r})", src.node)


def _good_string(v: str) -> bool:
    return 0 < len(v.strip()) <= MAX_ANSWER_CHARS


# --------------------------------------------------------------------------- matching


_NUM = re.compile(r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")


def numbers_in(text: str) -> list[float]:
    """Every number a message states (thousands separators allowed)."""
    out = []
    for m in _NUM.finditer(text or ""):
        try:
            out.append(float(m.group(0).replace(",", "")))
        except ValueError:
            continue
    return out


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", str(s)).strip().lower()


def _states(text: str, value: Any, tolerance: float | None) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        tol = max(1e-6, (tolerance if tolerance is not None else TOLERANCE) * max(1.0, abs(float(value))))
        return any(abs(x - float(value)) <= tol for x in numbers_in(text))
    v = _norm(value)
    return bool(v) and re.search(rf"(?<!\w){re.escape(v)}(?!\w)", _norm(text)) is not None


def answer_match(message: str | None, gold: GoldAnswer) -> bool:
    """Does ``message`` state the gold answer (numbers within tolerance, text case/space-insensitive, lists as sets)?"""
    if not message:
        return False
    if gold.kind == "list":
        return all(_states(message, v, gold.tolerance) for v in gold.value)
    return _states(message, gold.value, gold.tolerance)


def answer_given_away(request: str, gold: GoldAnswer, facts: dict[str, Any] | None = None) -> str | None:
    """Why the answer needs no tool (the request states it, or it is a value the user gives: the
    absolute value of 222), or None. A value picked out of a list the user gives (the largest of
    their readings) is found, not given."""
    if answer_match(request, gold):
        return f"the request already states the answer {gold.value!r}"
    for k, v in (facts or {}).items():
        if isinstance(v, (int, float, str)) and not isinstance(v, bool) and answer_match(_fmt(v), gold):
            return f"the answer {gold.value!r} is the user's own {k}"
    return None


def _fmt(v: Any) -> str:
    return repr(v) if isinstance(v, float) else str(v)


# --------------------------------------------------------------------------- the request


def tool_description(tool: ToolCode) -> str:
    """The tool's documented description (the docstring its code carries)."""
    m = re.search(r'"""(.*?)"""', tool.source or "", re.S)
    return m.group(1).strip() if m else ""


def _what(tool: ToolCode) -> str:
    """What a tool does, as an imperative clause from its description ("calculate the mean of a list of numbers")."""
    desc = own_description(tool_description(tool))
    first = re.split(r"(?<=[.!?])\s", desc, maxsplit=1)[0].strip().rstrip(".!?")
    first = re.sub(r"^(?:this (?:function|tool|endpoint|operation|method)\s+|returns?\s+|it\s+)", "", first, flags=re.I)
    words = first.split()
    if not words or len(words) > 18:
        return " ".join(nm.words(tool.name))
    verb = words[0].lower()
    if verb.endswith("ies") and len(verb) > 4:
        verb = verb[:-3] + "y"
    elif re.search(r"(?:sses|shes|ches|xes)$", verb):
        verb = verb[:-2]
    elif verb.endswith("s") and not verb.endswith("ss") and len(verb) > 3:
        verb = verb[:-1]
    return " ".join([verb] + words[1:])


def answer_request(dag: TaskDag, tools: dict[str, ToolCode], rng: random.Random) -> str:
    """The opening message of an answer task: what to compute or find, what to report, and the
    facts the user can give (named, never stated: the agent asks)."""
    steps: list[str] = []
    for n in topo_order(dag):
        if n.kind == "tool" and _what(tools[n.tool]) not in steps:
            steps.append(_what(tools[n.tool]))
    x = steps[0] if len(steps) == 1 else ", then ".join([steps[0]] + [f"{s} with that" for s in steps[1:]])
    ask = rng.choice(ASKS).format(x=x, f=dag.answer.field if dag.answer else "answer")
    facts: list[str] = []
    for n in topo_order(dag):
        for src in n.args.values():
            if src.kind == "user" and src.fact not in facts:
                facts.append(src.fact)
    tail = rng.choice(TAILS).format(x=_join([fact_words(f) for f in facts])) if facts else ""
    opener = rng.choice(OPENERS)
    if not opener or opener.endswith((".", "!")):
        ask = ask[0].upper() + ask[1:]
    return re.sub(r"\s+", " ", " ".join(p for p in (opener, ask, tail) if p)).strip()


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
