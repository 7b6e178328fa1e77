"""A function's parameters as a pydantic model, and that model as the JSON Schema a model is shown.

``@tool`` builds its validator and its schema here: each named parameter is a
field with its type hint, its default and its description from the docstring.
One kind of parameter may be set aside for the loop to fill in (the
``Invocation``): it is not a field, so the schema never shows it. Pydantic's
generated titles are left out of the schema; they only repeat the names.

>>> def add(a: int, b: int = 0) -> int: ...
>>> model, aside = signature_model(add, {"a": "the first number."}, lambda hint: False)
>>> schema_of(model)["properties"]["a"], aside
({'description': 'the first number.', 'type': 'integer'}, None)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, get_type_hints

if TYPE_CHECKING:
    import pydantic

__all__ = ["schema_of", "signature_model", "strip_titles"]


def signature_model(
    f: Callable[..., Any], param_docs: Mapping[str, str], set_aside: Callable[[Any], bool]
) -> tuple[type[pydantic.BaseModel], tuple[str, Any] | None]:
    """A model of ``f``'s named parameters, and the parameter whose hint ``set_aside`` picks (name, hint)."""
    import pydantic

    from ..exceptions import UserError

    hints = get_type_hints(f, include_extras=True)  # Annotated[int, Field(le=500)] keeps its constraints
    fields: dict[str, Any] = {}
    aside = None
    for p in inspect.signature(f).parameters.values():
        hint = hints.get(p.name, Any)
        if set_aside(hint):
            aside = (p.name, hint)
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            raise UserError(f"tool {f.__name__!r}: parameter {p.name!r} must be a named parameter")
        default = ... if p.default is p.empty else p.default
        fields[p.name] = (hint, pydantic.Field(default, description=param_docs.get(p.name)))
    config = pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=False)
    model = pydantic.create_model(f"{f.__name__}_args", __config__=config, **fields)
    return model, aside


def schema_of(model: type[pydantic.BaseModel]) -> dict[str, Any]:
    """The JSON Schema of a pydantic model, without pydantic's generated titles."""
    schema = model.model_json_schema()
    strip_titles(schema)
    schema.setdefault("properties", {})
    schema["additionalProperties"] = False
    return schema


def strip_titles(node: Any) -> None:
    """Remove pydantic's generated ``title`` keys from a JSON Schema, in place (a property named
    ``title`` stays)."""
    if isinstance(node, dict):
        if isinstance(node.get("title"), str):
            del node["title"]
        for key, value in node.items():
            if key in ("properties", "$defs"):
                for sub in value.values():
                    strip_titles(sub)
            else:
                strip_titles(value)
    elif isinstance(node, list):
        for item in node:
            strip_titles(item)
