"""The tokens tool definitions cost a turn, counted by the real model's tokenizer."""

from __future__ import annotations

import pytest

from app.chat import builtin_tools
from app.chat.tool_cost import ToolCostError, definitions_tokens, system_text


def _counter(engine):
    return lambda text: len(engine.decoder.tokenize(text, add_bos=False, special=False))


def _tool(name: str, description: str) -> dict:
    return {"type": "function", "function": {"name": name, "description": description,
                                             "parameters": {"type": "object", "properties": {
                                                 "timezone": {"type": "string", "description": "IANA name"}},
                                                 "required": ["timezone"]}}}


def test_no_tools_cost_nothing(engine):
    assert definitions_tokens(_counter(engine), []) == 0


def test_cost_grows_with_the_definitions_and_matches_the_rendered_text(engine):
    count = _counter(engine)
    one = [builtin_tools.DEFINITIONS[builtin_tools.NAMES[0]]]
    two = [*one, _tool("get_current_time", "Get the current time in a given timezone.")]
    a, b = definitions_tokens(count, one), definitions_tokens(count, two)
    assert 0 < a < b
    # the second tool's own JSON is in the difference: at least its name's and description's tokens
    assert b - a >= count("get_current_time Get the current time in a given timezone.")
    # the cost is the system text's growth, not the JSON's length guessed
    assert count(system_text(two)) - count(system_text([])) == b


def test_bad_definitions_are_one_line():
    with pytest.raises(ToolCostError) as e:
        definitions_tokens(len, [{"type": "function", "function": {"description": "no name"}}])
    assert "\n" not in str(e.value) and "tool" in str(e.value)
