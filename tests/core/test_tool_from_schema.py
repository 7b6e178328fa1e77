"""Tool.from_schema: tools whose JSON Schema comes from elsewhere, validated like @tool tools."""

from __future__ import annotations

import json
from typing import Any, Literal

import jsonschema  # tether[test]: the full implementation the checker is compared with
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from inline_snapshot import snapshot

from tether import Action, Agent, Invocation, Tool, UserError, tool
from tether.testing import ScriptedModel
from tether.tools import ArgumentsInvalid


def schema_tool(schema: dict[str, Any], fn: Any = None) -> Tool:
    return Tool.from_schema("t", "a tool", schema, fn or (lambda **kw: kw), effect="none")


def obj(props: dict[str, Any], required: tuple[str, ...] = (), **more: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(required), **more}


def error(t: Tool, args: dict[str, Any]) -> str:
    with pytest.raises(ArgumentsInvalid) as info:
        t.validate(args)
    return str(info.value)


@tool(effect="none")
def book(room: str, nights: int, kind: Literal["single", "double"] = "single", price: float = 0.0) -> str:
    """Book a room."""
    return room


TWIN = Tool.from_schema(book.name, book.description, book.parameters, book.fn, effect="none")


@pytest.mark.parametrize(
    "args",
    [
        {"room": "12", "nights": "3"},
        {"room": "12", "nights": 3.0, "kind": "double", "price": 5},
        {"room": "12", "nights": True},
    ],
)
def test_valid_arguments_come_out_as_the_decorator_makes_them(args: dict[str, Any]) -> None:
    assert TWIN.validate(args) == book.validate(args)


@pytest.mark.parametrize(
    "args",
    [
        {"room": 12, "nights": "three"},
        {"nights": 1},
        {"room": "1", "nights": 1, "kind": "suite"},
        {"room": "1", "nights": 1, "extra": True},
        {"room": "1", "nights": 1.5, "price": "free"},
    ],
)
def test_a_mistake_reads_exactly_like_one_in_a_decorated_tool(args: dict[str, Any]) -> None:
    assert error(TWIN, args) == error(book, args)


def test_the_note_names_the_field_the_expectation_and_the_schema_fragment() -> None:
    t = schema_tool(obj({"n": {"type": "integer", "minimum": 1}}, ("n",), additionalProperties=False))
    assert error(t, {"n": 0, "m": 1}) == snapshot(
        """\
invalid arguments for tool 't':
- field 'n': Input should be greater than or equal to 1 (got 0)
  expected: {"minimum": 1, "type": "integer"}
- field 'm': Extra inputs are not permitted (got 1)
  allowed fields here: 'n'\
"""
    )


def test_defaults_are_filled_and_extra_fields_pass_when_the_schema_allows_them() -> None:
    t = schema_tool(obj({"n": {"type": "integer", "default": 7}, "tags": {"type": "array", "default": []}}))
    out = t.validate({"x": "kept"})
    assert out == {"n": 7, "tags": [], "x": "kept"}
    out["tags"].append("mutated")
    assert t.validate({})["tags"] == []  # each call gets its own copy of a default


def test_numbers_keep_integers_and_integers_take_safe_coercions() -> None:
    t = schema_tool(obj({"x": {"type": "number"}, "n": {"type": "integer", "minimum": 0.5}}))
    assert t.validate({"x": 3, "n": "2"}) == {"x": 3, "n": 2}
    assert type(t.validate({"x": 3})["x"]) is int
    assert t.validate({"x": "2.5"}) == {"x": 2.5}
    assert "greater than or equal to 0.5" in error(t, {"n": 0})


@pytest.mark.parametrize(
    ("schema", "good", "bad", "says"),
    [
        ({"enum": ["a", 1, None, [1]]}, [1], "b", 'Input should be "a" or 1 or null or [1]'),
        ({"const": 1}, 1.0, 2, "Input should be 1"),
        ({"type": "string", "minLength": 2, "maxLength": 3}, "abc", "a", "at least 2 characters"),
        ({"type": "string", "pattern": "^[a-z]+$"}, "abc", "ABC", "should match pattern"),
        ({"type": "string", "pattern": "^(?!x)\\w+$"}, "abc", "xyz", "should match pattern"),  # look-ahead: python re
        ({"type": "array", "items": {"type": "integer"}, "maxItems": 2}, [1, "2"], [1, 2, 3], "at most 2 items"),
        ({"type": "array", "uniqueItems": True}, [1, "1"], [1, 1.0], "no repeated items"),
        ({"type": "array", "prefixItems": [{"type": "integer"}], "items": False}, [1], [1, 2], "at most 1 item"),
        ({"type": "array", "items": [{"type": "string"}]}, ["a", 5], [5], "valid string"),  # draft 4 tuples
        ({"type": "integer", "exclusiveMinimum": 0}, 1, 0, "greater than 0"),
        ({"type": "integer", "minimum": 0, "exclusiveMinimum": True}, 1, 0, "greater than 0"),  # draft 4
        ({"type": "number", "multipleOf": 0.5}, 1.5, 1.2, "multiple of 0.5"),
        ({"type": ["string", "null"]}, None, 3, "valid string"),
        ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, "x", [], "anyOf[1]"),
        ({"oneOf": [{"type": "boolean"}, {"type": "null"}]}, None, "maybe", "oneOf[0]"),
        ({"allOf": [{"minLength": 2}, {"maxLength": 3}]}, "ab", "abcd", "at most 3 characters"),
        ({"type": "object", "minProperties": 1}, {"a": 1}, {}, "at least 1 properties"),
        ({"type": "object", "additionalProperties": {"type": "integer"}}, {"a": "1"}, {"a": "x"}, "valid integer"),
        ({"type": "string", "nullable": True}, None, 1, "valid string"),
        ({"properties": {"a": {"type": "integer"}}}, {"a": 1}, {"a": "x"}, "valid integer"),  # no type: an object
        ({"type": "array", "items": False}, [], [1], "no value is allowed here"),
    ],
)
def test_the_keywords_of_the_subset(schema: Any, good: Any, bad: Any, says: str) -> None:
    t = schema_tool(obj({"v": schema}, ("v",)))
    t.validate({"v": good})
    assert says in error(t, {"v": bad})


def test_references_resolve_within_the_document_and_may_recurse() -> None:
    node = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}
    t = schema_tool(
        obj({"tree": {"$ref": "#/$defs/Node"}, "self": {"$ref": "#"}}, ("tree",), **{"$defs": {"Node": node}})
    )
    assert t.validate({"tree": {"kids": [{"kids": []}]}, "self": {"tree": {}}}) == {
        "tree": {"kids": [{"kids": []}]},
        "self": {"tree": {}},
    }
    assert "field 'tree.kids.0.kids'" in error(t, {"tree": {"kids": [{"kids": 5}]}})


def test_keywords_outside_the_subset_are_left_to_the_schemas_owner() -> None:
    t = schema_tool(obj({"when": {"type": "string", "format": "date-time"}, "x": {"not": {"type": "string"}}}))
    assert t.validate({"when": "yesterday", "x": "s"}) == {"when": "yesterday", "x": "s"}
    assert schema_tool(obj({"r": {"$ref": "https://example.com/schema"}})).validate({"r": 1}) == {"r": 1}


def test_the_function_gets_validated_keywords_and_the_invocation_it_asks_for() -> None:
    seen: list[Any] = []

    def fn(call: Invocation, **arguments: Any) -> str:
        seen.append((call.idempotency_key, arguments))
        return "ok"

    t = Tool.from_schema(
        "store", "Store.", obj({"user-id": {"type": "integer"}}, ("user-id",)), fn, effect="idempotent"
    )
    agent = Agent(ScriptedModel([Action("store", {"user-id": "42"}), "done"]), [t])
    result = agent.run_sync("go", run_id="r1")
    call_id = result.context[1].tool_calls[0].id
    assert result.output == "done"
    assert seen == [(f"r1:{call_id}", {"user-id": 42})]


def test_invalid_arguments_become_a_note_and_the_function_never_runs() -> None:
    ran: list[Any] = []
    t = Tool.from_schema("n", "N.", obj({"n": {"type": "integer"}}, ("n",)), lambda n: ran.append(n), effect="none")
    result = Agent(ScriptedModel([Action("n", {"n": "x"}), "gave up"]), [t]).run_sync("go")
    note = next(m for m in result.context if m.role == "tool")
    assert note.is_error and "field 'n': Input should be a valid integer" in note.content
    assert ran == []


def test_the_schema_is_part_of_the_fingerprint() -> None:
    one = Tool.from_schema("t", "d", obj({"a": {"type": "string"}}), lambda **kw: kw)
    two = Tool.from_schema("t", "d", obj({"a": {"type": "integer"}}), lambda **kw: kw)
    assert one.fingerprint() != two.fingerprint()
    assert one.definition()["parameters"] == obj({"a": {"type": "string"}})


@pytest.mark.parametrize(
    ("parameters", "fn", "says"),
    [
        ({"type": "array"}, lambda: None, "must be a JSON Schema of type 'object'"),
        (obj({"call": {}}), lambda call, **kw: None, ""),  # an un-annotated 'call' is just a property
    ],
)
def test_schemas_that_cannot_be_tool_parameters_are_refused(parameters: Any, fn: Any, says: str) -> None:
    if not says:
        Tool.from_schema("t", "d", parameters, fn)
        return
    with pytest.raises(UserError, match=says):
        Tool.from_schema("t", "d", parameters, fn)


def test_an_invocation_parameter_may_not_shadow_a_property() -> None:
    def fn(call: Invocation, **kw: Any) -> None: ...

    with pytest.raises(UserError, match="'call' is both the Invocation and a schema property"):
        Tool.from_schema("t", "d", obj({"call": {"type": "string"}}), fn)


# -- agreement with a full JSON Schema implementation -------------------------------------

SCHEMAS: list[dict[str, Any]] = [
    {"type": "integer", "minimum": -3, "maximum": 5},
    {"type": "number", "exclusiveMaximum": 2.5},
    {"type": "string", "minLength": 1, "pattern": "^[ab]+$"},
    {"type": ["string", "null", "boolean"]},
    {"enum": [1, "a", None, [1, 2], {"k": 1}]},
    {"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "maxItems": 3},
    {"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}], "items": {"type": "null"}},
    {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"anyOf": [{"type": "string"}, {"type": "array"}]}},
        "required": ["a"],
        "additionalProperties": False,
    },
    {"type": "object", "additionalProperties": {"type": "boolean"}, "maxProperties": 2},
    {"allOf": [{"type": "object", "required": ["k"]}, {"properties": {"k": {"const": "v"}}}]},
    {"$ref": "#/$defs/list", "$defs": {"list": {"type": ["array", "null"], "items": {"$ref": "#/$defs/list"}}}},
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-6, 6) | st.floats(-6, 6, allow_nan=False) | st.text("ab1 ", max_size=3),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from("abk"), inner, max_size=3),
    max_leaves=8,
)


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: json.dumps(s)[:40])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=json_values)
def test_it_agrees_with_the_jsonschema_package(schema: dict[str, Any], value: Any) -> None:
    defs = {k: v for k, v in schema.items() if k == "$defs"}  # refs point at the root document
    root = obj({"v": {k: v for k, v in schema.items() if k != "$defs"}}, ("v",), **defs)
    checker = jsonschema.Draft202012Validator(root)
    t = schema_tool(root)
    valid = checker.is_valid({"v": value})
    try:
        out = t.validate({"v": value})
    except ArgumentsInvalid:
        assert not valid, f"{value!r} is valid JSON for {schema} but was refused"
        return
    assert checker.is_valid(out), f"{value!r} became {out!r}, which the schema does not allow"
    if valid:
        assert out == {"v": value}
