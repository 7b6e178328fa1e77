"""The sandbox is not host root in disguise (issue 9, items 1 and 2).

Attacks as the review ran them: plant a setuid/setgid file in the workspace by
every route we know (shell and python), then use it from the host as an
unprivileged user; read root-only files created anywhere on the host, also after
a first sandboxed call. Effects are checked from the host.
"""

from __future__ import annotations

import asyncio
import io
import os
import secrets
import stat
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether.toolkits import Sandbox, SandboxLimits, workspace_tools
from tether.tools import Tool

from .conftest import call

pytestmark = pytest.mark.sandbox
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]


@pytest.fixture
def open_workspace(open_tmp: Path) -> Path:
    """A workspace other users can reach (as a project under /srv would be)."""
    ws = open_tmp / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def root_only() -> Iterator[Path]:
    """A root-owned 0600 canary, outside every workspace."""
    path = Path(tempfile.mkdtemp(prefix="tether-canary-")) / "secret"
    path.write_text("root-only-canary-51f0\n")
    path.chmod(0o600)
    path.parent.chmod(0o755)
    yield path
    path.unlink()
    path.parent.rmdir()


def tools(workspace: Path) -> dict[str, Tool]:
    return {t.name: t for t in workspace_tools(str(workspace), limits=SandboxLimits(timeout=20.0))}


def set_id_entries(root: Path) -> list[str]:
    """Every file or directory under ``root`` with a setuid or setgid bit, as seen on the host."""
    found = []
    for path in [root, *root.rglob("*")]:
        mode = path.lstat().st_mode
        if mode & (stat.S_ISUID | stat.S_ISGID):
            found.append(f"{path.relative_to(root)} {stat.filemode(mode)}")
    return found


async def test_a_planted_setuid_copy_of_python_gives_other_users_nothing(open_workspace: Path, root_only: Path) -> None:
    """The review's attack, end to end: `cp python3 ./helper && chmod 4755`, then run it as nobody."""
    shell = tools(open_workspace)["shell"]
    reply = await call(shell, command="cp /usr/bin/python3 ./helper && chmod 4755 ./helper; ls -l helper")
    assert "Operation not permitted" in reply, reply
    assert set_id_entries(open_workspace) == []
    helper = open_workspace / "helper"
    read = f"import os; print(os.geteuid(), open({str(root_only)!r}).read())"
    used = subprocess.run([*NOBODY, str(helper), "-c", read], capture_output=True, text=True)
    assert "root-only-canary" not in used.stdout
    assert "PermissionError" in used.stderr, used  # control: the copy did run, as nobody
    assert oct(helper.stat().st_mode & 0o7777) == "0o755"


SHELL_ROUTES = {
    "chmod 4755": "cp /usr/bin/true t && chmod 4755 t",
    "chmod 2755": "cp /usr/bin/true t && chmod 2755 t",
    "chmod u+s": "cp /usr/bin/true t && chmod u+s t",
    "chmod g+s dir": "mkdir d && chmod g+s d",
    "mkdir -m 2775": "mkdir -m 2775 d2",
    "install -m 4755": "install -m 4755 /usr/bin/true t2",
    "cp -p of a setuid file": "cp -p /usr/bin/passwd ./passwd-copy",
    "cp -a of a setuid file": "cp -a /usr/bin/su ./su-copy",
    "tar x keeps modes": "tar -xpf planted.tar",
    "umask 0 then chmod": "umask 0 && cp /usr/bin/true t3 && chmod 6777 t3",
    "find -exec chmod": "touch f && find . -name f -exec chmod 4777 {} +",
}


@pytest.mark.parametrize("route", sorted(SHELL_ROUTES))
async def test_no_shell_route_leaves_a_set_id_bit_on_the_host(workspace: Path, route: str) -> None:
    member = tarfile.TarInfo("from-tar")
    member.mode = 0o4755
    member.size = 3
    with tarfile.open(workspace / "planted.tar", "w") as tar:
        tar.addfile(member, io.BytesIO(b"hi\n"))
    result = await Sandbox(str(workspace)).run(["bash", "-c", SHELL_ROUTES[route]])
    assert b"not permitted" in result.stderr or result.exit_code != 0, result
    assert set_id_entries(workspace) == []


PYTHON_ROUTES = {
    "os.open O_CREAT 0o6755": "os.close(os.open('p1', os.O_CREAT | os.O_WRONLY, 0o6755))",
    "os.open O_TMPFILE": "os.open('.', os.O_TMPFILE | os.O_WRONLY, 0o4755)",
    "os.chmod": "open('p2', 'w').close(); os.chmod('p2', 0o4755)",
    "os.fchmod": "fd = os.open('p3', os.O_CREAT | os.O_WRONLY); os.fchmod(fd, 0o2755)",
    "os.mkdir mode": "os.mkdir('p4', 0o2755); os.chmod('p4', 0o2755)",
    "os.mknod regular": "import stat; os.mknod('p5', stat.S_IFREG | 0o4755)",
    "shutil.copy2 setuid": "import shutil; shutil.copy2('/usr/bin/passwd', 'p6')",
    "fchmodat2 syscall": (
        "import ctypes; open('p7', 'w').close(); libc = ctypes.CDLL(None, use_errno=True)\n"
        "if libc.syscall(452, -100, b'p7', 0o4755, 0) != 0:\n"
        "    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))"
    ),
    "creat syscall": (
        "import ctypes; libc = ctypes.CDLL(None, use_errno=True)\n"
        "if libc.syscall(85, b'p8', 0o4755) < 0:\n"
        "    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))"
    ),
}


@pytest.mark.parametrize("route", sorted(PYTHON_ROUTES))
async def test_no_python_route_leaves_a_set_id_bit_on_the_host(workspace: Path, route: str) -> None:
    if "syscall(" in PYTHON_ROUTES[route] and os.uname().machine != "x86_64":
        pytest.skip("syscall numbers in this test are for x86_64")
    reply = await call(tools(workspace)["python"], code="import os\n" + PYTHON_ROUTES[route])
    assert "Operation not permitted" in reply, reply
    assert set_id_entries(workspace) == []


async def test_ordinary_modes_still_work(workspace: Path) -> None:
    """Control: the filter refuses only the set-id bits, not chmod, creation or sticky bits."""
    script = (
        "cp /usr/bin/true t && chmod 755 t && chmod u+x t && ./t && mkdir -m 1777 shared && "
        "python3 -c \"import os; os.close(os.open('n', os.O_CREAT | os.O_WRONLY, 0o640))\" && "
        "umask 077 && touch private && stat -c '%a %n' t shared n private"
    )
    result = await Sandbox(str(workspace)).run(["bash", "-c", script])
    assert result.stdout.decode().split("\n") == ["755 t", "1777 shared", "640 n", "600 private", ""], result


async def test_openat2_is_refused_with_enosys_so_libc_falls_back(workspace: Path) -> None:
    """openat2 carries its mode in a struct the filter cannot read; ENOSYS makes callers use openat."""
    if os.uname().machine != "x86_64":
        pytest.skip("syscall numbers in this test are for x86_64")
    code = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "how = (ctypes.c_uint64 * 3)(os.O_CREAT | os.O_WRONLY, 0o4755, 0)\n"
        "print(libc.syscall(437, -100, b'o2', how, 24), os.strerror(ctypes.get_errno()))\n"
        "print(libc.syscall(2, b'hello.txt', os.O_RDONLY, 0o4755) >= 0)\n"  # no O_CREAT: mode ignored
    )
    result = await Sandbox(str(workspace)).run(["python3", "-c", code])
    assert result.stdout.decode().splitlines() == ["-1 Function not implemented", "True"], result
    assert not (workspace / "o2").exists()


PRIVATE_PLACES = ["/usr/local/share", "/usr/share", "/etc", "/usr/lib"]


async def test_root_only_files_are_unreadable_wherever_and_whenever_they_appear(workspace: Path) -> None:
    """A first call, then fresh 0600 root files in /etc, /usr/...: neither shell nor python reads them."""
    box = tools(workspace)
    assert await call(box["shell"], command="cat hello.txt") == "hello\nworld"  # the first call
    tag = secrets.token_hex(4)
    paths = [Path(place) / f"tether-canary-{tag}" for place in PRIVATE_PLACES]
    try:
        for path in paths:
            path.write_text(f"private-canary-{tag}\n")
            path.chmod(0o600)
        public = Path("/usr/local/share") / f"tether-public-{tag}"
        public.write_text(f"public-{tag}\n")
        names = " ".join(str(p) for p in paths)
        out = await call(box["shell"], command=f"cat {names} {public}")
        assert f"private-canary-{tag}" not in out
        assert out.count("Permission denied") == len(paths), out
        assert f"public-{tag}" in out  # control: the same command reads what others may read
        code = "\n".join(
            f"try:\n    print(open({str(p)!r}).read())\nexcept OSError as exc:\n    print(type(exc).__name__)"
            for p in paths
        )
        out = await call(box["python"], code=code)
        assert f"private-canary-{tag}" not in out
        assert out.split() == ["PermissionError"] * len(paths), out
    finally:
        for path in paths:
            path.unlink(missing_ok=True)
        (Path("/usr/local/share") / f"tether-public-{tag}").unlink(missing_ok=True)


async def test_root_only_files_in_extra_read_only_paths_are_unreadable(workspace: Path, root_only: Path) -> None:
    box = Sandbox(str(workspace), read_only_paths=(str(root_only.parent),))
    result = await box.run(["bash", "-c", f"ls {root_only.parent}; cat {root_only}"])
    assert result.stdout == b"secret\n"  # control: the directory is there
    assert b"root-only-canary" not in result.stdout and b"Permission denied" in result.stderr


async def test_sandboxed_processes_run_as_an_unprivileged_host_uid(workspace: Path) -> None:
    """Seen from the host, not from inside: no process of the sandbox is uid 0 there."""
    mark = f"tether-uid-{secrets.token_hex(4)}"
    run = asyncio.ensure_future(Sandbox(str(workspace)).run(["bash", "-c", f"sleep 5; : {mark}"]))
    try:
        pids: list[str] = []
        for _ in range(500):
            if pids := [p for p in os.listdir("/proc") if p.isdigit() and _inside(p, mark)]:
                break
            await asyncio.sleep(0.02)
        assert pids, "the sandboxed command never started"
        for pid in pids:
            uid, gid, groups = (_status(pid, key).split() for key in ("Uid", "Gid", "Groups"))
            assert uid and "0" not in uid + gid + groups, (pid, uid, gid, groups)
    finally:
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run


async def test_files_the_sandbox_writes_belong_to_the_workspace_owner(workspace: Path) -> None:
    """The operator can read and edit what the agent wrote; the agent can edit the operator's files."""
    result = await Sandbox(str(workspace)).run(
        ["bash", "-c", "mkdir -p out && echo made > out/new && echo more >> hello.txt"]
    )
    assert result.ok, result
    owner = workspace.stat()
    for path in (workspace / "out", workspace / "out" / "new", workspace / "hello.txt"):
        assert (path.stat().st_uid, path.stat().st_gid) == (owner.st_uid, owner.st_gid), path
    assert (workspace / "hello.txt").read_text() == "hello\nworld\nmore\n"


def _inside(pid: str, mark: str) -> bool:
    """Whether ``pid`` runs ``mark``'s command in another pid namespace (inside a sandbox)."""
    try:
        ours = os.readlink("/proc/self/ns/pid")
        return mark.encode() in Path(f"/proc/{pid}/cmdline").read_bytes() and os.readlink(f"/proc/{pid}/ns/pid") != ours
    except OSError:
        return False


def _status(pid: str, key: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return line.split(":", 1)[1]
    return ""


async def test_a_workspace_of_another_user_stays_theirs_through_both_kinds_of_tool(workspace: Path) -> None:
    """Root runs tether on alice's project: the file tools and the sandbox both write as alice."""
    if os.geteuid() != 0:
        pytest.skip("only root works in other users' directories")
    for path in (workspace, *workspace.rglob("*")):
        os.lchown(path, 1234, 1234)
    box = tools(workspace)
    await call(box["write_file"], path="notes.md", content="one\n")
    reply = await call(
        box["shell"], command="echo two >> notes.md && mkdir -p out && echo three > out/new && cat notes.md"
    )
    assert reply == "one\ntwo", reply
    for path in (workspace / "notes.md", workspace / "out", workspace / "out" / "new"):
        assert (path.stat().st_uid, path.stat().st_gid) == (1234, 1234), path
