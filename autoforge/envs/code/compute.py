"""Computation tools: real code for the arithmetic and statistics that stateless tool docs describe.

A stateless tool set (:func:`autoforge.tooldocs.effects.toolset_kind`: no tool can change state)
is often pure computation: ``add(a, b)``, ``mean(numbers)``, ``square_root(number, precision)``.
The offline backend's record templates would turn such a tool into a filter over stored rows,
which answers "add 2 and 3" with whatever row matches. Here the operation is read from the
tool's name (then its description) against a catalogue of common operations, its operands from
the parameters (two numbers, one number, or a list of numbers, by name where the docs name the
roles: ``base``/``exponent``, ``part``/``whole``), and the code computes the value, refuses bad
operands with an error observation (division by zero, the root of a negative number, an empty
list) and rounds to a ``precision``/``decimal_places`` parameter where there is one. The result
goes under the documented output's single field (``result`` when undocumented).

A tool whose operation is not in the catalogue keeps its template code: the LLM backend writes
real code for anything (this is the offline backend's stand-in, deterministic and documented).
"""

from __future__ import annotations

from dataclasses import dataclass

from autoforge.domain import words as nm
from autoforge.domain.operands import UNIT_NAMES, UNITS, operands, order_operands, own_description, schema_type, unit_params
from autoforge.envs import pynames
from autoforge.envs.code.base import ToolDraft, func_name
from autoforge.envs.rule_engine import argument_checks
from autoforge.types import ToolSpec


@dataclass(frozen=True)
class Op:
    """One operation: the words that name it, its operand shape and its Python expression."""

    name: str
    words: tuple[str, ...]
    shape: str  # binary (x, y) | unary (x) | list (xs)
    expr: str  # over x, y / xs; may use math
    guard: str = ""  # a condition that makes the call an error
    guard_message: str = ""


OPS: tuple[Op, ...] = (
    # lists first: "sum of a list" is sum(xs), "add two numbers" is x + y (decided by the operands)
    Op("mean", ("mean", "average", "avg"), "list", "sum(xs) / len(xs)", "not xs", "needs at least one number"),
    Op("median", ("median",), "list", "(sorted(xs)[(len(xs) - 1) // 2] + sorted(xs)[len(xs) // 2]) / 2", "not xs",
       "needs at least one number"),
    Op("standard_deviation", ("standard", "deviation", "stdev", "std", "stddev"), "list",
       "math.sqrt(sum((v - sum(xs) / len(xs)) ** 2 for v in xs) / len(xs))", "not xs", "needs at least one number"),
    Op("variance", ("variance",), "list", "sum((v - sum(xs) / len(xs)) ** 2 for v in xs) / len(xs)", "not xs",
       "needs at least one number"),
    Op("min", ("min", "minimum", "smallest", "lowest"), "list", "min(xs)", "not xs", "needs at least one number"),
    Op("max", ("max", "maximum", "largest", "highest", "biggest"), "list", "max(xs)", "not xs", "needs at least one number"),
    Op("sum", ("sum", "total", "add"), "list", "sum(xs)"),
    Op("product", ("product", "multiply"), "list", "math.prod(xs)"),
    Op("count", ("count", "length", "size"), "list", "len(xs)"),
    Op("range", ("range", "spread"), "list", "max(xs) - min(xs)", "not xs", "needs at least one number"),
    Op("add", ("add", "sum", "plus", "addition"), "binary", "x + y"),
    Op("subtract", ("subtract", "minus", "difference", "subtraction"), "binary", "x - y"),
    Op("multiply", ("multiply", "product", "times", "multiplication"), "binary", "x * y"),
    Op("divide", ("divide", "quotient", "division", "ratio"), "binary", "x / y", "y == 0", "cannot divide by zero"),
    Op("percentage", ("percentage", "percent"), "binary", "x / y * 100", "y == 0", "the whole cannot be zero"),
    Op("modulo", ("modulo", "mod", "remainder"), "binary", "x % y", "y == 0", "cannot take a remainder by zero"),
    Op("power", ("power", "pow", "exponent", "exponentiation", "raise"), "binary", "x ** y",
       "abs(y) > 64 or (x == 0 and y < 0)", "the exponent must be between -64 and 64 (and 0 has no negative power)"),
    Op("logarithm", ("logarithm", "log", "ln"), "binary", "math.log(x, y) if y is not None else math.log(x)",
       "x <= 0 or (y is not None and (y <= 0 or y == 1))", "the value must be positive and the base positive and not 1"),
    Op("square_root", ("sqrt", "root"), "unary", "math.sqrt(x)", "x < 0", "cannot take the square root of a negative number"),
    Op("square", ("square", "squared"), "unary", "x * x"),
    Op("absolute_value", ("absolute", "abs", "magnitude"), "unary", "abs(x)"),
    Op("round", ("round", "rounding"), "unary", "x"),
    Op("floor", ("floor",), "unary", "math.floor(x)"),
    Op("ceiling", ("ceil", "ceiling"), "unary", "math.ceil(x)"),
    Op("negate", ("negate", "negative", "opposite"), "unary", "-x"),
    Op("exponential", ("exp", "exponential"), "unary", "math.exp(x)", "x > 700", "the value is too large (at most 700)"),
    Op("factorial", ("factorial",), "unary", "math.factorial(int(x))", "x < 0 or x > 170 or x != int(x)",
       "needs a whole number from 0 to 170"),
    Op("reciprocal", ("reciprocal", "inverse"), "unary", "1 / x", "x == 0", "zero has no reciprocal"),
)


def _op_for(spec: ToolSpec, shape_ok) -> Op | None:
    name_words = set(nm.words(spec.name))
    desc = own_description(spec.description or "")
    desc_words = set(nm.words(desc.replace(".", " ").replace(",", " ")))
    for words in (name_words, desc_words):
        for op in OPS:
            if any(w in words for w in op.words) and shape_ok(op):
                return op
    return None


def output_field(spec: ToolSpec) -> str:
    """The documented output's one scalar field (``result`` when undocumented or not one field)."""
    props = ((spec.output_schema or {}).get("properties") or {})
    scalar = [k for k, v in props.items() if isinstance(v, dict) and schema_type(v) in ("number", "integer", "string", "boolean")]
    return scalar[0] if len(props) == 1 and scalar else "result"


def _conversion_lines(names: tuple[str, str, str], py: dict[str, str], public: dict[str, str] | None) -> list[str]:
    v, a, b = (py[n] for n in names)
    say = (public or {}).get(names[0], names[0])
    return [f"    unit_table = {UNITS!r}", f"    unit_names = {UNIT_NAMES!r}",
            f"    if not isinstance({v}, (int, float)) or isinstance({v}, bool):",
            f"        return {{'error': '{say} must be a number'}}",
            "    units = []",
            f"    for u in ({a}, {b}):",
            "        key = str(u).strip().lower()",
            "        key = unit_names.get(key, key)",
            "        if key not in unit_table:",
            "            return {'error': 'unknown unit ' + repr(u) + '; known: ' + ', '.join(sorted(unit_table))}",
            "        units.append(key)",
            "    (da, fa), (db, fb) = unit_table[units[0]], unit_table[units[1]]",
            "    if da != db:",
            "        return {'error': 'cannot convert ' + da + ' to ' + db}",
            "    if da == 'temperature':",
            f"        kv = {{'c': {v} + 273.15, 'f': ({v} - 32) * 5 / 9 + 273.15, 'k': {v}}}[units[0]]",
            "        out = {'c': kv - 273.15, 'f': (kv - 273.15) * 9 / 5 + 32, 'k': kv}[units[1]]",
            "    else:",
            f"        out = {v} * fa / fb"]


def compute_draft(spec: ToolSpec, template: ToolDraft, public: dict[str, str] | None = None) -> ToolDraft | None:
    """Computing code for ``spec`` (a tool of a stateless set), or None when no catalogued
    operation fits its name and operands. ``template``: the record template's draft, whose
    argument rules (ranges, formats) are kept and checked first."""
    nums, lists, precision = operands(spec.parameters)
    props = (spec.parameters or {}).get("properties") or {}
    required = list((spec.parameters or {}).get("required") or [])

    def fits(op: Op) -> bool:
        if op.shape == "list":
            return len(lists) == 1
        if op.shape == "binary":
            return not lists and (len(nums) == 2 or (op.name == "logarithm" and len(nums) == 1))
        return not lists and len(nums) == 1

    words = set(nm.words(spec.name)) | set(nm.words((spec.description or "").replace(".", " ")))
    conversion = unit_params(spec.parameters) if words & {"convert", "conversion", "converts"} else None
    op = None if conversion else _op_for(spec, fits)
    if op is None and conversion is None:
        return None
    params = [p for p in props]
    py = pynames.argument_names(params, pynames.CODE_RESERVED | {"state", "math", "x", "y", "xs", "value", "out", "places", "units",
                                                       "key", "u", "kv", "da", "db", "fa", "fb", "unit_table", "unit_names"})
    out_name = output_field(spec)
    sig = []
    for p in params:
        dflt = (props[p] or {}).get("default") if isinstance(props[p], dict) else None
        sig.append(py[p] if p in required else f"{py[p]}={dflt!r}")
    sig = [s for s in sig if "=" not in s] + [s for s in sig if "=" in s]
    doc = (spec.description or spec.name).replace('"""', "'''").replace("\\", "\\\\")
    lines = [f"def {func_name(spec.name)}(state, {', '.join(sig)}):", f'    """{doc}"""']
    checks = argument_checks(template.rules, {p: py[p] for p in params}, public)
    lines += ["    " + c for c in checks]

    def need_number(p: str, optional: bool = False) -> list[str]:
        v, say = py[p], (public or {}).get(p, p)
        cond = f"not isinstance({v}, (int, float)) or isinstance({v}, bool)"
        if optional:
            cond = f"{v} is not None and ({cond})"
        return [f"    if {cond}:", f"        return {{'error': '{say} must be a number'}}"]

    if conversion:
        lines += _conversion_lines(conversion, py, public)
    elif op.shape == "list":
        (lp,) = lists
        v, say = py[lp], (public or {}).get(lp, lp)
        lines += [f"    if not isinstance({v}, list) or any(not isinstance(n, (int, float)) or isinstance(n, bool) for n in {v}):",
                  f"        return {{'error': '{say} must be a list of numbers'}}", f"    xs = list({v})"]
    elif op.shape == "binary":
        order = order_operands(nums)
        if len(order) == 1:  # logarithm(value) with no base: the natural log
            lines += need_number(order[0]) + [f"    x, y = {py[order[0]]}, None"]
        else:
            a, b = order[:2]
            opt_b = op.name == "logarithm" and b not in required
            lines += need_number(a) + need_number(b, optional=opt_b) + [f"    x, y = {py[a]}, {py[b]}"]
    else:
        (a,) = nums
        lines += need_number(a) + [f"    x = {py[a]}"]
    if precision:
        pv, say = py[precision], (public or {}).get(precision, precision)
        lines += [f"    if {pv} is not None and (not isinstance({pv}, int) or isinstance({pv}, bool) or {pv} < 0 or {pv} > 15):",
                  f"        return {{'error': '{say} must be a whole number from 0 to 15'}}"]
    if op is not None and op.guard:
        lines += [f"    if {op.guard}:", f"        return {{'error': {op.name.replace('_', ' ') + ': ' + op.guard_message!r}}}"]
    if op is not None:
        lines += ["    try:", f"        out = {op.expr}", "    except (OverflowError, ValueError, ZeroDivisionError) as exc:",
                  f"        return {{'error': '{op.name.replace('_', ' ')}: ' + str(exc)}}"]
    lines += ["    if isinstance(out, float) and (math.isnan(out) or math.isinf(out)):",
              "        return {'error': 'the result is not a finite number'}"]
    if precision:
        pv = py[precision]
        lines += [f"    out = round(out, {pv}) if {pv} is not None else {'round(out)' if op and op.name == 'round' else 'out'}"]
    elif op is not None and op.name == "round":
        lines += ["    out = round(out)"]
    lines += [f"    return {{{out_name!r}: out}}"]
    source = "import math\n\n\n" + "\n".join(lines) + "\n"
    kind = "integer" if op is not None and op.name in ("count", "floor", "ceiling", "factorial") else "number"
    out_schema = spec.output_schema or {"type": "object", "properties": {out_name: {"type": kind}}, "required": [out_name]}
    arg_map = {p: q for p, q in py.items() if p != q} or None
    return ToolDraft(name=spec.name, source=source, kind="compute", collection=None, effect="read", output_schema=out_schema,
                     function_name=func_name(spec.name), arg_map=arg_map, rules=template.rules)
