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
from typing import Any

from autoforge.domain import words as nm
from autoforge.envs import pynames
from autoforge.envs.rules import argument_checks
from autoforge.envs.templates import ToolDraft, func_name
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
PRECISION_PARAMS = {"precision", "decimal_places", "decimals", "digits", "ndigits", "places", "round_to", "decimal"}
FIRST_ROLES = ("base", "part", "numerator", "dividend", "value", "number", "x", "a", "first", "minuend", "num1")
SECOND_ROLES = ("exponent", "power", "whole", "total", "denominator", "divisor", "y", "b", "second", "subtrahend", "num2")


def _type(schema: dict) -> str:
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), None)
    return t or ""


def _numeric(schema: dict) -> bool:
    return _type(schema) in ("number", "integer")


def _operands(parameters: dict | None) -> tuple[list[str], list[str], str | None]:
    """(number params in documented order, number-list params, the precision param)."""
    props = (parameters or {}).get("properties") or {}
    nums, lists, precision = [], [], None
    for name, s in props.items():
        s = s if isinstance(s, dict) else {}
        if nm.snake(name) in PRECISION_PARAMS and _type(s) in ("integer", "number"):
            precision = name
        elif _numeric(s):
            nums.append(name)
        elif _type(s) == "array" and _numeric(s.get("items") if isinstance(s.get("items"), dict) else {}):
            lists.append(name)
    return nums, lists, precision


def _order(nums: list[str]) -> list[str]:
    """Binary operands: by documented role (base before exponent, part before whole), else as listed."""
    first = next((n for n in nums if nm.snake(n) in FIRST_ROLES), None)
    second = next((n for n in nums if n != first and nm.snake(n) in SECOND_ROLES), None)
    if first and second:
        return [first, second] + [n for n in nums if n not in (first, second)]
    return nums


def operand_order(parameters: dict | None) -> list[str]:
    """The numeric operands of a tool with these parameters, first operand first (no precision)."""
    nums, _, _ = _operands(parameters)
    return _order(nums)


def own_description(text: str) -> str:
    """A tool's own description, without the API blurb some catalogues put before every tool
    ("This tool belongs to the Math API ... Tool description: Add two numbers.")."""
    return text.split("Tool description:", 1)[-1].strip()


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
    scalar = [k for k, v in props.items() if isinstance(v, dict) and _type(v) in ("number", "integer", "string", "boolean")]
    return scalar[0] if len(props) == 1 and scalar else "result"


# unit -> (dimension, factor to the dimension's base unit); temperatures convert through kelvin
UNITS: dict[str, tuple[str, float]] = {
    "m": ("length", 1.0), "km": ("length", 1000.0), "cm": ("length", 0.01), "mm": ("length", 0.001),
    "in": ("length", 0.0254), "ft": ("length", 0.3048), "yd": ("length", 0.9144), "mi": ("length", 1609.344),
    "kg": ("mass", 1.0), "g": ("mass", 0.001), "mg": ("mass", 1e-6), "lb": ("mass", 0.45359237), "oz": ("mass", 0.028349523125),
    "l": ("volume", 1.0), "ml": ("volume", 0.001), "gal": ("volume", 3.785411784), "qt": ("volume", 0.946352946),
    "pt": ("volume", 0.473176473), "cup": ("volume", 0.2365882365),
    "s": ("time", 1.0), "min": ("time", 60.0), "h": ("time", 3600.0), "day": ("time", 86400.0),
    "c": ("temperature", 0.0), "f": ("temperature", 0.0), "k": ("temperature", 0.0),
}
UNIT_NAMES: dict[str, str] = {  # spoken names -> the symbols above
    "meter": "m", "meters": "m", "metre": "m", "metres": "m", "kilometer": "km", "kilometers": "km", "centimeter": "cm",
    "centimeters": "cm", "millimeter": "mm", "millimeters": "mm", "inch": "in", "inches": "in", "foot": "ft", "feet": "ft",
    "yard": "yd", "yards": "yd", "mile": "mi", "miles": "mi", "kilogram": "kg", "kilograms": "kg", "gram": "g", "grams": "g",
    "milligram": "mg", "milligrams": "mg", "pound": "lb", "pounds": "lb", "lbs": "lb", "ounce": "oz", "ounces": "oz",
    "liter": "l", "liters": "l", "litre": "l", "litres": "l", "milliliter": "ml", "milliliters": "ml", "gallon": "gal",
    "gallons": "gal", "quart": "qt", "quarts": "qt", "pint": "pt", "pints": "pt", "cups": "cup", "second": "s",
    "seconds": "s", "sec": "s", "minute": "min", "minutes": "min", "hour": "h", "hours": "h", "hr": "h", "days": "day",
    "celsius": "c", "fahrenheit": "f", "kelvin": "k",
}
SPOKEN_UNITS = {"length": ["meters", "kilometers", "centimeters", "inches", "feet", "miles"],
                "mass": ["kilograms", "grams", "pounds", "ounces"], "volume": ["liters", "milliliters", "gallons", "cups"],
                "time": ["seconds", "minutes", "hours"], "temperature": ["celsius", "fahrenheit", "kelvin"]}
_FROM_WORDS = {"in", "from", "source", "input", "src", "original"}
_TO_WORDS = {"out", "to", "target", "output", "dst", "desired"}


def unit_params(parameters: dict | None) -> tuple[str, str, str] | None:
    """(value, from-unit, to-unit) parameters of a conversion tool, or None."""
    props = (parameters or {}).get("properties") or {}
    nums = [p for p, s in props.items() if isinstance(s, dict) and _numeric(s) and nm.snake(p) not in PRECISION_PARAMS]
    units = [p for p, s in props.items() if isinstance(s, dict) and _type(s) == "string"
             and ("unit" in nm.words(p) or nm.snake(p) in ("from", "to"))]
    if len(nums) != 1 or len(units) != 2:
        return None
    src = next((u for u in units if set(nm.words(u)) & _FROM_WORDS), None)
    dst = next((u for u in units if u != src and set(nm.words(u)) & _TO_WORDS), None)
    return (nums[0], src, dst) if src and dst else None


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
    nums, lists, precision = _operands(spec.parameters)
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
        order = _order(nums)
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
