"""The file tools against what a sandboxed command can leave behind (issue 9, items 3, 4 and 6).

Nested ``.git`` directories, FIFOs and sockets, names at the filesystem's length
limit, and files with set-id bits: the tools refuse at once, or work, but never
hang and never write where a later host ``git`` would read.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import tether
from tether.toolkits import PathRefused, file_tools
from tether.tools import Tool

from .conftest import call


@pytest.fixture
def tools(workspace: Path) -> dict[str, Tool]:
    return {t.name: t for t in file_tools(str(workspace))}


@pytest.fixture
def vendored(workspace: Path) -> Path:
    """A nested repository, as `git clone` into a subfolder leaves it."""
    repo = workspace / "vendored"
    (repo / ".git" / "hooks").mkdir(parents=True)
    (repo / ".git" / "config").write_text("[core]\n")
    (workspace / "sub").mkdir()
    (workspace / "sub" / ".git").write_text("gitdir: ../.git/modules/sub\n")
    return repo


@pytest.mark.parametrize(
    "path",
    [
        "vendored/.git/hooks/pre-commit",
        "vendored/.git/config",
        "sub/.git",  # a .git file: pointing it elsewhere makes git read another config
        "new/.git/config",  # creating a repository is a write to a .git too
        "deep/er/.git",
        "vendored/.GIT/config",  # what a case-insensitive filesystem would make of it
    ],
)
async def test_write_file_refuses_every_git_directory_not_only_the_top_one(
    tools: dict[str, Tool], vendored: Path, workspace: Path, path: str
) -> None:
    with pytest.raises(PathRefused, match="read-only"):
        await call(tools["write_file"], path=path, content="#!/bin/sh\ntouch /tmp/pwned\n")
    assert not (vendored / ".git" / "hooks" / "pre-commit").exists()
    assert (vendored / ".git" / "config").read_text() == "[core]\n"
    assert (workspace / "sub" / ".git").read_text() == "gitdir: ../.git/modules/sub\n"
    assert not (workspace / "new").exists() and not (workspace / "deep").exists()


async def test_edit_file_refuses_a_nested_git_config(tools: dict[str, Tool], vendored: Path) -> None:
    with pytest.raises(PathRefused, match="read-only"):
        await call(tools["edit_file"], path="vendored/.git/config", old="[core]\n", new="[core]\nfsmonitor = x\n")
    assert (vendored / ".git" / "config").read_text() == "[core]\n"


async def test_a_symlink_into_a_nested_git_is_refused_too(
    tools: dict[str, Tool], vendored: Path, workspace: Path
) -> None:
    (workspace / "hooks").symlink_to("vendored/.git/hooks")
    with pytest.raises(PathRefused, match="read-only"):
        await call(tools["write_file"], path="hooks/post-checkout", content="pwned")
    assert list((vendored / ".git" / "hooks").iterdir()) == []


async def test_nested_git_stays_readable(tools: dict[str, Tool], vendored: Path) -> None:
    assert await call(tools["read_file"], path="vendored/.git/config") == "[core]\n"


CHILD = """
import asyncio, json, sys
from tether.toolkits import PathRefused, file_tools
from tether.tools import Invocation
workspace, name, args = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
tool = {t.name: t for t in file_tools(workspace)}[name]
try:
    print(asyncio.run(tool.invoke(tool.validate(args), Invocation(run_id="r", call_id="c", tool_name=name))))
except PathRefused as exc:
    print(f"refused: {exc}")
"""


def promptly(workspace: Path, name: str, **args: object) -> str:
    """A file tool's reply (or refusal) from a child process; fails, never hangs, if it blocks."""
    src = str(Path(tether.__file__).parent.parent)
    # -P: the child (whose cwd may be the workspace) does not import from its current directory.
    argv = [sys.executable, "-P", "-c", CHILD, str(workspace), name, json.dumps(args)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20, env={**os.environ, "PYTHONPATH": src})
    except subprocess.TimeoutExpired:
        pytest.fail(f"{name} blocked on {args['path']!r}")
    assert done.returncode == 0, done.stderr
    return done.stdout.rstrip("\n")


def test_fifos_are_refused_at_once_never_opened_blocking(workspace: Path) -> None:
    os.mkfifo(workspace / "fifo")
    os.mkfifo(workspace / "fifo2")
    assert promptly(workspace, "read_file", path="fifo") == "refused: 'fifo' is not a regular file (a FIFO)"
    reply = promptly(workspace, "write_file", path="fifo2", content="data")
    assert reply == "refused: 'fifo2' exists and is not a regular file (a FIFO)"
    reply = promptly(workspace, "edit_file", path="fifo", old="a", new="b")
    assert reply == "refused: 'fifo' is not a regular file (a FIFO)"
    assert stat.S_ISFIFO((workspace / "fifo2").lstat().st_mode)


def test_sockets_are_refused(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = socket.socket(socket.AF_UNIX)
    monkeypatch.chdir(workspace)  # a socket's path must fit in 108 bytes
    try:
        server.bind("sock")
        reply = promptly(workspace, "read_file", path="sock")
        assert reply == "refused: 'sock' is not a regular file (a socket)"
        reply = promptly(workspace, "write_file", path="sock", content="x")
        assert reply == "refused: 'sock' exists and is not a regular file (a socket)"
    finally:
        server.close()


@pytest.mark.parametrize("length", [200, 240, 250, 255])
async def test_any_name_the_filesystem_accepts_can_be_written(
    tools: dict[str, Tool], workspace: Path, length: int
) -> None:
    name = "n" * (length - 3) + ".md"
    reply = await call(tools["write_file"], path=f"docs/{name}", content="long\n")
    assert reply == f"created 'docs/{name}' (5 bytes)"
    assert await call(tools["write_file"], path=f"docs/{name}", content="longer\n") == (
        f"replaced 'docs/{name}' (7 bytes)"
    )
    assert (workspace / "docs" / name).read_text() == "longer\n"
    assert [p.name for p in (workspace / "docs").iterdir()] == [name]  # no temporary file left


async def test_rewriting_a_set_id_file_drops_the_set_id_bits(tools: dict[str, Tool], workspace: Path) -> None:
    """The file tools run on the host as the operator: new contents never inherit setuid."""
    target = workspace / "helper"
    target.write_text("old\n")
    target.chmod(0o6755)
    await call(tools["write_file"], path="helper", content="#!/bin/sh\nid\n")
    assert stat.S_IMODE(target.stat().st_mode) == 0o755


async def test_find_files_does_not_search_nested_git(tools: dict[str, Tool], vendored: Path) -> None:
    (vendored / "lib.py").write_text("x = 1\n")
    (vendored / ".git" / "hooks" / "hook.py").write_text("")
    assert (
        await call(tools["find_files"], pattern="**/*.py") == "1 file match '**/*.py': 1 in vendored/. vendored/lib.py"
    )


async def test_what_a_root_tether_writes_belongs_to_the_workspace_owner(workspace: Path) -> None:
    """So that the operator, and the sandbox acting as the workspace owner, can edit it."""
    if os.geteuid() != 0:
        pytest.skip("only root writes files for other users")
    os.chown(workspace, 65534, 65534)
    (workspace / "theirs.txt").write_text("old\n")
    os.chown(workspace / "theirs.txt", 1234, 1234)
    tools = {t.name: t for t in file_tools(str(workspace))}
    await call(tools["write_file"], path="notes/new.md", content="new\n")
    await call(tools["write_file"], path="theirs.txt", content="replaced\n")
    owners = {p: ((workspace / p).stat().st_uid, (workspace / p).stat().st_gid) for p in ("notes", "notes/new.md")}
    assert owners == {"notes": (65534, 65534), "notes/new.md": (65534, 65534)}
    assert ((workspace / "theirs.txt").stat().st_uid, (workspace / "theirs.txt").read_text()) == (1234, "replaced\n")
