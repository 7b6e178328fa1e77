"""Validation notes a small model can act on.

When the model's arguments (or its final output) fail validation, the note it
reads names each bad field by its path (``tickets.1.priority``), says what was
wrong and what it sent, and shows that field's JSON Schema *resolved*: a
``$ref`` to ``#/$defs/Ticket`` is replaced by the schema it points at, because
a small model cannot follow a pointer into a part of the schema it never sees.
When every mistake has a mechanical fix (a wrong-case choice, a near-miss field
name, a single object where a list belongs, an object sent as a JSON string, a
number where text belongs) the note ends with the corrected arguments, checked
to validate, so the model can copy them.

>>> schema = {"type": "object", "properties": {"size": {"enum": ["S", "M", "L"]}}, "required": ["size"]}
>>> errors = [{"loc": ("size",), "msg": "Input should be 'S', 'M' or 'L'", "type": "enum", "input": "m"}]
>>> print(explain("invalid arguments for tool 'order':", schema, errors, {"size": "m"}, lambda a: a))
invalid arguments for tool 'order':
- field 'size': Input should be 'S', 'M' or 'L' (got "m")
  expected: {"enum": ["S", "M", "L"]}
corrected (only the mechanical fixes applied; check it says what you mean): {"size": "M"}
"""

from __future__ import annotations

import copy
import difflib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["corrected", "explain", "fragment", "inline", "resolve"]

MAX_FRAGMENT = 1500  # characters of schema shown per field
_CHOICE_ERRORS = frozenset(("enum", "literal_error"))
_OBJECT_ERRORS = frozenset(("model_type", "dict_type", "model_attributes_type", "dataclass_type", "typed_dict_type"))


def explain(
    header: str,
    schema: Mapping[str, Any],
    errors: Sequence[Mapping[str, Any]],
    args: Any,
    check: Callable[[Any], Any] | None = None,
) -> str:
    """The note for ``errors`` (pydantic's ``exc.errors()``) of ``args`` against ``schema``.

    ``check`` validates a corrected copy (raising on failure); without it no
    correction is offered.
    """
    lines = [header]
    for err in errors:
        loc = tuple(err.get("loc") or ())
        where = ".".join(str(p) for p in loc) or "(arguments)"
        got = "" if err.get("type") == "missing" else f" (got {json.dumps(err.get('input'), default=str)[:200]})"
        lines.append(f"- field {where!r}: {err.get('msg', 'invalid')}{got}")
        if err.get("type") == "extra_forbidden":
            parent = resolve(schema, fragment(schema, loc[:-1]))
            names = ", ".join(repr(n) for n in (parent.get("properties") or {})) or "(none)"
            lines.append(f"  allowed fields here: {names}")
        elif loc and (part := fragment(schema, loc)) is not None:
            lines.append(f"  expected: {_shown(inline(schema, part))}")
    if check is not None and (fixed := corrected(schema, errors, args, check)) is not None:
        lines.append(
            "corrected (only the mechanical fixes applied; check it says what you mean): "
            + json.dumps(fixed, ensure_ascii=False)
        )
    return "\n".join(lines)


def resolve(root: Mapping[str, Any], node: Any, depth: int = 0) -> dict[str, Any]:
    """``node`` with a top-level ``$ref`` (or a lone ``allOf`` wrapper) replaced by what it points at."""
    while isinstance(node, Mapping) and depth < 20:
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            target = (root.get("$defs") or {}).get(ref[len("#/$defs/") :])
            if not isinstance(target, Mapping):
                break
            rest = {k: v for k, v in node.items() if k != "$ref"}
            node = {**target, **rest}
        elif isinstance(node.get("allOf"), list) and len(node["allOf"]) == 1 and len(node) == 1:
            node = node["allOf"][0]
        else:
            break
        depth += 1
    return dict(node) if isinstance(node, Mapping) else {}


def fragment(root: Mapping[str, Any], loc: Sequence[Any]) -> dict[str, Any] | None:
    """The schema of the value at ``loc`` (a pydantic error location), or None when it cannot be found.

    Union members in a location (pydantic names them, e.g. ``Cat`` or ``int``)
    pick the member they name, or are skipped when nothing matches.
    """
    node: dict[str, Any] = resolve(root, root)
    parts = list(loc)
    while parts:
        part = parts[0]
        options = node.get("anyOf") or node.get("oneOf")
        props = node.get("properties") or {}
        if isinstance(part, str) and part in props:
            node = resolve(root, props[part])
        elif isinstance(part, int) and isinstance(node.get("prefixItems"), list) and part < len(node["prefixItems"]):
            node = resolve(root, node["prefixItems"][part])
        elif isinstance(part, int) and isinstance(node.get("items"), Mapping):
            node = resolve(root, node["items"])
        elif isinstance(options, list):
            member = _member(root, options, part)
            if member is None:
                return None
            if member.get("anyOf") is not None and not _named(options, part) and not _INDEXED.fullmatch(str(part)):
                return member  # a member's tag such as 'int' or 'anyOf[1]': the whole union is what fits
            node = member
            if _named(options, part) or (isinstance(part, str) and _INDEXED.fullmatch(part)):
                parts.pop(0)  # the location named the member: it is not a key of the value
            continue
        elif isinstance(node.get("additionalProperties"), Mapping) and isinstance(part, str):
            node = resolve(root, node["additionalProperties"])
        elif isinstance(part, str) and not props:
            pass  # a tag pydantic adds (a validator's name): not part of the value
        else:
            return None
        parts.pop(0)
    return node


_INDEXED = re.compile(r"(?:anyOf|oneOf)\[(\d+)\]")


def _named(options: list[Any], part: Any) -> bool:
    return isinstance(part, str) and any(isinstance(o, Mapping) and o.get("$ref") == f"#/$defs/{part}" for o in options)


def _member(root: Mapping[str, Any], options: list[Any], part: Any) -> dict[str, Any] | None:
    if isinstance(part, str) and (m := _INDEXED.fullmatch(part)) and int(m.group(1)) < len(options):
        return resolve(root, options[int(m.group(1))])  # the JSON-Schema checker names members by index
    if _named(options, part):
        return resolve(root, {"$ref": f"#/$defs/{part}"})
    for option in options:  # the member that has this key or index
        member = resolve(root, option)
        if (isinstance(part, str) and part in (member.get("properties") or {})) or (
            isinstance(part, int) and "items" in member
        ):
            return member
    if isinstance(part, str):  # a member's tag such as 'int' or 'list[int]': show the whole union
        return {"anyOf": [resolve(root, o) for o in options]}
    return None


def inline(root: Mapping[str, Any], node: Any, depth: int = 0, seen: tuple[str, ...] = ()) -> Any:
    """``node`` with every ``$ref`` into ``root``'s ``$defs`` written out (a recursive one is kept as a ref)."""
    if isinstance(node, list):
        return [inline(root, v, depth, seen) for v in node]
    if not isinstance(node, Mapping):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and ref not in seen and depth < 6:
        return inline(root, resolve(root, node), depth + 1, (*seen, ref))
    return {k: inline(root, v, depth, seen) for k, v in node.items() if k != "$defs"}


def _shown(node: Any) -> str:
    text = json.dumps(node, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= MAX_FRAGMENT else text[:MAX_FRAGMENT] + " ...(cut)"


# -- the corrected example ---------------------------------------------------


def corrected(
    schema: Mapping[str, Any], errors: Sequence[Mapping[str, Any]], args: Any, check: Callable[[Any], Any]
) -> Any:
    """``args`` with every error fixed mechanically, if each has such a fix and the result validates."""
    fixed = copy.deepcopy(args)
    for err in sorted(errors, key=lambda e: e.get("type") != "missing"):  # renames first
        loc, kind = tuple(err.get("loc") or ()), err.get("type")
        if kind == "missing":
            if not loc or not _rename_to(schema, fixed, loc):
                return None  # a missing field with nothing that stands for it: only the model knows the value
        elif kind == "extra_forbidden":
            found = _container(fixed, loc)
            if found is not None:  # not already moved by a rename: the schema has no place for it
                del found[0][found[1]]
        elif not loc or not _fix_value(schema, fixed, loc, kind, err.get("input")):
            return None
    try:
        check(fixed)
    except Exception:
        return None
    return fixed


def _rename_to(schema: Mapping[str, Any], data: Any, loc: tuple[Any, ...]) -> bool:
    """Fill a missing field from the unknown field of the same object whose name is closest to it."""
    holder = _value_at(data, loc[:-1])
    known = fragment(schema, loc[:-1]) or {}
    if not isinstance(holder, dict) or not isinstance(loc[-1], str):
        return False
    unknown = [k for k in holder if k not in (known.get("properties") or {})]
    close = difflib.get_close_matches(loc[-1].lower(), [k.lower() for k in unknown], n=1, cutoff=0.6)
    if not close:
        return False
    key = next(k for k in unknown if k.lower() == close[0])
    holder[loc[-1]] = holder.pop(key)
    return True


def _value_at(data: Any, loc: Sequence[Any]) -> Any:
    if not loc:
        return data
    found = _container(data, loc)
    return found[0][found[1]] if found is not None else None


def _container(data: Any, loc: Sequence[Any]) -> tuple[Any, Any] | None:
    """The container holding the value at ``loc`` and its key (union tags in ``loc`` are skipped)."""
    holder: Any = None
    key: Any = None
    current, last = data, False
    for part in loc:
        last = False
        if (isinstance(current, dict) and part in current) or (
            isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current)
        ):
            holder, key, last = current, part, True
            current = current[part]
    return (holder, key) if last else None


def _fix_value(schema: Mapping[str, Any], data: Any, loc: tuple[Any, ...], kind: Any, value: Any) -> bool:
    found = _container(data, loc)
    want = fragment(schema, loc)
    if found is None or want is None:
        return False
    holder, key = found
    if kind in _CHOICE_ERRORS and isinstance(value, str):
        choices = [c for c in (want.get("enum") or ([want["const"]] if "const" in want else [])) if isinstance(c, str)]
        folded = [c for c in choices if c.lower() == value.strip().lower()]
        near = folded or difflib.get_close_matches(value, choices, n=1, cutoff=0.75)
        if len(near) != 1:
            return False
        holder[key] = near[0]
        return True
    if kind == "list_type" and isinstance(value, str) and isinstance(parsed := _json(value), list):
        holder[key] = parsed
        return True
    if kind == "list_type" and value is not None:
        holder[key] = [value]  # one item where a list belongs
        return True
    if kind in _OBJECT_ERRORS and isinstance(value, str) and isinstance(parsed := _json(value), dict):
        holder[key] = parsed
        return True
    if kind == "string_type" and isinstance(value, int | float) and not isinstance(value, bool):
        holder[key] = str(value)
        return True
    return False


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
