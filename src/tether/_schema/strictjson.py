"""Plain JSON, strictly: one text means one thing to every reader.

Persisted and signed data (states, decisions, events) is written as canonical
JSON and read back refusing what JSON readers disagree on: duplicate keys,
``NaN``/``Infinity``, absurd nesting. The field checkers turn a parsed object
into typed values with errors that name the field.

>>> from typing import Literal
>>> typed({"n": 1}, "n", int)
1
>>> literal({"v": "maybe"}, "v", Literal["yes", "no"])
Traceback (most recent call last):
...
ValueError: unknown v 'maybe'
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any, get_args

__all__ = [
    "args_hash",
    "canonical_json",
    "check_keys",
    "depth_ok",
    "expiry",
    "literal",
    "mac",
    "safe_text",
    "strict_json",
    "strict_loads",
    "strings",
    "typed",
    "utf8_size",
]


def canonical_json(value: Any) -> str:
    """Deterministic JSON: sorted keys, no spaces, UTF-8 kept.

    >>> canonical_json({"b": 1, "a": [1, 2]})
    '{"a":[1,2],"b":1}'
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def strict_loads(text: str | bytes) -> Any:
    """Parse JSON, refusing a duplicate key at any depth (``ValueError``).

    Persisted and signed data must mean one thing to every reader: with
    duplicates, a first-wins reader would see other values than a last-wins one.

    >>> strict_loads('{"a": 1, "a": 2}')
    Traceback (most recent call last):
    ...
    ValueError: duplicate key 'a'
    """
    return _STRICT.decode(text.decode() if isinstance(text, bytes) else text)


def strict_json(text: str | bytes, max_depth: int) -> Any:
    """:func:`strict_loads`, refusing nesting deeper than ``max_depth`` with a ``ValueError`` (never a
    ``RecursionError``): text from elsewhere (a state, a request body) cannot make a reader recurse.

    >>> strict_json("[" * 5000 + "]" * 5000, 100)
    Traceback (most recent call last):
    ...
    ValueError: it nests deeper than 100 levels
    """
    try:
        data = strict_loads(text)
    except RecursionError:  # the parser's own guard, far deeper than any cap: refused the same way
        data = None
    else:
        if depth_ok(data, max_depth):
            return data
    raise ValueError(f"it nests deeper than {max_depth} levels")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")  # NaN and Infinity: Python accepts them, JSON does not


_STRICT = json.JSONDecoder(object_pairs_hook=_unique_keys, parse_constant=_not_json)


def safe_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (a well-formed pair becomes its character).

    A model, a tool or an MCP server can hand over a string no UTF-8 encoder takes (``"\\ud800"`` in
    JSON); text is made safe once, where it enters a note, so no store, page or report fails on it.

    >>> safe_text("ok \\ud800!") == "ok \\ufffd!", safe_text("\\ud83d\\ude00") == "\\U0001f600"
    (True, True)
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def utf8_size(text: str) -> int:
    """The size of ``text`` in UTF-8 bytes (lone surrogates counted, not refused)."""
    return len(text.encode("utf-8", "surrogatepass"))


def depth_ok(value: Any, limit: int) -> bool:
    """Whether ``value`` nests no deeper than ``limit`` (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > limit:
                return False
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
    return True


def args_hash(arguments: str) -> str:
    """A hash of a call's arguments, insensitive to key order and spacing.

    >>> args_hash('{"a": 1, "b": 2}') == args_hash('{"b":2,"a":1}')
    True
    """
    try:
        text = canonical_json(json.loads(arguments))
    except (ValueError, RecursionError):  # not JSON (or absurdly deep): the text itself
        text = arguments
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def mac(key: bytes, payload: Any) -> str:
    """The HMAC-SHA256 of ``payload``'s canonical JSON under ``key``."""
    return hmac.new(key, canonical_json(payload).encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def expiry(value: Any) -> float | None:
    """An ``expires_at`` value: a number or None."""
    if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
        return value
    raise TypeError(f"field 'expires_at' must be a number or null, got {type(value).__name__}")


def strings(data: dict[str, Any], key: str) -> tuple[str, ...]:
    """``data[key]`` (default empty) as a tuple of strings."""
    values = data.get(key, [])
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise TypeError(f"field {key!r} must be a list of strings")
    return tuple(values)


def literal(data: dict[str, Any], key: str, closed: Any) -> Any:
    """``data[key]``, which must be one of the values of the ``Literal`` type ``closed``."""
    value = data[key]
    if value not in get_args(closed):
        raise ValueError(f"unknown {key} {value!r}")
    return value


def typed(data: dict[str, Any], key: str, kind: type) -> Any:
    """``data[key]``, which must be present and of type ``kind`` (a bool is not an int)."""
    if key not in data:
        raise KeyError(f"missing field {key!r}")
    value = data[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"field {key!r} must be {kind.__name__}, got {type(value).__name__}")
    return value


def check_keys(data: Any, allowed: frozenset[str], what: str) -> None:
    """Refuse objects with fields we do not know: persisted data is read strictly."""
    if not isinstance(data, dict):
        raise ValueError(f"a {what} must be a JSON object, got {type(data).__name__}")
    unknown = set(data) - allowed
    if unknown:
        raise ValueError(f"unknown {what} field(s): {sorted(unknown)}")
