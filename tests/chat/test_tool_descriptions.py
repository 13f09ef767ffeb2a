"""No built-in tool's description holds a worked example: the bundled model copied the calculator's
"e.g. (17 * 23) / 4" into three calls and its answer, in place of the user's numbers."""

from __future__ import annotations

import re

import pytest

from app.chat import builtin_tools

ARITHMETIC = re.compile(r"\d\s*[-+*/%^]|[-+*/%^(]\s*\d")  # a digit beside an operator: a formula
EXAMPLE = re.compile(r"\be\.g\.|\bfor example\b|\bsuch as\b|\bfor instance\b", re.IGNORECASE)


def descriptions(definition: dict, where: str = ""):
    """Every description in a definition: the function's, each parameter's, nested ones too."""
    for key, value in definition.items():
        if key == "description" and isinstance(value, str):
            yield where or "function", value
        elif isinstance(value, dict):
            yield from descriptions(value, f"{where}.{key}" if where else key)


@pytest.mark.parametrize("name", builtin_tools.NAMES)
def test_no_description_carries_an_example_value(name):
    found = list(descriptions(builtin_tools.DEFINITIONS[name]["function"]))
    assert len(found) >= 2  # the tool's own and its parameter's
    for where, text in found:
        assert not ARITHMETIC.search(text), f"{name} {where}: {text!r}"
        assert not EXAMPLE.search(text), f"{name} {where}: {text!r}"


def test_the_check_would_have_caught_the_old_description():
    assert ARITHMETIC.search("e.g. (17 * 23) / 4") and EXAMPLE.search("e.g. Asia/Tokyo")
    assert not ARITHMETIC.search("+ - * / // % **, parentheses, and sqrt, log10")
