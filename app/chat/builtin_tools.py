"""LlamaDesk's own tools, run on this machine when a model calls them: a calculator and a clock.

Two, because they answer what a small model gets wrong by itself (arithmetic,
today's date) and neither can harm anything: the calculator reads the
expression with `ast` and evaluates only numbers, the four operations, powers
and a few math functions (no names, attributes or calls beyond those, never
eval). Every number stays within ±1e300: a literal past it is refused as
written, and a product or a power is refused from its operands' sizes before
it is computed, because Python's exact integers would otherwise spend seconds
(or the machine's memory) on "9**9**9" only to refuse the result afterwards;
an infinite or NaN result is refused too, never given to the model as a
number. What a tool cannot do is its result ("error: ..."), which the model
reads and can answer from, as OpenAI's tools report failures; a run never
raises.
"""

from __future__ import annotations

import ast
import json
import math
import operator
from collections.abc import Callable
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from app.engine.message import ToolCall

CALCULATOR, CLOCK = "calculator", "current_time"
MAX_EXPRESSION = 500  # characters
MAX_POWER = 10_000  # the largest exponent of an integer power
MAX_MAGNITUDE = 1e300  # past this a number is refused, typed or computed
_RANGE = "1e300"  # MAX_MAGNITUDE as the refusals say it
_MAX_LOG10 = math.log10(MAX_MAGNITUDE)
MAX_ROUND_DIGITS = 400  # round()'s digits past this change nothing within MAX_MAGNITUDE

DEFINITIONS: dict[str, dict] = {
    CALCULATOR: {"type": "function", "function": {
        "name": CALCULATOR,
        "description": "Evaluate an arithmetic expression exactly: + - * / // % **, parentheses, and "
                       "sqrt, sin, cos, tan, log, log10, exp, abs, round, floor, ceil, pi, e.",
        "parameters": {"type": "object", "additionalProperties": False, "required": ["expression"],
                       "properties": {"expression": {
                           "type": "string",
                           "description": "The expression to evaluate, in the user's own numbers"}}},
    }},
    CLOCK: {"type": "function", "function": {
        "name": CLOCK,
        "description": "The current date, time and weekday, in a time zone (an IANA time zone "
                       "name, Area/City; UTC when none is given).",
        "parameters": {"type": "object", "additionalProperties": False,
                       "properties": {"timezone": {
                           "type": "string",
                           "description": "The IANA name of the time zone the user asked about"}}},
    }},
}
NAMES = tuple(DEFINITIONS)

_BINARY: dict[type, Callable] = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
                                 ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv,
                                 ast.Mod: operator.mod, ast.Pow: operator.pow}
_UNARY: dict[type, Callable] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS: dict[str, Callable] = {"sqrt": math.sqrt, "sin": math.sin, "cos": math.cos, "tan": math.tan,
                                   "log": math.log, "log10": math.log10, "exp": math.exp, "abs": abs,
                                   "round": round, "floor": math.floor, "ceil": math.ceil}
_CONSTANTS = {"pi": math.pi, "e": math.e}


class _Refused(ValueError):
    pass


def calculate(expression: str) -> int | float:
    """The value of `expression`; _Refused (a ValueError) saying what cannot be evaluated."""
    text = expression.strip().replace("^", "**").replace("\u00d7", "*").replace("\u00f7", "/")
    if not text:
        raise _Refused("the expression is empty")
    if len(text) > MAX_EXPRESSION:
        raise _Refused(f"the expression is longer than {MAX_EXPRESSION} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, RecursionError, MemoryError):
        raise _Refused(f"{expression!r} is not an arithmetic expression") from None
    try:
        return _Evaluator(text).value(tree.body)
    except ZeroDivisionError:
        raise _Refused("division by zero") from None
    except OverflowError:
        raise _Refused(f"the result is too large (the calculator stops at {_RANGE})") from None
    except RecursionError:
        raise _Refused("the expression is nested too deeply") from None
    except (TypeError, ValueError) as e:
        if isinstance(e, _Refused):
            raise
        raise _Refused(f"cannot evaluate it ({e})") from None


class _Evaluator:
    """Walks the parsed expression; `text` is kept to quote a refused literal as it was typed
    (a float literal past the range has already become inf when parsed)."""

    def __init__(self, text: str):
        self.text = text

    def value(self, node: ast.AST) -> int | float:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) \
                and not isinstance(node.value, bool):
            return self._literal(node, node.value)
        if isinstance(node, ast.Name) and node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](self.value(node.operand))
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = self.value(node.left), self.value(node.right)
            if isinstance(node.op, ast.Pow):
                _check_power(left, right)
            elif isinstance(node.op, ast.Mult):
                _check_size(_log10(left) + _log10(right))
            return _bounded(_BINARY[type(node.op)](left, right))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS
                and not node.keywords and 1 <= len(node.args) <= 2):
            args = [self.value(a) for a in node.args]
            if node.func.id == "round" and len(args) == 2 and isinstance(args[1], int):
                # round(5, -10**100) would build 10**(10**100) first; past the range it changes nothing
                args[1] = max(-MAX_ROUND_DIGITS, min(MAX_ROUND_DIGITS, args[1]))
            return _bounded(_FUNCTIONS[node.func.id](*args))
        what = ast.unparse(node) if hasattr(ast, "unparse") else type(node).__name__
        raise _Refused(f"{what!r} is not a number, an operation or one of the functions "
                       f"({', '.join(_FUNCTIONS)})")

    def _literal(self, node: ast.Constant, v: int | float) -> int | float:
        if abs(v) <= MAX_MAGNITUDE:  # False for inf and NaN; exact for an int of any length
            return v
        typed = (ast.get_source_segment(self.text, node) or repr(v)).replace("_", "")
        if len(typed) > 24:
            typed = f"{typed[:12]}… ({len(typed)} {'digits' if typed.isdigit() else 'characters'})"
        raise _Refused(f"the number {typed} is beyond the calculator's range (±{_RANGE})")


def _log10(v: int | float) -> float:
    """log10 of |v|, without computing anything as large as v's powers (-inf for 0)."""
    return math.log10(abs(v)) if v else -math.inf


def _check_size(log10: float) -> None:
    """Refuses a result whose estimated size is past the range; the slack of 1 lets a result
    at the edge be computed and held to the exact bound afterwards."""
    if log10 > _MAX_LOG10 + 1:
        raise _Refused(f"the result is too large (about 10^{int(log10)}; the calculator stops at "
                       f"{_RANGE})")


def _check_power(base: int | float, exponent: int | float) -> None:
    if abs(exponent) > MAX_POWER:
        raise _Refused(f"an exponent above {MAX_POWER} is not evaluated")
    if base:
        _check_size(exponent * _log10(base))


def _bounded(v):
    if isinstance(v, complex):
        raise _Refused("the result is not a real number")
    if isinstance(v, float) and math.isnan(v):
        raise _Refused("the result is not a number (NaN)")
    if abs(v) > MAX_MAGNITUDE:  # inf included
        raise _Refused(f"the result is too large (the calculator stops at {_RANGE})")
    return v


def _shown(v: int | float) -> str:
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e16:
        return str(int(v))
    return repr(v) if isinstance(v, float) else str(v)


def _calculator(args: dict) -> str:
    expr = args.get("expression")
    if not isinstance(expr, str):
        return 'error: give the expression as text, e.g. {"expression": "2 + 2"}'
    try:
        return _shown(calculate(expr))
    except ValueError as e:
        return f"error: {e}"


def _clock(args: dict, now: datetime | None = None) -> str:
    name = args.get("timezone") or "UTC"
    if not isinstance(name, str):
        return "error: the time zone must be a name such as Europe/Paris"
    try:
        zone = UTC if name.upper() == "UTC" else ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return f"error: {name!r} is not a time zone this machine knows (try an IANA name like Europe/Paris)"
    t = (now or datetime.now(UTC)).astimezone(zone)
    return json.dumps({"date": t.date().isoformat(), "time": t.strftime("%H:%M:%S"),
                       "weekday": t.strftime("%A"), "timezone": name, "utc_offset": t.strftime("%z")})


def run(call: ToolCall) -> str:
    """The result of a built-in tool's call, as text for the model; never raises."""
    try:
        args = json.loads(call.arguments or "{}")
    except (ValueError, RecursionError):
        return "error: the arguments are not JSON"
    if not isinstance(args, dict):
        return "error: the arguments must be a JSON object"
    if call.name == CALCULATOR:
        return _calculator(args)
    if call.name == CLOCK:
        return _clock(args)
    return f"error: {call.name!r} is not a built-in tool"
