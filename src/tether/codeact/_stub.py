"""The program's side of a code action: runs inside the sandbox, standard library only, no tether imports.

Started as ``python3 -I -c <this file's text>``, it reads one JSON object on
stdin: ``program`` (the model's code), ``tools`` (each offered tool as a
function: its attribute name, the tool it calls, its parameters and its
docstring), ``servers`` (the MCP servers' modules, the same way) and ``fd``
(the bridge: a socket the host keeps the other end of). Then it runs the
program with those functions in its namespace.

The bridge carries one JSON line at a time. The program's side sends
``{"call": name, "args": {...}}`` and reads ``{"ok": value}`` or
``{"error": text}``; at the end it sends ``{"end": {...}}`` with the repr of
the last expression, the error, or the value given to ``final_answer``. The
host decides everything else: which tool that name is, whether the arguments
are valid, whether a person must approve, and what the journal says.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import inspect
import io
import json
import os
import sys
import traceback
from typing import Any

FILENAME = "<action>"
MAX_REPR = 2000
TYPES = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list, "object": dict}


class ToolError(Exception):
    """A tool call that did not give a value: the tool failed, the arguments were invalid, or a person denied it."""


class _Final(BaseException):  # not an Exception: a program's ``except Exception`` does not swallow it
    def __init__(self, value: Any) -> None:
        self.value = value


class _Bridge:
    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.reader = io.BufferedReader(io.FileIO(fd, "rb", closefd=False))

    def send(self, message: dict[str, Any]) -> None:
        data = memoryview(json.dumps(message, ensure_ascii=False).encode() + b"\n")
        while data:
            data = data[os.write(self.fd, data) :]

    def call(self, name: str, args: dict[str, Any]) -> Any:
        self.send({"call": name, "args": args})
        line = self.reader.readline()
        if not line:
            raise SystemExit(3)  # the host stopped listening: the run paused or ended
        reply = json.loads(line)
        if "error" in reply:
            raise ToolError(reply["error"])
        return reply["ok"]


def _function(bridge: _Bridge, spec: dict[str, Any]) -> Any:
    """A plain Python function that calls the tool ``spec`` names through the bridge."""
    params = []
    for p in spec["params"]:
        annotation = TYPES.get(p.get("type", ""), inspect.Parameter.empty)
        default = p.get("default") if not p["required"] else inspect.Parameter.empty
        params.append(inspect.Parameter(p["name"], inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default,
                                        annotation=annotation))  # fmt: skip
    params.sort(key=lambda p: p.default is not inspect.Parameter.empty)  # required ones first
    signature = inspect.Signature(params)
    tool = spec["tool"]

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{spec['name']}(): {exc}") from None
        return bridge.call(tool, dict(bound.arguments))

    call.__name__ = call.__qualname__ = spec["name"]
    call.__doc__ = spec["doc"]
    call.__signature__ = signature  # type: ignore[attr-defined]
    return call


class _Module:
    """One MCP server as a module: its tools are attributes."""

    def __init__(self, name: str, functions: dict[str, Any], listing: str) -> None:
        self.__name__ = name
        self.__doc__ = listing
        self.__dict__.update(functions)

    def __repr__(self) -> str:
        return f"<module servers.{self.__name__}: {', '.join(sorted(k for k in vars(self) if not k.startswith('_')))}>"


class _Servers:
    """The MCP servers as modules, discovered on demand: ``list()``, then ``describe(name)``."""

    def __init__(self, modules: dict[str, _Module]) -> None:
        self._modules = modules
        self.__dict__.update(modules)

    def list(self) -> list[str]:
        """The server modules' names."""
        return sorted(self._modules)

    def describe(self, name: str) -> str:
        """The signatures and docstrings of one server module's functions."""
        if name not in self._modules:
            raise AttributeError(f"no server module {name!r}; there are {self.list()}")
        return self._modules[name].__doc__ or ""

    def __repr__(self) -> str:
        return f"<servers: {', '.join(self.list())}>"


def _where(exc: BaseException, lines: list[str]) -> str:
    """The program's own lines in the traceback, most recent last."""
    if isinstance(exc, SyntaxError) and exc.filename == FILENAME:
        return f"line {exc.lineno}: {(exc.text or '').strip()}"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == FILENAME]
    shown = [f"line {f.lineno}: {lines[f.lineno - 1].strip() if f.lineno and f.lineno <= len(lines) else ''}"
             for f in frames]  # fmt: skip
    return "\n".join(shown)


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    json.dumps(value)
    return value


def _run(program: str, namespace: dict[str, Any]) -> dict[str, Any]:
    """Run the program; what the host should know about how it ended."""
    lines = program.splitlines()
    try:
        tree = ast.parse(program, FILENAME)
        last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        if last is not None:
            tree.body.pop()
        exec(compile(tree, FILENAME, "exec"), namespace)
        value = eval(compile(ast.Expression(last.value), FILENAME, "eval"), namespace) if last else None
    except _Final as final:
        try:
            return {"final": _jsonable(final.value)}
        except (TypeError, ValueError) as exc:
            return {"error": f"final_answer needs a JSON value (a dict, list, str, number, bool or None): {exc}"}
    except SystemExit as exc:
        return {"exit": str(exc.code)} if exc.code not in (None, 0) else {}
    except BaseException as exc:
        return {"error": f"{type(exc).__name__}: {exc}", "where": _where(exc, lines)}
    if value is None:
        return {}
    text = repr(value)
    if len(text) > MAX_REPR:
        text = text[:MAX_REPR] + f"... ({len(text) - MAX_REPR} more characters)"
    return {"value": text}


def main() -> None:
    config = json.loads(sys.stdin.buffer.read())
    bridge = _Bridge(config["fd"])
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins, "ToolError": ToolError}
    for spec in config["tools"]:
        namespace[spec["name"]] = _function(bridge, spec)
    modules = {}
    for name, server in config["servers"].items():
        functions = {spec["name"]: _function(bridge, spec) for spec in server["tools"]}
        modules[name] = _Module(name, functions, server["listing"])
    namespace["servers"] = _Servers(modules)

    def final_answer(value: Any) -> None:
        """End the task with ``value`` as the answer (typed answers are checked by the host)."""
        raise _Final(value)

    namespace["final_answer"] = final_answer
    ending = _run(config["program"], namespace)
    sys.stdout.flush()
    bridge.send({"end": ending})


if __name__ == "__main__":
    main()
