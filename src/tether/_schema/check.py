"""Validate tool arguments against a JSON Schema written elsewhere (MCP, OpenAPI, a registry).

:meth:`tether.Tool.from_schema` builds a :class:`SchemaTool`: its arguments are
checked by a pydantic-core ``SchemaValidator`` compiled from the JSON Schema,
so a mistake reads exactly like one in a ``@tool`` tool (same messages, same
lax coercion: ``"5"`` is accepted for an integer and becomes ``5``), and the
function receives the validated values with the schema's defaults filled in.

The subset understood: ``type`` (one or a list), ``properties``, ``required``,
``additionalProperties`` (true, false or a schema), ``enum``, ``const``,
``items`` (a schema or, draft-4 style, a list), ``prefixItems``,
``minItems``/``maxItems``, ``uniqueItems``, ``minimum``/``maximum``,
``exclusiveMinimum``/``exclusiveMaximum`` (number or draft-4 boolean),
``multipleOf``, ``minLength``/``maxLength``, ``pattern``,
``minProperties``/``maxProperties``, ``anyOf``, ``oneOf`` (read as anyOf),
``allOf``, ``$ref`` to a place in the same document (``$defs``,
``definitions``, ``#``), ``default``, OpenAPI's ``nullable``, and boolean
schemas. Anything else (``format``, ``not``, ``if``/``then``, remote refs) is
not checked: the owner of the schema checks again. A schema without ``type``
is read by its keywords (``properties`` means an object, and so on).

>>> check = compile_schema({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
>>> check.validate_python({"n": "5"})
{'n': 5}
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic_core import PydanticCustomError, SchemaError, SchemaValidator
from pydantic_core import core_schema as cs

__all__ = ["compile_schema"]


MAX_DEPTH = 64  # deeper than this, a schema from elsewhere is not followed (accepted as is)
_OBJECT_WORDS = ("properties", "required", "additionalProperties", "minProperties", "maxProperties")
_ARRAY_WORDS = ("items", "prefixItems", "minItems", "maxItems", "uniqueItems")
_STRING_WORDS = ("minLength", "maxLength", "pattern")
_NUMBER_WORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")


def compile_schema(schema: Mapping[str, Any] | bool) -> SchemaValidator:
    """A validator for ``schema`` (lax, like pydantic's; see the module docstring)."""
    return _Compiler(schema).validator()


class _Compiler:
    """One pass over a JSON Schema document, collecting the ``$ref`` targets it uses."""

    def __init__(self, root: Mapping[str, Any] | bool) -> None:
        self.root = root
        self.refs: dict[str, cs.CoreSchema | None] = {}  # pointer -> compiled target (None while compiling)

    def validator(self) -> SchemaValidator:
        top = self.node(self.root, 0)
        while pending := [p for p, s in self.refs.items() if s is None]:
            for pointer in pending:
                target = dict(self.node(_resolve(self.root, pointer), 0))
                target["ref"] = pointer
                self.refs[pointer] = target
        if self.refs:
            top = cs.definitions_schema(top, [s for s in self.refs.values() if s is not None])
        return SchemaValidator(top)

    def node(self, node: Any, depth: int) -> cs.CoreSchema:
        if node is False:
            return _fails("no value is allowed here")
        if not isinstance(node, Mapping) or depth > MAX_DEPTH:  # True, {}, or too deep: anything goes
            return cs.any_schema()
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#"):
            self.refs.setdefault(ref, None)
            return cs.definition_reference_schema(ref)
        steps = [self.typed(node, depth)]
        for word in ("anyOf", "oneOf"):
            if isinstance(node.get(word), list) and node[word]:
                steps.append(self.union(node[word], word, depth))
        if isinstance(node.get("allOf"), list):
            steps.extend(self.node(part, depth + 1) for part in node["allOf"])
        if "enum" in node or "const" in node:
            steps.append(_one_of_values(node["enum"] if "enum" in node else [node["const"]]))
        steps = [s for s in steps if s["type"] != "any"] or [cs.any_schema()]
        schema = steps[0] if len(steps) == 1 else cs.chain_schema(steps)
        return cs.nullable_schema(schema) if node.get("nullable") is True else schema

    def union(self, options: list[Any], word: str, depth: int) -> cs.CoreSchema:
        choices = [(self.node(o, depth + 1), f"{word}[{i}]") for i, o in enumerate(options)]
        return choices[0][0] if len(choices) == 1 else cs.union_schema(list(choices))

    def typed(self, node: Mapping[str, Any], depth: int) -> cs.CoreSchema:
        kinds = node.get("type", _inferred_type(node))
        if isinstance(kinds, str):
            return self.of_type(kinds, node, depth)
        if not isinstance(kinds, list) or not kinds:
            return cs.any_schema()
        return cs.union_schema([(self.of_type(k, node, depth), str(k)) for k in kinds])

    def of_type(self, kind: Any, node: Mapping[str, Any], depth: int) -> cs.CoreSchema:
        builders: dict[str, Callable[[Mapping[str, Any], int], cs.CoreSchema]] = {
            "object": self.object,
            "array": self.array,
            "string": lambda n, _: _string(n),
            "integer": lambda n, _: _integer(n),
            "number": lambda n, _: _number(n),
            "boolean": lambda n, _: cs.bool_schema(),
            "null": lambda n, _: cs.none_schema(),
        }
        build = builders.get(kind) if isinstance(kind, str) else None
        return build(node, depth) if build else cs.any_schema()

    def object(self, node: Mapping[str, Any], depth: int) -> cs.CoreSchema:
        raw_props, raw_required = node.get("properties"), node.get("required")
        props: Mapping[str, Any] = raw_props if isinstance(raw_props, Mapping) else {}
        required: set[str] = set(raw_required) if isinstance(raw_required, list) else set()
        extra = node.get("additionalProperties", True)
        fields = {name: self.field(sub, name in required, depth) for name, sub in props.items()}
        for name in sorted(required - set(props)):
            fields[name] = cs.typed_dict_field(cs.any_schema(), required=True)
        if extra is False:
            schema: cs.CoreSchema = cs.typed_dict_schema(fields, extra_behavior="forbid")
        elif isinstance(extra, Mapping) and extra:
            schema = cs.typed_dict_schema(fields, extra_behavior="allow", extras_schema=self.node(extra, depth + 1))
        else:
            schema = cs.typed_dict_schema(fields, extra_behavior="allow")
        return _sized(schema, node, "minProperties", "maxProperties", "properties")

    def field(self, sub: Any, required: bool, depth: int) -> cs.TypedDictField:
        schema = self.node(sub, depth + 1)
        if not required and isinstance(sub, Mapping) and "default" in sub:
            default = json.loads(json.dumps(sub["default"]))  # a private copy: the caller may mutate it
            schema = cs.with_default_schema(schema, default_factory=lambda: json.loads(json.dumps(default)))
        return cs.typed_dict_field(schema, required=required)

    def array(self, node: Mapping[str, Any], depth: int) -> cs.CoreSchema:
        items, prefix = node.get("items"), node.get("prefixItems")
        if isinstance(items, list):  # draft 4: a schema per position
            prefix, items = items, node.get("additionalItems", True)
        least, most = _int(node.get("minItems")), _int(node.get("maxItems"))
        if isinstance(prefix, list) and prefix:
            # Every position is optional in JSON Schema: a missing one is filled with a marker, then dropped.
            positions: list[cs.CoreSchema] = [
                cs.with_default_schema(self.node(p, depth + 1), default=_ABSENT) for p in prefix
            ]
            if items is not False:
                positions.append(self.node(items if items is not None else True, depth + 1))
            variadic = None if items is False else len(prefix)
            whole = cs.tuple_schema(
                positions, variadic_item_index=variadic, max_length=None if variadic is not None else len(prefix)
            )
            schema: cs.CoreSchema = cs.no_info_after_validator_function(_present, whole)
            schema = _sized(schema, node, "minItems", "maxItems", "items")
        else:
            every = self.node(items if items is not None else True, depth + 1)
            schema = cs.list_schema(every, min_length=least, max_length=most)
        if node.get("uniqueItems") is True:
            schema = cs.no_info_after_validator_function(_unique, schema)
        return schema


def _inferred_type(node: Mapping[str, Any]) -> str | None:
    for kind, words in (
        ("object", _OBJECT_WORDS),
        ("array", _ARRAY_WORDS),
        ("string", _STRING_WORDS),
        ("number", _NUMBER_WORDS),
    ):
        if any(w in node for w in words):
            return kind
    return None


def _resolve(root: Any, pointer: str) -> Any:
    """The part of ``root`` a local ``$ref`` points at (``True``, accept anything, if none)."""
    node = root
    for raw in pointer.removeprefix("#").split("/")[1:]:
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return True
    return node


def _string(node: Mapping[str, Any]) -> cs.CoreSchema:
    least, most = _int(node.get("minLength")), _int(node.get("maxLength"))
    pattern = node.get("pattern")
    if not isinstance(pattern, str):
        return cs.str_schema(min_length=least, max_length=most)
    engines: tuple[Literal["rust-regex", "python-re"], ...] = ("rust-regex", "python-re")
    for engine in engines:  # the Rust engine is fast but knows no look-around
        schema = cs.str_schema(pattern=pattern, regex_engine=engine, min_length=least, max_length=most)
        try:
            SchemaValidator(schema)
        except SchemaError:
            continue
        return schema
    return cs.str_schema(
        min_length=least, max_length=most
    )  # a pattern neither engine reads is left to the schema's owner


def _integer(node: Mapping[str, Any]) -> cs.CoreSchema:
    whole = _bounds(node, int)
    if len(whole) == len(_bounds(node, float)):
        return cs.int_schema(**whole)
    return cs.chain_schema([cs.int_schema(), _number(node)])  # a bound like 0.5: compare as numbers


def _number(node: Mapping[str, Any]) -> cs.CoreSchema:
    """A float check that keeps integers as integers (JSON has one number type)."""

    def keep_int(value: Any, handler: cs.ValidatorFunctionWrapHandler) -> Any:
        checked = handler(value)
        return value if type(value) is int else checked

    return cs.no_info_wrap_validator_function(keep_int, cs.float_schema(**_bounds(node, float)))


def _bounds(node: Mapping[str, Any], kind: type) -> dict[str, Any]:
    def num(word: str) -> Any:
        value = node.get(word)
        if not isinstance(value, int | float) or isinstance(value, bool):
            return None
        return kind(value) if kind is float or float(value).is_integer() else None

    out = {"ge": num("minimum"), "le": num("maximum"), "multiple_of": num("multipleOf")}
    for word, strict, loose in (("exclusiveMinimum", "gt", "ge"), ("exclusiveMaximum", "lt", "le")):
        if node.get(word) is True:  # draft 4: the plain bound is exclusive
            out[strict], out[loose] = out[loose], None
        else:
            out[strict] = num(word)
    return {k: v for k, v in out.items() if v is not None}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _sized(schema: cs.CoreSchema, node: Mapping[str, Any], low: str, high: str, noun: str) -> cs.CoreSchema:
    least, most = _int(node.get(low)), _int(node.get(high))
    if least is None and most is None:
        return schema

    def check(value: Any) -> Any:
        if least is not None and len(value) < least:
            raise PydanticCustomError("too_short", "Input should have at least {n} " + noun, {"n": least})
        if most is not None and len(value) > most:
            raise PydanticCustomError("too_long", "Input should have at most {n} " + noun, {"n": most})
        return value

    return cs.no_info_after_validator_function(check, schema)


def _canonical(value: Any) -> str:
    """JSON text where equal JSON values are equal text (``1`` and ``1.0`` alike, ``true`` apart)."""

    def norm(v: Any) -> Any:
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, Mapping):
            return {str(k): norm(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [norm(x) for x in v]
        return v

    return json.dumps(norm(value), sort_keys=True, default=str)


_ABSENT = object()


def _present(value: tuple[Any, ...]) -> list[Any]:
    return [v for v in value if v is not _ABSENT]


def _unique(value: list[Any]) -> list[Any]:
    seen = [_canonical(v) for v in value]
    if len(set(seen)) != len(seen):
        raise PydanticCustomError("unique_items", "Input should have no repeated items")
    return value


def _one_of_values(values: Any) -> cs.CoreSchema:
    if not isinstance(values, list):
        return cs.any_schema()
    if values and all(v is None or isinstance(v, str | int | float) for v in values):
        return cs.literal_schema(values)  # like a Literal in @tool: the same coercions and message
    expected = [_canonical(v) for v in values]
    shown = " or ".join(expected) if len(expected) < 10 else ", ".join(expected[:10]) + ", ..."

    def check(value: Any) -> Any:
        if _canonical(value) not in expected:
            raise PydanticCustomError("enum", "Input should be {expected}", {"expected": shown})
        return value

    return cs.no_info_plain_validator_function(check)


def _fails(message: str) -> cs.CoreSchema:
    def check(value: Any) -> Any:
        raise PydanticCustomError("never", message)

    return cs.no_info_plain_validator_function(check)
