"""Host-side walks of the workspace go by descriptor and fail closed (adversarial review, finding D).

The walk before each command (it finds every ``.git`` to mount read-only and
measures the disk budget), the disk check while a command runs, and
``find_files`` all walk a workspace that a sandboxed command controls. The
attacks: move an operator's repository below the longest path a path-based walk
can open, or 10,000 levels down (the old walk skipped what it could not open,
so that ``.git`` was left writable); keep swapping a directory for a link to a
host directory while the host walks; a directory the host may not enter; link
loops. Each walk sees only the workspace, or says it could not see all of it.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether.toolkits import PathRefused, Sandbox, find_files_tool, list_dir_tool
from tether.toolkits._sandbox.usage import scan

from .conftest import call

pytestmark = pytest.mark.sandbox
LEVELS = 10_000


@pytest.fixture
def roomy(open_tmp: Path) -> Iterator[Path]:
    """A workspace with a repository, on its own tmpfs (ext4 here takes milliseconds per rmdir)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a filesystem needs root")
    fs = open_tmp / "fs"
    fs.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m,mode=0755", "tether-walk-test", str(fs)], check=True)
    try:
        (fs / "ws" / "vendored").mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(fs / "ws" / "vendored")], check=True)
        yield fs / "ws"
    finally:
        subprocess.run(["umount", "-l", str(fs)], check=True)


def bury(levels: int, name: str) -> str:
    """Python for the sandbox: make ``nest/NAME/NAME/...`` and move ``vendored`` to its bottom."""
    return (
        "import os\n"
        "top = os.open('.', os.O_RDONLY)\n"
        "os.mkdir('nest', dir_fd=top); fd = os.open('nest', os.O_RDONLY, dir_fd=top)\n"
        f"for _ in range({levels}):\n"
        f"    os.mkdir({name!r}, dir_fd=fd); child = os.open({name!r}, os.O_RDONLY, dir_fd=fd); os.close(fd); fd = child\n"
        "os.rename('vendored', 'vendored', src_dir_fd=top, dst_dir_fd=fd)\n"
        "print('buried')\n"
    )


def plant(levels: int, name: str) -> str:
    """Python for the sandbox: give the buried repository an fsmonitor."""
    return (
        "import os\n"
        "fd = os.open('nest', os.O_RDONLY)\n"
        f"for _ in range({levels}):\n"
        f"    child = os.open({name!r}, os.O_RDONLY, dir_fd=fd); os.close(fd); fd = child\n"
        "fd = os.open('vendored/.git', os.O_RDONLY, dir_fd=fd)\n"
        "with open(os.open('config', os.O_WRONLY | os.O_APPEND, dir_fd=fd), 'a') as f:\n"
        "    f.write('[core]\\n\\tfsmonitor = touch /tmp/pwned\\n')\n"
        "print('planted')\n"
    )


def buried_config(ws: Path, levels: int, name: str) -> bytes:
    """The buried repository's config, read through descriptors (its path is too long to open)."""
    fd = os.open(ws / "nest", os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(levels):
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = child
        with open(os.open("vendored/.git/config", os.O_RDONLY, dir_fd=fd), "rb") as f:
            return f.read()
    finally:
        os.close(fd)


async def test_a_repository_moved_below_the_longest_path_stays_read_only(roomy: Path) -> None:
    """17 levels of 250-byte names: longer than a path may be (4096 bytes); the old walk skipped it."""
    config = (roomy / "vendored" / ".git" / "config").read_bytes()
    sandbox, name = Sandbox(str(roomy)), "n" * 250
    buried = await sandbox.run(["python3", "-I", "-c", bury(17, name)])
    assert buried.stdout == b"buried\n", buried  # the .git moved along with its folder, still read-only
    result = await sandbox.run(["python3", "-I", "-c", plant(17, name)])
    assert b"planted" not in result.stdout, result
    assert result.killed_reason is not None and result.killed_reason.startswith(
        "not started: cannot look at the whole workspace: 'nest/nnn"
    ), result
    assert result.killed_reason.endswith("vendored/.git' is too deep to be mounted read-only")
    assert buried_config(roomy, 17, name) == config
    assert await call(find_files_tool(str(roomy)), pattern="**/*") == "0 files match '**/*'"  # walked it all


async def test_a_repository_moved_ten_thousand_levels_down_stops_every_command(roomy: Path) -> None:
    config = (roomy / "vendored" / ".git" / "config").read_bytes()
    sandbox = Sandbox(str(roomy))
    buried = await sandbox.run(["python3", "-I", "-c", bury(LEVELS, "a")])
    assert buried.stdout == b"buried\n", buried
    result = await sandbox.run(["python3", "-I", "-c", plant(LEVELS, "a")])
    assert b"planted" not in result.stdout, result
    assert result.exit_code == -1 and result.killed_reason is not None
    assert result.killed_reason.startswith("not started: cannot look at the whole workspace: 'nest/a/a/a")
    assert "nested deeper than 200 levels" in result.killed_reason
    assert buried_config(roomy, LEVELS, "a") == config
    # find_files says it could not search, rather than counting what it reached.
    with pytest.raises(PathRefused, match=r"cannot search the workspace: .* nested deeper than 200 levels"):
        await call(find_files_tool(str(roomy)), pattern="**/*")


async def test_a_directory_swapped_for_a_link_while_the_host_walks_is_never_followed(
    workspace: Path, open_tmp: Path
) -> None:
    host = open_tmp / "host-dir"  # what the links point to: a repository and a file of the host's
    (host / ".git").mkdir(parents=True)
    (host / "host-canary.py").write_text("x")
    for i in range(16):
        (workspace / f"d{i}" / "inner").mkdir(parents=True)
        (workspace / f"d{i}" / "inner" / "ws-file.py").write_text("x")
    swap = (
        "import os, time\n"
        "open('started', 'w').close(); end = time.monotonic() + 4; swaps = 0\n"
        "while time.monotonic() < end:\n"
        "    for i in range(16):\n"
        "        d = f'd{i}'\n"
        f"        os.rename(d, d + '.x'); os.symlink({str(host)!r}, d); os.unlink(d); os.rename(d + '.x', d)\n"
        "        swaps += 1\n"
        "print(swaps)\n"
    )
    attack = asyncio.create_task(Sandbox(str(workspace)).run(["python3", "-I", "-c", swap]))
    while not (workspace / "started").exists():
        assert not attack.done(), attack.result()
        await asyncio.sleep(0.01)
    done = threading.Event()
    attack.add_done_callback(lambda _: done.set())
    find = find_files_tool(str(workspace))
    seen: list[str] = []

    def walk_meanwhile() -> None:
        while not done.is_set():
            usage = scan(str(workspace))
            seen.append(usage.problem or f"complete: {usage.git_entries}")
            try:
                seen.append(asyncio.run(call(find, pattern="**/*.py")))
            except PathRefused as exc:
                seen.append(str(exc))

    await asyncio.to_thread(walk_meanwhile)
    result = await attack
    assert int(result.stdout) > 0, result  # control: it did swap
    assert seen
    assert not [line for line in seen if "host-canary" in line]
    for line in seen:  # each walk saw only the workspace, or said it could not look at all of it
        found = re.fullmatch(r"(\d+) files? match '\*\*/\*\.py'(: .*)?", line)
        if found is not None:  # a directory renamed while its parent is listed may be missed
            assert int(found[1]) <= 16 and all(
                re.fullmatch(r"d\d+(\.x)?/inner/ws-file\.py", name)
                for name in (found[2] or ": ")[2:].split(", ")
                if name
            ), line
        else:
            assert line == "complete: ('.git',)" or line.startswith(
                ("cannot look at the whole workspace: 'd", "cannot search the workspace: 'd")
            ), line


def test_a_directory_the_host_cannot_enter_fails_the_walk_instead_of_hiding_a_repository(open_tmp: Path) -> None:
    """As a non-root tether (the sandbox is that user), a ``chmod 000`` folder hid the ``.git`` in it."""
    ws = open_tmp / "ws"
    (ws / "locked" / "repo" / ".git").mkdir(parents=True)
    for path in (ws, ws / "locked", ws / "locked" / "repo", ws / "locked" / "repo" / ".git"):
        os.chown(path, 65534, 65534)
    (ws / "locked").chmod(0o000)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            os.setgroups([])
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
            usage = scan(str(ws))
            os.write(write, repr((usage.problem, usage.git_entries)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        report = f.read().decode()
    os.waitpid(pid, 0)
    (ws / "locked").chmod(0o755)
    assert report == repr(
        ("cannot look at the whole workspace: 'locked' cannot be looked into (permission denied)", ())
    )


async def test_link_loops_are_listed_and_counted_never_followed(workspace: Path) -> None:
    os.symlink(".", workspace / "loop")
    os.symlink("b", workspace / "a")
    os.symlink("a", workspace / "b")
    os.symlink("/", workspace / "root")
    usage = scan(str(workspace))
    assert usage.problem is None and usage.git_entries == (".git",)
    assert usage.inodes == len([p for p in workspace.rglob("*") if ".tether" not in p.parts])  # rglob follows none
    assert await call(find_files_tool(str(workspace)), pattern="**/*") == "1 file match '**/*': hello.txt"
    listing = await call(list_dir_tool(str(workspace)))
    assert "loop -> ." in listing and "root -> /" in listing
    result = await Sandbox(str(workspace)).run(["true"])
    assert result.ok, result
