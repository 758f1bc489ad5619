"""Templates of the tools that hold no state: a scratchpad that changes nothing, a calculator that computes.

A scratchpad (``think``, kind ``scratchpad`` in :mod:`autoforge.domain.tool_kinds`) checks that
its arguments are text and returns at once, touching nothing. A calculator (kind ``calculator``)
evaluates the expression it is given with a small arithmetic parser (numbers, ``+ - * / % **``
(``^`` too), unary signs and parentheses; an operator-precedence parse, no ``eval`` and no names),
so ``calculate("(12 + 3) * 2")`` returns 30; a malformed expression, a division by zero or a
result out of range is an error observation. The result is rounded to 10 decimal places (so
``0.1 + 0.2`` is 0.3) and given as an integer when it is whole, under the documented output's one
field (``result`` when undocumented); a precision parameter, when documented, rounds it further.
"""

from __future__ import annotations

from autoforge.domain import words as nm
from autoforge.domain.operands import PRECISION_PARAMS
from autoforge.envs.code.base import Code
from autoforge.envs.code.compute import output_field
from autoforge.envs.code.context import Ctx

MAX_EXPRESSION_CHARS = 500


def t_scratchpad(x: Ctx) -> tuple[str, dict]:
    c = Code()
    for line in x.signature(x.spec.description):
        c(line)
    c.indent()
    for p in x.params:
        v, say = x.v(p), p
        c(f"if {v} is not None and not isinstance({v}, (str, list)):")
        c(f"    return {{'error': '{say} must be text'}}")
    c("return {'status': 'noted'}")
    out = {"type": "object", "properties": {"status": {"type": "string"}}, "required": ["status"]}
    return c.text(), out


# The parser of the calculator's code: tokens, then an operator-precedence (shunting-yard) pass
# straight into a value stack. ``u-``/``u+`` are the unary signs; ``**`` binds tighter than them
# (``-2 ** 2`` is -4) and to the right.
_CALC_BODY = '''\
if not isinstance({v}, str) or not {v}.strip():
    return {{'error': '{say} must be an arithmetic expression such as (2 + 3) * 4'}}
if len({v}) > {max_chars}:
    return {{'error': '{say} is longer than {max_chars} characters'}}
text = {v}.replace('^', '**').replace('\\u00d7', '*').replace('\\u00f7', '/')
digits = '0123456789'
tokens = []
i = 0
while i < len(text):
    ch = text[i]
    if ch in ' \\t\\n':
        i += 1
        continue
    if ch in digits or ch == '.':
        j = i
        while j < len(text) and (text[j] in digits or text[j] == '.'):
            j += 1
        if j < len(text) and text[j] in 'eE' and j + 1 < len(text) and (text[j + 1] in digits or (text[j + 1] in '+-' and j + 2 < len(text) and text[j + 2] in digits)):
            j += 2
            while j < len(text) and text[j] in digits:
                j += 1
        word = text[i:j]
        if word.count('.') > 1 or word == '.' or len(word) > 40:
            return {{'error': 'not a number: ' + word}}
        if float(word) in (float('inf'), float('-inf')):
            return {{'error': 'the number ' + word + ' is too large'}}
        tokens.append(float(word))
        i = j
        continue
    if text.startswith('**', i):
        tokens.append('**')
        i += 2
        continue
    if ch in '+-*/%()':
        tokens.append(ch)
        i += 1
        continue
    return {{'error': 'unexpected ' + repr(ch) + ' in the expression: only numbers, + - * / % ** and parentheses'}}
prec = {{'+': 1, '-': 1, '*': 2, '/': 2, '%': 2, 'u-': 3, 'u+': 3, '**': 4}}
values = []
ops = []
expect_value = True


def apply(op):
    if op in ('u-', 'u+'):
        if not values:
            return 'a sign without a number'
        values.append(-values.pop() if op == 'u-' else values.pop())
        return None
    if len(values) < 2:
        return 'the operator ' + op + ' is missing a number'
    b = values.pop()
    a = values.pop()
    if op in ('/', '%') and b == 0:
        return 'division by zero'
    if op == '**' and (abs(b) > 1024 or (a == 0 and b < 0)):
        return 'the exponent is out of range'
    if op == '**' and a < 0 and b != int(b):
        return 'a negative number has no real fractional power'
    try:
        out = {{'+': lambda: a + b, '-': lambda: a - b, '*': lambda: a * b, '/': lambda: a / b, '%': lambda: a % b,
               '**': lambda: a ** b}}[op]()
    except OverflowError:
        return 'the result is too large'
    if out != out or out in (float('inf'), float('-inf')):
        return 'the result is too large'
    values.append(float(out))
    return None


for tok in tokens:
    if isinstance(tok, float):
        if not expect_value:
            return {{'error': 'two numbers in a row: an operator is missing'}}
        values.append(tok)
        expect_value = False
    elif tok == '(':
        if not expect_value:
            return {{'error': 'an operator is missing before ('}}
        ops.append(tok)
        if len(ops) > 100:
            return {{'error': 'the expression nests too deeply'}}
    elif tok == ')':
        if expect_value:
            return {{'error': 'a number is missing before )'}}
        while ops and ops[-1] != '(':
            why = apply(ops.pop())
            if why:
                return {{'error': why}}
        if not ops:
            return {{'error': 'unbalanced parentheses'}}
        ops.pop()
    elif expect_value:
        if tok not in ('+', '-'):
            return {{'error': 'a number is missing before ' + tok}}
        ops.append('u' + tok)
    else:
        while ops and ops[-1] != '(' and (prec[ops[-1]] > prec[tok] or (prec[ops[-1]] == prec[tok] and tok != '**')):
            why = apply(ops.pop())
            if why:
                return {{'error': why}}
        ops.append(tok)
        expect_value = True
if expect_value:
    return {{'error': 'the expression ends without a number'}}
while ops:
    op = ops.pop()
    if op == '(':
        return {{'error': 'unbalanced parentheses'}}
    why = apply(op)
    if why:
        return {{'error': why}}
if len(values) != 1:
    return {{'error': 'not one arithmetic expression'}}
out = round(values[0], 10)
'''


def t_calculator(x: Ctx) -> tuple[str, dict]:
    c = Code()
    for line in x.signature(x.spec.description):
        c(line)
    c.indent()
    text = [p for p in x.params if x.params[p].get("type") in ("string", None)]
    precision = next((p for p in x.params if p not in text and nm.snake(p) in PRECISION_PARAMS), None)
    (expr,) = text[:1]
    body = _CALC_BODY.format(v=x.v(expr), say=expr, max_chars=MAX_EXPRESSION_CHARS)
    for line in body.rstrip("\n").split("\n"):
        c(line) if line else c.lines.append("")
    if precision:
        pv = x.v(precision)
        c(f"if {pv} is not None:")
        c(f"    if not isinstance({pv}, int) or isinstance({pv}, bool) or {pv} < 0 or {pv} > 10:")
        c(f"        return {{'error': '{precision} must be a whole number from 0 to 10'}}")
        c(f"    out = round(out, {pv})")
    field = output_field(x.spec)
    c("if out == int(out) and abs(out) < 1e15:")
    c("    out = int(out)")
    c(f"return {{{field!r}: out}}")
    out = x.spec.output_schema or {"type": "object", "properties": {field: {"type": "number"}}, "required": [field]}
    return c.text(), out
