"""Operands: what a computation tool's parameters mean (which numbers, in which order, which units).

Read by the computing code of :mod:`autoforge.envs.code.compute`, by DAG sampling (the operands a
reasoning step feeds, :func:`operand_order`) and by answer tasks (:mod:`autoforge.tasks.answers`:
units a person says, the precision parameter, a tool's own description).
"""

from __future__ import annotations

from autoforge.domain import words as nm

PRECISION_PARAMS = {"precision", "decimal_places", "decimals", "digits", "ndigits", "places", "round_to", "decimal"}
FIRST_ROLES = ("base", "part", "numerator", "dividend", "value", "number", "x", "a", "first", "minuend", "num1")
SECOND_ROLES = ("exponent", "power", "whole", "total", "denominator", "divisor", "y", "b", "second", "subtrahend", "num2")


def schema_type(schema: dict) -> str:
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), None)
    return t or ""


def is_numeric(schema: dict) -> bool:
    return schema_type(schema) in ("number", "integer")


def operands(parameters: dict | None) -> tuple[list[str], list[str], str | None]:
    """(number params in documented order, number-list params, the precision param)."""
    props = (parameters or {}).get("properties") or {}
    nums, lists, precision = [], [], None
    for name, s in props.items():
        s = s if isinstance(s, dict) else {}
        if nm.snake(name) in PRECISION_PARAMS and schema_type(s) in ("integer", "number"):
            precision = name
        elif is_numeric(s):
            nums.append(name)
        elif schema_type(s) == "array" and is_numeric(s.get("items") if isinstance(s.get("items"), dict) else {}):
            lists.append(name)
    return nums, lists, precision


def order_operands(nums: list[str]) -> list[str]:
    """Binary operands: by documented role (base before exponent, part before whole), else as listed."""
    first = next((n for n in nums if nm.snake(n) in FIRST_ROLES), None)
    second = next((n for n in nums if n != first and nm.snake(n) in SECOND_ROLES), None)
    if first and second:
        return [first, second] + [n for n in nums if n not in (first, second)]
    return nums


def operand_order(parameters: dict | None) -> list[str]:
    """The numeric operands of a tool with these parameters, first operand first (no precision)."""
    nums, _, _ = operands(parameters)
    return order_operands(nums)


def own_description(text: str) -> str:
    """A tool's own description, without the API blurb some catalogues put before every tool
    ("This tool belongs to the Math API ... Tool description: Add two numbers.")."""
    return text.split("Tool description:", 1)[-1].strip()


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
    nums = [p for p, s in props.items() if isinstance(s, dict) and is_numeric(s) and nm.snake(p) not in PRECISION_PARAMS]
    units = [p for p, s in props.items() if isinstance(s, dict) and schema_type(s) == "string"
             and ("unit" in nm.words(p) or nm.snake(p) in ("from", "to"))]
    if len(nums) != 1 or len(units) != 2:
        return None
    src = next((u for u in units if set(nm.words(u)) & _FROM_WORDS), None)
    dst = next((u for u in units if u != src and set(nm.words(u)) & _TO_WORDS), None)
    return (nums[0], src, dst) if src and dst else None
