"""The built-in tools and a conversation's tool set, without a model: what runs, what is refused."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest

from app.chat import builtin_tools
from app.chat.builtin_tools import CALCULATOR, CLOCK, calculate
from app.chat.tool_set import MAX_ROUNDS, ToolSet, ToolSetError, declared_tools, make_tool_set
from app.engine.message import ToolCall

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "today's weather",
                                            "parameters": {"type": "object", "required": ["city"],
                                                           "properties": {"city": {"type": "string"}}}}}


def calc(expr: str) -> str:
    return builtin_tools.run(ToolCall("c", CALCULATOR, json.dumps({"expression": expr})))


@pytest.mark.parametrize("expr, value", [
    ("17 * 23", 391), ("(1 + 2) ** 3 / 9", 3.0), ("7 // 2 + 7 % 2", 4), ("-2^10", -1024),
    ("sqrt(2) ** 2", pytest.approx(2.0)), ("round(pi, 3)", 3.142), ("abs(-4.5)", 4.5),
])
def test_the_calculator_evaluates_arithmetic(expr, value):
    assert calculate(expr) == value


@pytest.mark.parametrize("expr, why", [
    ("__import__('os').system('true')", "is not a number"),  # no names, no calls but the math ones
    ("(1).__class__", "is not a number"),
    ("9 ** 9 ** 9", "exponent above"),  # would take the machine's memory
    ("10 ** 400", "too large"),
    ("1 / 0", "division by zero"),
    ("log(0)", "cannot evaluate"),
    ("2 +", "not an arithmetic expression"),
    ("1" * 600, "longer than"),
    ("True + 1", "is not a number"),
    ("1e400", "the number 1e400 is beyond the calculator's range (±1e300)"),  # parsed as inf
    ("1e400-1e400", "the number 1e400 is beyond"),  # inf - inf: was nan
    ("-1e400 + 5", "the number 1e400 is beyond"),
    ("9" * 450, "the number 999999999999… (450 digits) is beyond"),  # an exact int past 1e300
    ("1e300 / 1e-10", "too large"),  # a float that overflows to inf is refused, not shown as inf
    ("1e300 * 10", "too large"),
    ("exp(1000)", "too large"),
])
def test_the_calculator_refuses_what_is_not_bounded_arithmetic(expr, why):
    out = calc(expr)
    assert out.startswith("error: ") and why in out, out
    assert "\n" not in out and "inf" not in out.lower().replace("infinite", "") and "nan" not in out.lower()


@pytest.mark.parametrize("expr, why", [
    ("(" + "9" * 490 + ")**10000", "the number 999999999999… (490 digits) is beyond"),
    ("(10**299)**10000", "too large (about 10^2990000"),  # within range, but the power is not
    ("(2**996)**9999", "too large (about 10^2997"),
    ("(10**299) ** 2 ** 13", "too large"),
    ("10**299 * 10**299", "too large (about 10^598"),
    ("0.5 ** -10000", "too large"),
])
def test_a_huge_power_or_product_is_refused_before_it_is_computed(expr, why):
    t0 = time.perf_counter()
    out = calc(expr)
    took = time.perf_counter() - t0
    assert out.startswith("error: ") and why in out, out
    assert took < 1, f"{took:.1f} s: the refusal computed the number first (the 490 nines took 5.6 s)"


def test_results_at_the_edge_of_the_range_are_still_computed():
    assert calculate("10**299 * 10") == 10**300 and calculate("(10**30)**10") == 10**300
    assert calculate("2**-10000") == 0.0 and calculate("1e300") == 1e300
    assert calc("round(5, -10**100)") == "0" and calc("round(2.5, 10**100)") == "2.5"  # no 10**(10**100)
    assert calc("1_000 * 2") == "2000"


def test_results_are_text_for_the_model_and_a_run_never_raises():
    assert calc("17 * 23") == "391" and calc("0.1 + 0.2").startswith("0.30000")
    assert builtin_tools.run(ToolCall("c", CALCULATOR, "not json")) == "error: the arguments are not JSON"
    assert builtin_tools.run(ToolCall("c", CALCULATOR, '{"expr": "1"}')).startswith("error: give the")
    assert builtin_tools.run(ToolCall("c", "rm", "{}")).startswith("error: 'rm' is not a built-in")


def test_the_clock_tells_the_time_in_a_zone():
    got = json.loads(builtin_tools.run(ToolCall("t", CLOCK, '{"timezone": "Asia/Tokyo"}')))
    assert got["timezone"] == "Asia/Tokyo" and got["utc_offset"] == "+0900"
    assert got["date"] >= datetime.now(UTC).date().isoformat()  # Tokyo is never behind UTC
    utc = json.loads(builtin_tools.run(ToolCall("t", CLOCK, "{}")))
    assert (utc["timezone"], utc["utc_offset"]) == ("UTC", "+0000")
    assert utc["weekday"] in [datetime(2026, 11, d).strftime("%A") for d in range(2, 9)]
    assert "not a time zone" in builtin_tools.run(ToolCall("t", CLOCK, '{"timezone": "Mars/Olympus"}'))


def test_a_tool_set_round_trips_and_checks_what_it_is_given():
    ts = make_tool_set([CALCULATOR], declared_tools(json.dumps([WEATHER])), "required")
    assert ToolSet.from_json(ts.to_json()) == ts and ts.label() == "calculator, get_weather (required)"
    bare = declared_tools('{"name": "get_weather", "parameters": {"type": "object"}}')  # a bare function
    assert bare[0]["function"]["name"] == "get_weather"
    assert ToolSet.from_json(None) == ToolSet() and not ToolSet().active and ToolSet().to_json() is None
    with pytest.raises(ToolSetError, match="not JSON: Expecting"):
        declared_tools("[{")
    with pytest.raises(ToolSetError, match=r"tools\[0\].function.name must be a name"):
        declared_tools('[{"type": "function", "function": {"name": ""}}]')
    with pytest.raises(ToolSetError, match="two tools are named 'calculator'"):
        make_tool_set([CALCULATOR], declared_tools('{"name": "calculator"}'))
    with pytest.raises(ToolSetError, match="tool choice 'nope' is none of"):
        make_tool_set([CALCULATOR], (), "nope")
    with pytest.raises(ToolSetError, match="unknown built-in tools"):
        ToolSet.from_json({"builtin": ["shell"]})


def test_the_first_reply_honours_the_choice_and_the_last_one_must_answer_in_text():
    ts = make_tool_set([CALCULATOR, CLOCK], (), CLOCK)
    first = ts.calls(0)
    assert first.choice == "required" and [t.name for t in first.tools] == [CLOCK]  # the named tool
    later = ts.calls(1)
    assert later.choice == "auto" and {t.name for t in later.tools} == {CALCULATOR, CLOCK}
    last = ts.calls(MAX_ROUNDS - 1)  # the loop ends in text, still held to the format it has seen
    assert last.choice == "answer" and "Call no more tools" in last.instructions()
    content, calls = last.read('{"response": "It is noon."}')
    assert (content, calls) == ("It is noon.", [])
    assert "tool_calls" not in last.constraint().source, "the grammar allows no call"
    assert make_tool_set([CALCULATOR], (), "none").calls(0) is None
