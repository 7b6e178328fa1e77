"""The file tools as a model sees them: schemas, replies and refusals (no sandbox needed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from inline_snapshot import snapshot

from tether.toolkits import PathRefused, file_tools
from tether.tools import Tool

from .conftest import call


@pytest.fixture
def tools(workspace: Path) -> dict[str, Tool]:
    return {t.name: t for t in file_tools(str(workspace))}


def test_contracts_reads_free_writes_gated(tools: dict[str, Tool]) -> None:
    assert {n: (t.effect, t.approval) for n, t in tools.items()} == {
        "read_file": ("none", False),
        "write_file": ("idempotent", True),
        "edit_file": ("idempotent", True),
        "list_dir": ("none", False),
        "find_files": ("none", False),
    }


def test_approval_is_configurable(workspace: Path) -> None:
    assert all(t.approval is False for t in file_tools(str(workspace), approval=False))


def test_schemas(tools: dict[str, Tool]) -> None:
    assert {n: t.parameters for n, t in tools.items()} == snapshot(
        {
            "read_file": {
                "additionalProperties": False,
                "properties": {
                    "path": {
                        "description": "file path, relative to the workspace root.",
                        "type": "string",
                    },
                    "start_line": {
                        "default": 1,
                        "description": "first line to return, counting from 1.",
                        "type": "integer",
                    },
                    "max_lines": {
                        "default": 2000,
                        "description": "most lines to return.",
                        "type": "integer",
                    },
                    "offset": {
                        "default": 0,
                        "description": "instead of lines, read a window of the file from this byte (for a large file, or one long line; the reply says the offset of the next window).",
                        "type": "integer",
                    },
                },
                "required": ["path"],
                "type": "object",
            },
            "write_file": {
                "additionalProperties": False,
                "properties": {
                    "path": {
                        "description": "file path, relative to the workspace root.",
                        "type": "string",
                    },
                    "content": {
                        "description": "the complete new content of the file.",
                        "type": "string",
                    },
                },
                "required": ["path", "content"],
                "type": "object",
            },
            "edit_file": {
                "additionalProperties": False,
                "properties": {
                    "path": {
                        "description": "file path, relative to the workspace root.",
                        "type": "string",
                    },
                    "old": {
                        "description": "exact text to replace; must occur exactly once.",
                        "type": "string",
                    },
                    "new": {"description": "the text to put in its place.", "type": "string"},
                },
                "required": ["path", "old", "new"],
                "type": "object",
            },
            "list_dir": {
                "additionalProperties": False,
                "properties": {
                    "path": {
                        "default": ".",
                        "description": 'directory relative to the workspace root; "." is the root.',
                        "type": "string",
                    }
                },
                "type": "object",
            },
            "find_files": {
                "additionalProperties": False,
                "properties": {
                    "pattern": {
                        "description": 'a glob such as "*.py"; with a "/" it is a path from the workspace root: "./*.py" is the top level only, "src/*.py" one folder.',
                        "type": "string",
                    }
                },
                "required": ["pattern"],
                "type": "object",
            },
        }
    )


async def test_read_file_returns_text_and_pages_long_files(tools: dict[str, Tool], workspace: Path) -> None:
    assert await call(tools["read_file"], path="hello.txt") == "hello\nworld\n"
    (workspace / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    page = await call(tools["read_file"], path="long.txt", start_line=3, max_lines=2)
    assert page == snapshot("""\
line 3
line 4

[... showing lines 3-4 of 10; call read_file with start_line=5 for more]\
""")
    assert await call(tools["read_file"], path="long.txt", start_line=10) == "line 10\n"


async def test_read_file_describes_binary_instead_of_dumping_it(tools: dict[str, Tool], workspace: Path) -> None:
    (workspace / "blob.bin").write_bytes(bytes(range(256)) * 4)
    assert await call(tools["read_file"], path="blob.bin") == "<binary file, 1024 bytes>"


async def test_read_file_caps_huge_files(workspace: Path) -> None:
    from tether.toolkits import read_file_tool

    (workspace / "big.txt").write_text("x" * 5000)
    reply = await call(read_file_tool(str(workspace), max_bytes=1000), path="big.txt")
    assert reply.startswith("x" * 1000)
    assert reply.endswith(
        "[... file is 5000 bytes; only the first 1000 bytes can be read by lines: "
        "call read_file with offset=1000 for the rest]"
    )


async def test_read_file_by_offset_reads_a_large_file_window_by_window(workspace: Path) -> None:
    from tether.toolkits import read_file_tool

    text = "".join(f"{i}:é " for i in range(30_000))  # one long line, two-byte characters in it
    (workspace / "one-line.txt").write_text(text)
    read, offset, pieces = read_file_tool(str(workspace), max_bytes=1000), 1000, []
    first = await call(read, path="one-line.txt")
    assert first.endswith("call read_file with offset=1000 for the rest]")
    pieces.append(first.rpartition("\n[... file is")[0])
    while True:
        reply = await call(read, path="one-line.txt", offset=offset)
        body, _, note = reply.rpartition("\n[... bytes ")
        pieces.append(body)
        if note.endswith("the end of the file]"):
            break
        offset = int(note.rsplit("offset=", 1)[1].split()[0])
    assert "".join(pieces) == text  # character for character, though windows end in the middle of "é"
    assert await call(read, path="one-line.txt", offset=10**9) == f"(the file has only {len(text.encode())} bytes)"


async def test_read_file_refuses_outside_paths_and_hidden_state(
    tools: dict[str, Tool], outside: Path, workspace: Path
) -> None:
    (workspace / "key").symlink_to(outside / "id_rsa")
    for path in ("../outside/id_rsa", str(outside / "id_rsa"), "key", ".tether/hmac.key"):
        with pytest.raises(PathRefused):
            await call(tools["read_file"], path=path)


async def test_write_file_creates_replaces_and_is_idempotent(tools: dict[str, Tool], workspace: Path) -> None:
    write = tools["write_file"]
    assert await call(write, path="notes/a.md", content="# A\n") == "created 'notes/a.md' (4 bytes)"
    assert await call(write, path="notes/a.md", content="# A\n") == (
        "unchanged: 'notes/a.md' already has this content (4 bytes)"
    )
    assert await call(write, path="notes/a.md", content="# B\n") == "replaced 'notes/a.md' (4 bytes)"
    assert (workspace / "notes/a.md").read_text() == "# B\n"


async def test_write_file_refuses_git_tether_and_escapes(
    tools: dict[str, Tool], workspace: Path, outside: Path
) -> None:
    (workspace / "escape").symlink_to("/")
    for path in (".git/hooks/post-checkout", ".tether/policy.json", "../outside/x", "escape/tmp/x"):
        with pytest.raises(PathRefused):
            await call(tools["write_file"], path=path, content="pwned")
    assert not (workspace / ".git/hooks").exists()
    assert sorted(p.name for p in outside.iterdir()) == ["id_rsa"]


async def test_edit_file_replaces_exactly_one_snippet(tools: dict[str, Tool], workspace: Path) -> None:
    reply = await call(tools["edit_file"], path="hello.txt", old="world", new="there")
    assert reply == "edited 'hello.txt': replaced 1 occurrence at line 2"
    assert (workspace / "hello.txt").read_text() == "hello\nthere\n"


async def test_edit_file_fails_clearly_when_absent_or_ambiguous(tools: dict[str, Tool], workspace: Path) -> None:
    (workspace / "dup.txt").write_text("a = 1\na = 1\n")
    with pytest.raises(ValueError, match=r"snippet not found in 'hello\.txt'"):
        await call(tools["edit_file"], path="hello.txt", old="nope", new="x")
    with pytest.raises(ValueError, match=r"snippet occurs 2 times in 'dup\.txt'"):
        await call(tools["edit_file"], path="dup.txt", old="a = 1", new="a = 2")
    assert (workspace / "dup.txt").read_text() == "a = 1\na = 1\n"


async def test_edit_file_retry_after_success_changes_nothing(tools: dict[str, Tool], workspace: Path) -> None:
    """A crash after the edit and a re-run must not apply it twice, even when new contains old."""
    edit = tools["edit_file"]
    args = {"path": "hello.txt", "old": "world\n", "new": "world\nagain\n"}
    await call(edit, **args)
    assert await call(edit, **args) == "unchanged: 'hello.txt' already contains the new text"
    assert (workspace / "hello.txt").read_text() == "hello\nworld\nagain\n"


async def test_list_dir_shows_kinds_and_sizes(tools: dict[str, Tool], workspace: Path) -> None:
    (workspace / "src").mkdir()
    (workspace / "link").symlink_to("hello.txt")
    assert await call(tools["list_dir"]) == snapshot("""\
.git/
hello.txt  (12 bytes)
link -> hello.txt
src/\
""")
    assert await call(tools["list_dir"], path="src") == "(empty directory)"
