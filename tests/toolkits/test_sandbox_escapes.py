"""Escape attempts against the real bubblewrap sandbox.

Every check is effect-based: a host canary file, process or TCP server is
inspected from outside, and each denial has a positive control showing that the
same probe does work where it should (so a broken probe cannot pass as "denied").
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tether.toolkits import Sandbox, SandboxLimits, UnsandboxedWarning

from .conftest import Canary

pytestmark = pytest.mark.sandbox


async def sh(sandbox: Sandbox, command: str) -> tuple[int, str]:
    result = await sandbox.run(["bash", "-c", command])
    return result.exit_code, (result.stdout + result.stderr).decode(errors="replace")


async def test_workspace_and_dev_null_are_writable_the_rest_is_not(
    sandbox: Sandbox, workspace: Path, outside: Path
) -> None:
    code, out = await sh(sandbox, "echo ok > made.txt && echo ok > /dev/null && echo ok > /tmp/t")
    assert code == 0, out
    assert (workspace / "made.txt").read_text() == "ok\n"
    for target in ("/canary", "/usr/canary", "/etc/canary", f"{outside}/canary", "/proc/canary"):
        code, out = await sh(sandbox, f"echo pwned > {target}")
        assert code != 0, (target, out)
        assert not os.path.exists(target)
    assert sorted(p.name for p in outside.iterdir()) == ["id_rsa"]


async def test_no_capabilities_no_new_privileges_not_root(sandbox: Sandbox) -> None:
    code, out = await sh(sandbox, "grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs)' /proc/self/status; id -u")
    assert code == 0, out
    fields = dict(line.split(":\t") for line in out.splitlines()[:-1])
    assert fields == {
        "CapPrm": "0000000000000000",
        "CapEff": "0000000000000000",
        "CapBnd": "0000000000000000",
        "NoNewPrivs": "1",
    }
    assert out.splitlines()[-1] == "65534"


async def test_seccomp_refuses_keyrings_bpf_and_io_uring(sandbox: Sandbox) -> None:
    """Kernel keyrings belong to the host user the sandbox maps to; the filter refuses them."""
    code = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "calls = {'keyctl': (250, 0, -4, 0), 'bpf': (321, 0, 0, 0), 'io_uring_setup': (425, 1, 0)}\n"
        "for name, args in calls.items():\n"
        "    print(name, libc.syscall(*args), os.strerror(ctypes.get_errno()))\n"
    )
    if os.uname().machine != "x86_64":
        pytest.skip("syscall numbers in this test are for x86_64")
    result = await sandbox.run(["python3", "-c", code])
    assert result.stdout.decode().splitlines() == [
        "keyctl -1 Operation not permitted",
        "bpf -1 Operation not permitted",
        "io_uring_setup -1 Operation not permitted",
    ]
    _, out = await sh(sandbox, "grep ^Seccomp: /proc/self/status")
    assert out.split() == ["Seccomp:", "2"]


async def test_remounting_read_write_fails(sandbox: Sandbox) -> None:
    """The escape bwrap-as-root allows when capabilities are kept."""
    script = (
        "mount -o remount,rw / ; mount -o remount,bind,rw /usr ; mount -t tmpfs none /usr ; echo pwned > /usr/canary"
    )
    code, out = await sh(sandbox, script)
    assert code != 0, out
    assert not os.path.exists("/usr/canary")


async def test_new_user_namespace_cannot_regain_capabilities(sandbox: Sandbox) -> None:
    code, out = await sh(sandbox, "unshare -U -r sh -c 'mount -o remount,rw /usr && touch /usr/canary'")
    assert code != 0, out
    assert not os.path.exists("/usr/canary")


async def test_kernel_settings_in_proc_are_read_only(sandbox: Sandbox) -> None:
    """The sandbox uid is host root without capabilities; file permissions alone would let it
    write global sysctls such as kernel.core_pattern (a host-root escape)."""
    before = Path("/proc/sys/fs/lease-break-time").read_text()
    code, out = await sh(sandbox, "echo 0 > /proc/sys/fs/lease-break-time")
    assert code != 0, out
    assert Path("/proc/sys/fs/lease-break-time").read_text() == before
    code, out = await sh(
        sandbox,
        "find /proc -xdev -maxdepth 4 -writable 2>/dev/null | grep -Ev '^/proc/([0-9]+|self|thread-self)(/|$)' || true",
    )
    assert out == "", out


async def test_host_processes_are_invisible_and_unkillable(sandbox: Sandbox) -> None:
    canary = subprocess.Popen(["sleep", "60"])
    try:
        code, out = await sh(sandbox, f"kill -9 {canary.pid}")
        assert code != 0 and "No such process" in out, out
        await sh(sandbox, "kill -9 -1")  # everything this sandbox can see
        assert canary.poll() is None, "the host canary process was killed"
        # Only the sandbox's own processes exist in its pid namespace: init, bash, ls, grep, wc.
        _, out = await sh(sandbox, "ls /proc | grep -E '^[0-9]+$' | wc -l")
        assert int(out) <= 5, out
        _, out = await sh(
            sandbox,
            "python3 -c 'import ctypes; l=ctypes.CDLL(None); "
            f"print(l.ptrace(16, {canary.pid}, 0, 0))'",  # PTRACE_ATTACH
        )
        assert out.strip() == "-1", out
        assert canary.poll() is None
    finally:
        canary.kill()
        canary.wait()


async def test_secrets_outside_the_workspace_are_not_visible(sandbox: Sandbox, outside: Path, workspace: Path) -> None:
    shadow = Path("/etc/shadow").read_text().splitlines()[0]
    _, out = await sh(
        sandbox,
        f"cat {outside}/id_rsa; cat /etc/shadow; ls /root /home /var /run; cat .tether/hmac.key; "
        "ls -A .tether; cat /proc/1/environ",
    )
    for secret in ("canary-secret-7c1e", "canary-hmac-key-3f9a", shadow):
        assert secret not in out
    assert (workspace / ".tether" / "hmac.key").read_text() == "canary-hmac-key-3f9a\n"
    # Control: the same command sees workspace files, so `cat` did run.
    _, out = await sh(sandbox, "cat hello.txt")
    assert out == "hello\nworld\n"


async def test_git_and_tether_cannot_be_changed_or_replaced(sandbox: Sandbox, workspace: Path) -> None:
    attacks = [
        "echo pwned > .git/config",
        "mkdir -p .git/hooks && echo pwned > .git/hooks/post-checkout",
        "mv .git .git-old",
        "rm -rf .git",
        "mv .git .g && ln -s /tmp .git",  # symlink replacement
        "echo pwned > .tether/hmac.key",
        "mv .tether .t && mkdir .tether && echo pwned > .tether/hmac.key",
    ]
    for attack in attacks:
        code, out = await sh(sandbox, attack)
        assert code != 0, (attack, out)
    assert (workspace / ".git" / "config").read_text() == "[core]\n"
    assert not (workspace / ".git" / "hooks").exists()
    assert (workspace / ".tether" / "hmac.key").read_text() == "canary-hmac-key-3f9a\n"
    assert sorted(p.name for p in workspace.iterdir()) == [".git", ".tether", "hello.txt"]


async def test_symlinks_planted_in_the_workspace_lead_nowhere(sandbox: Sandbox, workspace: Path, outside: Path) -> None:
    code, out = await sh(sandbox, f"ln -s {outside} out && ln -s / root && echo pwned > out/new")
    assert code != 0, out
    code, out = await sh(sandbox, "cat out/id_rsa; echo pwned > root/canary")
    assert "canary-secret" not in out
    assert not (outside / "new").exists()
    assert not os.path.exists("/canary")


async def test_network_is_unreachable(sandbox: Sandbox, canary_server: Canary) -> None:
    port = canary_server.port
    attempts = [
        f"curl -sS --max-time 2 http://127.0.0.1:{port}/",
        f"exec 3<>/dev/tcp/127.0.0.1/{port}",
        f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2)'",
        f"wget -q -T 2 -O- http://127.0.0.1:{port}/",
        "getent hosts example.com",
        "python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 53), 2)'",
    ]
    for attempt in attempts:
        code, out = await sh(sandbox, attempt)
        assert code != 0, (attempt, out)
    assert canary_server.connections == 0


async def test_network_opt_in_reaches_the_canary(workspace: Path, canary_server: Canary) -> None:
    """Control for the test above: with network=True the same probe connects."""
    sandbox = Sandbox(str(workspace), network=True)
    code, out = await sh(sandbox, f"exec 3<>/dev/tcp/127.0.0.1/{canary_server.port}")
    assert code == 0, out
    assert canary_server.connections == 1


PYTHON_ESCAPES = {
    "ctypes_system": "import ctypes\nctypes.CDLL(None).system(b'{cmd}')",
    "os_system": "import os\nos.system('{cmd}')",
    "importlib_subprocess": ("import importlib\nimportlib.import_module('subprocess').run('{cmd}', shell=True)"),
    "subclasses_walk": (
        "for c in ().__class__.__base__.__subclasses__():\n"
        "    if c.__name__ == '_wrap_close':\n"
        "        c.__init__.__globals__['system']('{cmd}')\n"
        "        break\n"
        "else:\n"
        "    raise SystemExit('os._wrap_close not found')"
    ),
    "builtins_exec": "__builtins__.__dict__['exec'](\"__import__('os').system('{cmd}')\")",
}
CONNECT = (
    "import socket\n"
    "try:\n"
    "    socket.create_connection(('127.0.0.1', {port}), 2)\n"
    "except OSError as exc:\n"
    "    print('no network:', exc)\n"
)


@pytest.mark.parametrize("name", sorted(PYTHON_ESCAPES))
async def test_python_escape_corpus_has_no_host_effect(
    name: str, workspace: Path, outside: Path, canary_server: Canary
) -> None:
    """C.24: the payloads all *run*; the sandbox, not Python, stops their effects."""
    cmd = f"echo pwned > {outside}/{name}; cat {outside}/id_rsa /etc/shadow"
    code = CONNECT.format(port=canary_server.port) + PYTHON_ESCAPES[name].format(cmd=cmd)
    result = await Sandbox(str(workspace)).run(["python3", "-I", "-"], stdin=code.encode())
    output = (result.stdout + result.stderr).decode()
    assert "no network" in output
    assert not (outside / name).exists(), output
    assert "canary-secret" not in output
    assert canary_server.connections == 0


async def test_python_payloads_really_execute(workspace: Path) -> None:
    """Control for the corpus: each payload does run a command inside the sandbox."""
    sandbox = Sandbox(str(workspace))
    for name, payload in PYTHON_ESCAPES.items():
        code = payload.format(cmd=f"echo ran > ran-{name}")
        result = await sandbox.run(["python3", "-I", "-"], stdin=code.encode())
        assert (workspace / f"ran-{name}").read_text() == "ran\n", (name, result)


async def test_environment_is_scrubbed(workspace: Path, monkeypatch: pytest.MonkeyPatch, canary_server: Canary) -> None:
    canaries = {
        "OPENAI_API_KEY": "canary-openai-1111",
        "ANTHROPIC_API_KEY": "canary-anthropic-2222",
        "GITHUB_TOKEN": "canary-github-3333",
        "AWS_SECRET_ACCESS_KEY": "canary-aws-4444",
        "TETHER_HMAC_KEY": "canary-tether-5555",
    }
    for key, value in canaries.items():
        monkeypatch.setenv(key, value)
    allowed = {
        "PATH",
        "HOME",
        "TMPDIR",
        "LANG",
        "TERM",
        "PWD",
        "PYTHONDONTWRITEBYTECODE",
        "SHLVL",
        "_",
    }
    # Every process in the sandbox, bwrap's own init included.
    result = await Sandbox(str(workspace)).run(["bash", "-c", "env; cat /proc/[0-9]*/environ | tr '\\0' '\\n'"])
    out = result.stdout.decode()
    assert "PATH=" in out
    assert [v for v in canaries.values() if v in out] == []
    assert {line.split("=", 1)[0] for line in out.splitlines() if "=" in line} <= allowed
    # The explicit unsafe mode scrubs the command's environment too.
    with pytest.warns(UnsandboxedWarning, match="WITHOUT a sandbox"):
        unsafe = Sandbox(str(workspace), unsafe_no_sandbox=True)
    out = (await unsafe.run(["env"])).stdout.decode()
    assert [v for v in canaries.values() if v in out] == []
    assert {line.split("=", 1)[0] for line in out.splitlines()} <= allowed


async def test_extra_read_only_paths_are_visible_but_not_writable(workspace: Path, outside: Path) -> None:
    sandbox = Sandbox(str(workspace), read_only_paths=(str(outside),))
    code, out = await sh(sandbox, f"cat {outside}/id_rsa && echo pwned > {outside}/id_rsa")
    assert code != 0
    assert out.startswith("canary-secret-7c1e\n") and "Read-only file system" in out
    assert (outside / "id_rsa").read_text() == "canary-secret-7c1e\n"


async def test_tmp_is_private_and_fresh_per_call(sandbox: Sandbox) -> None:
    await sh(sandbox, "echo left > /tmp/leftover")
    code, out = await sh(sandbox, "ls -A /tmp")
    assert code == 0 and "leftover" not in out


async def test_limits_are_visible_inside(workspace: Path) -> None:
    sandbox = Sandbox(str(workspace), limits=SandboxLimits(open_files=100, cpu_seconds=7))
    _, out = await sh(sandbox, "ulimit -n; ulimit -t")
    assert out.split() == ["100", "7"]
