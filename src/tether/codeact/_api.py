"""The tools as a program sees them: Python functions with the signatures and docstrings ``@tool`` derived.

A spec is plain JSON (the sandbox's side, :mod:`tether.codeact._stub`, builds
the functions from it); :func:`listing` is the same spec as Python text, for
the model's instructions and for ``servers.describe(name)``.

>>> from tether import tool
>>> @tool(effect="none")
... def lookup(order: str, verbose: bool = False) -> dict[str, str]:
...     '''Look an order up.
...
...     Args:
...         order: the order id, e.g. "A1".
...     '''
...     return {}
>>> print(listing([spec_of(lookup)]))
def lookup(order: str, verbose: bool = False):
    '''Look an order up.
<BLANKLINE>
    Args:
        order: the order id, e.g. "A1".'''
"""

from __future__ import annotations

import json
import keyword
import re
from collections.abc import Sequence
from typing import Any

from ..exceptions import UserError
from ..tools import Tool

__all__ = ["module_of", "python_name", "spec_of", "listing"]

_TYPES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "array": "list", "object": "dict"}


def python_name(name: str) -> str:
    """``name`` as a Python identifier (a tool named ``read-file`` is the function ``read_file``)."""
    clean = re.sub(r"\W", "_", name)
    if not clean or clean[0].isdigit() or keyword.iskeyword(clean):
        clean = "_" + clean
    return clean


def spec_of(tool: Tool, name: str | None = None) -> dict[str, Any]:
    """The function a program gets for ``tool`` (named ``name``, or after the tool)."""
    properties: dict[str, Any] = tool.parameters.get("properties", {})
    required = set(tool.parameters.get("required", ()))
    params, args = [], []
    for pname, schema in properties.items():
        if not pname.isidentifier() or keyword.iskeyword(pname):
            raise UserError(f"tool {tool.name!r} has a parameter {pname!r} that is not a Python name")
        param: dict[str, Any] = {"name": pname, "required": pname in required, "type": schema.get("type", "")}
        if "default" in schema:
            param["default"] = schema["default"]
        params.append(param)
        if text := schema.get("description"):
            args.append(f"    {pname}: {text}")
    doc = tool.description.strip() + ("\n\nArgs:\n" + "\n".join(args) if args else "")
    return {"name": python_name(name or tool.name), "tool": tool.name, "params": params, "doc": doc}


def module_of(server: str, tools: Sequence[Tool]) -> dict[str, Any]:
    """One MCP server as a module: its tools named without the server's prefix (``time__now`` is ``now``)."""
    specs = [spec_of(t, t.name.removeprefix(f"{server}__")) for t in tools]
    return {"tools": specs, "listing": listing(specs, prefix=f"servers.{python_name(server)}.")}


def listing(specs: Sequence[dict[str, Any]], *, prefix: str = "") -> str:
    """The specs as Python signatures with their docstrings."""
    return "\n\n".join(_signature(s, prefix) for s in specs)


def _signature(spec: dict[str, Any], prefix: str) -> str:
    required = [p for p in spec["params"] if p["required"]]
    optional = [p for p in spec["params"] if not p["required"]]
    shown = []
    for p in (*required, *optional):
        text = p["name"] + (f": {_TYPES[p['type']]}" if p["type"] in _TYPES else "")
        if not p["required"]:
            text += f" = {_literal(p.get('default'))}"
        shown.append(text)
    doc = spec["doc"].replace("'''", '"""').replace("\n", "\n    ")
    return f"def {prefix}{spec['name']}({', '.join(shown)}):\n    '''{doc}'''"


def _literal(value: Any) -> str:
    """A JSON default as Python source (``true`` is ``True``)."""
    if value is None or isinstance(value, bool):
        return repr(value)
    return json.dumps(value, ensure_ascii=False)
