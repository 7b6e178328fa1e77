"""Host-side walks of the workspace go by descriptor and fail closed (adversarial review, finding D).

The walk before each command (it finds every ``.git`` to mount read-only and
measures the disk budget), the disk check while a command runs, and
``find_files`` all walk a workspace that a sandboxed command controls. The
attacks: move an operator's repository below the longest path a path-based walk
can open, or 10,000 levels down (the old walk skipped what it could not open,
so that ``.git`` was left writable, and uncounted); keep swapping a directory
for a link to a host directory while the host walks; a directory the host may
not enter; link loops. Each walk sees only the workspace, or says it could not
see all of it.
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

from tether.toolkits import PathRefused, Sandbox, SandboxLimits, find_files_tool, list_dir_tool
from tether.toolkits._sandbox import MiB
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


def nest(levels: int, name: str, then: str) -> str:
    """Python for the sandbox: make ``nest/NAME/NAME/...`` (``levels`` deep), then run ``then`` with
    ``top`` and ``fd`` the descriptors of the workspace and of the bottom folder."""
    return (
        "import os\n"
        "top = os.open('.', os.O_RDONLY)\n"
        "os.mkdir('nest', dir_fd=top); fd = os.open('nest', os.O_RDONLY, dir_fd=top)\n"
        f"for _ in range({levels}):\n"
        f"    os.mkdir({name!r}, dir_fd=fd); child = os.open({name!r}, os.O_RDONLY, dir_fd=fd); os.close(fd); fd = child\n"
        f"{then}\n"
    )


def reach(levels: int, name: str, then: str) -> str:
    """Like :func:`nest`, for a nest that already exists (or not: then ``fd`` stays at the top)."""
    return (
        "import os\n"
        "top = fd = os.open('.', os.O_RDONLY)\n"
        "try:\n"
        "    fd = os.open('nest', os.O_RDONLY, dir_fd=top)\n"
        f"    for _ in range({levels}):\n"
        f"        child = os.open({name!r}, os.O_RDONLY, dir_fd=fd); os.close(fd); fd = child\n"
        "except OSError:\n"
        "    fd = top\n"
        f"{then}\n"
    )


MOVE_REPOSITORY = """
try:
    os.rename('vendored', 'vendored', src_dir_fd=top, dst_dir_fd=fd)
except OSError as exc:
    print('not moved:', exc.strerror)
for where in (fd, top):
    try:
        git = os.open('vendored/.git', os.O_RDONLY, dir_fd=where)
        with open(os.open('config', os.O_WRONLY | os.O_APPEND, dir_fd=git), 'a') as f:
            f.write('[core]\\n\\tfsmonitor = touch /tmp/pwned\\n')
        print('planted')
    except OSError as exc:
        print('not planted:', exc.strerror)
"""


def write_files(megabytes: int, count: int) -> str:
    return (
        f"for i in range({count}):\n"
        f"    with open(os.open(f'f{{i}}', os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), 'wb') as f:\n"
        f"        f.write(b'x' * {megabytes << 20})\n"
        "print('written')"
    )


@pytest.mark.parametrize(("levels", "name"), [(17, "n" * 250), (LEVELS, "a")], ids=["past-PATH_MAX", "10000-levels"])
async def test_a_repository_cannot_be_moved_out_of_the_walks_reach(roomy: Path, levels: int, name: str) -> None:
    """17 levels of 250-byte names are longer than a path may be (4096 bytes): the old walk skipped
    what lay there, so a repository moved below stayed writable from the next command on."""
    config = (roomy / "vendored" / ".git" / "config").read_bytes()
    sandbox = Sandbox(str(roomy))
    first = await sandbox.run(["python3", "-I", "-c", nest(levels, name, MOVE_REPOSITORY)])
    assert first.stdout.decode().splitlines() == [
        "not moved: Device or resource busy",  # its folder is pinned in place
        "not planted: No such file or directory",
        "not planted: Read-only file system",
    ], first
    second = await sandbox.run(["python3", "-I", "-c", reach(levels, name, MOVE_REPOSITORY)])
    assert "planted" not in second.stdout.decode().splitlines(), second  # from the next command on
    assert (roomy / "vendored" / ".git" / "config").read_bytes() == config


async def test_files_below_the_longest_path_count_against_the_disk_budget(roomy: Path) -> None:
    sandbox = Sandbox(str(roomy), limits=SandboxLimits(disk_bytes=16 * MiB))
    filled = await sandbox.run(["python3", "-I", "-c", nest(17, "n" * 250, write_files(8, 3))])
    assert b"written" in filled.stdout or filled.killed_reason is not None, filled
    result = await sandbox.run(["true"])
    assert result.killed_reason is not None and result.killed_reason.startswith(
        "not started: disk budget: the workspace holds"
    ), result


async def test_ten_thousand_levels_stop_every_command_and_find_files(roomy: Path) -> None:
    sandbox = Sandbox(str(roomy))
    made = await sandbox.run(["python3", "-I", "-c", nest(LEVELS, "a", write_files(1, 1))])
    assert made.stdout == b"written\n", made
    result = await sandbox.run(["true"])
    assert result.exit_code == -1 and result.killed_reason is not None
    assert result.killed_reason.startswith("not started: cannot look at the whole workspace: 'nest/a/a/a")
    assert "nested deeper than 200 levels" in result.killed_reason
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
            names = re.sub(r" \[\.\.\. \d+ more\]$", "", (found[2] or "").rpartition(". ")[2])
            assert int(found[1]) <= 16 and all(
                re.fullmatch(r"d\d+(\.x)?/inner/ws-file\.py", name) for name in names.split(", ") if name
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
    assert (
        await call(find_files_tool(str(workspace)), pattern="**/*")
        == "1 file match '**/*': at the top level. hello.txt"
    )
    listing = await call(list_dir_tool(str(workspace)))
    assert "loop -> ." in listing and "root -> /" in listing
    result = await Sandbox(str(workspace)).run(["true"])
    assert result.ok, result


async def test_an_eval_trial_that_leaves_ten_thousand_nested_folders_is_cleaned_up(roomy: Path) -> None:
    """The harness removed trial directories with ``shutil.rmtree``, which recursed into RecursionError."""
    from tether import Action, Agent, FunctionPolicy
    from tether.evals import Case, evaluate
    from tether.toolkits import workspace_tools

    deep = nest(LEVELS, "a", write_files(1, 1)).replace("'", "'\\''")
    trials = roomy.parent / "trials"
    trials.mkdir()

    def brain(context, tools):  # type: ignore[no-untyped-def]
        if not any(m.role == "tool" for m in context):
            return Action("shell", {"command": f"python3 -I -c '{deep}'"})
        return "done" if "written" in context.last().content else f"failed: {context.last().content}"

    def agent(setup):  # type: ignore[no-untyped-def]
        return Agent(FunctionPolicy(brain), workspace_tools(setup.workdir, approval=False), store=setup.store)

    report = await evaluate([Case("deep", "make a deep tree", expected="done")], agent, workdir=trials)
    assert report.summary().accuracy == 1.0
    assert list(trials.iterdir()) == []
