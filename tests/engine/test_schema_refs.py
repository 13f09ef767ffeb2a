"""Which `$ref` recursions leave a schema no finite value: the refusal must name the loop, and a
recursive schema people really use (a tree, a linked list, a nullable parent) must pass."""

from __future__ import annotations

import pytest

from app.engine.grammar import Constraint, GrammarError, compile_grammar
from app.engine.schema_refs import endless_ref

NODE = {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}


@pytest.mark.parametrize("schema, loop", [
    ({"$ref": "#"}, "#"),
    ({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, "#/$defs/a"),
    ({"type": "object", "properties": {"c": {"$ref": "#"}}, "required": ["c"]}, "#"),
    ({"type": "array", "minItems": 1, "items": {"$ref": "#"}}, "#"),
    ({"allOf": [{"type": "string"}, {"$ref": "#"}]}, "#"),
    ({"anyOf": [{"$ref": "#/$defs/x"}], "$defs": {"x": {"$ref": "#"}}}, "#/$defs/x"),
    ({"definitions": {"a~b": {"type": "object", "required": ["s"],
                              "properties": {"s": {"$ref": "#/definitions/a~0b"}}}},
      "$ref": "#/definitions/a~0b"}, "#/definitions/a~0b"),
])
def test_an_endless_recursion_is_named_and_refused(schema, loop):
    assert endless_ref(schema) == loop
    with pytest.raises(GrammarError) as e:
        compile_grammar(Constraint.json_schema(schema))
    assert f"$ref {loop!r} recurses without end" in str(e.value)


@pytest.mark.parametrize("schema", [
    {"$defs": {"node": NODE}, "$ref": "#/$defs/node"},  # a linked list: `next` may be left out
    {"type": "object", "required": ["kids"],
     "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}},
    {"anyOf": [{"type": "string"}, {"type": "array", "minItems": 1, "items": {"$ref": "#"}}]},
    {"type": ["object", "null"], "required": ["up"], "properties": {"up": {"$ref": "#"}}},
    {"type": "object", "required": ["c"], "properties": {"c": {"$ref": "#/$defs/missing"}}},  # the compiler's
    {"$ref": "#anchor"},
])
def test_recursion_with_a_way_out_passes(schema):
    assert endless_ref(schema) is None
