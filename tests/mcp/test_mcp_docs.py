"""docs/mcp.md: its configuration example is a valid config, and its Python examples hold."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from tether.mcp import McpServer

DOC = (Path(__file__).resolve().parents[2] / "docs" / "mcp.md").read_text()


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC, flags=re.S)


def test_the_config_example_declares_valid_servers() -> None:
    untrusted, toml = blocks("toml")
    servers = [McpServer.from_config(name, table) for name, table in tomllib.loads(toml)["mcp"]["servers"].items()]
    assert [s.name for s in servers] == ["time", "docs", "fs"]
    fs = servers[2]
    assert fs.tools["write_file"].approval is True and fs.tools["write_file"].timeout == 10
    assert not fs.wants("move_file")
    [(name, table)] = tomllib.loads(untrusted)["mcp"]["servers"].items()
    assert McpServer.from_config(name, table).trust == "verify"


def test_the_from_schema_example_returns_what_it_says() -> None:
    example = next(b for b in blocks("py") if "Tool.from_schema" in b)
    code, _, shown = example.rpartition("lookup.validate(")
    namespace: dict[str, object] = {}
    exec(code, namespace)
    call, _, expected = shown.partition("#")
    assert eval("lookup.validate(" + call.strip(), namespace) == eval(expected.strip())
