"""Host code is read-only to sandboxed commands (adversarial review, finding A).

The review's attack: tether run in a checkout (the README's quick start) whose
virtualenv and source live in the workspace. A ``shell`` call appended code to
a ``.pth`` file in site-packages and to tether's own ``__init__.py``; the next
``tether`` started ran it, as root. Here a host process whose interpreter,
virtualenv and tether package all live in its workspace has its sandbox try to
write, append, rename, unlink, chmod and replace each of them (and to move the
folders aside and build them again); every attempt fails, the files stay
byte-identical, and starting the host's Python afterwards runs nothing planted.
The host's real installation, outside the workspace, is checked the same way.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import tether
from tether.exceptions import SandboxUnavailable
from tether.toolkits import PathRefused, Sandbox, shell_tool, write_file_tool

from .conftest import call

pytestmark = pytest.mark.sandbox
TETHER_SRC = Path(tether.__file__).parent
DEPENDENCIES = sysconfig.get_paths()["purelib"]  # pydantic and httpx for the host child


def digest(*roots: Path) -> dict[str, str]:
    """Every file and link under ``roots``: its content hash (or link target) and mode."""
    out = {}
    for root in roots:
        for path in sorted([root, *root.rglob("*")]):
            st = path.lstat()
            if path.is_symlink():
                out[str(path)] = f"link {os.readlink(path)}"
            elif path.is_file():
                out[str(path)] = f"{st.st_mode:o} {hashlib.sha256(path.read_bytes()).hexdigest()}"
            else:
                out[str(path)] = f"{st.st_mode:o} dir"
    return out


def attacks(canary: Path, site: str) -> list[list[str]]:
    """Each one argv for the sandbox: the shell ways, then the Python ways."""
    plant = f"import os; os.system('touch {canary}')"
    shell = [
        f"echo {plant!r} >> {site}/host-deps.pth",
        f"echo {plant!r} > {site}/zz-planted.pth",
        f"echo 'open({str(canary)!r}, \"w\")' > {site}/sitecustomize.py",
        f"echo 'open({str(canary)!r}, \"w\")' >> src/tether/__init__.py",
        "mv src/tether/agent.py src/tether/agent.py.bak",
        "rm src/tether/toolkits/_sandbox/holder.py",
        "chmod 777 src/tether/__init__.py",
        "ln -sf /bin/sh envs/main/bin/python",
        f"printf '#!/bin/sh\\ntouch {canary}\\n' > envs/main/bin/tether && chmod +x envs/main/bin/tether",
        "echo 'home = /tmp' > envs/main/pyvenv.cfg",
        f"mv envs envs-old && mkdir -p envs/main && cp -r envs-old/main/. envs/main && echo {plant!r} > {site}/x.pth",
        f"mv src src-old && mkdir -p src/tether && echo 'open({str(canary)!r}, \"w\")' > src/tether/__init__.py",
        "mv envs/main envs/main-old",
        "rm -rf src",
        "touch -d 2001-01-01 src/tether/__init__.py",
    ]
    python = [
        f"open('src/tether/__init__.py', 'a').write('open({str(canary)!r}, \"w\")')",
        f"open('{site}/zz.pth', 'w').write({plant!r})",
        "import os; os.rename('src/tether/run.py', 'src/tether/run.bak')",
        "import os; os.unlink('src/tether/__init__.py')",
        "import os; os.chmod('src/tether/__init__.py', 0o777)",
        "import os; os.link('src/tether/__init__.py', 'hardlink.py')",
        "import os; os.rename('envs', 'envs2')",
        "import os; os.truncate('src/tether/__init__.py', 0)",
    ]
    return [["bash", "-c", c] for c in shell] + [["python3", "-I", "-c", c] for c in python]


CHILD = """
import json, sys, asyncio
import tether
from tether.toolkits import Sandbox
ws, argvs = sys.argv[1], json.loads(sys.argv[2])
assert tether.__file__.startswith(ws + "/"), tether.__file__   # this host runs the workspace's tether
sandbox = Sandbox(ws)
results = [asyncio.run(sandbox.run(argv)) for argv in argvs]
print(json.dumps([[r.exit_code, (r.stdout + r.stderr).decode(errors="replace")] for r in results]))
"""


@pytest.fixture
def hosted(workspace: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A workspace holding the host's virtualenv (two folders down) and tether's source; its python."""
    venv = workspace / "envs" / "main"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    shutil.copytree(TETHER_SRC, workspace / "src" / "tether", ignore=shutil.ignore_patterns("__pycache__"))
    site = Path(subprocess.run(
        [venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip())  # fmt: skip
    (site / "host-deps.pth").write_text(f"{workspace / 'src'}\n{DEPENDENCIES}\n")  # like an editable install
    return venv / "bin" / "python", site


def test_a_host_running_from_the_workspace_cannot_have_its_code_changed(
    workspace: Path, hosted: tuple[Path, Path], open_tmp: Path
) -> None:
    python, site = hosted
    canary = open_tmp / "planted-code-ran"
    code_dirs = (workspace / "envs", workspace / "src")
    before = digest(*code_dirs)
    rel_site = str(site.relative_to(workspace))
    argvs = [*attacks(canary, rel_site), ["bash", "-c", "echo ok > notes.txt && head -c 3 src/tether/__init__.py"]]
    env = {"PATH": os.environ["PATH"], "HOME": str(open_tmp), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [python, "-P", "-c", CHILD, str(workspace), json.dumps(argvs)],
        capture_output=True, text=True, cwd=open_tmp, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    *results, control = json.loads(done.stdout)
    for argv, (code, out) in zip(argvs, results, strict=False):
        assert code != 0, (argv[-1], out)
    assert control == [0, '"""'], control  # the rest of the workspace is the command's to change
    assert digest(*code_dirs) == before
    assert not (workspace / "hardlink.py").exists()
    # What the host runs next runs nothing planted.
    again = subprocess.run([python, "-P", "-c", "import tether.toolkits"], cwd=open_tmp, env=env, capture_output=True)
    assert again.returncode == 0, again.stderr
    assert not canary.exists()


async def test_the_hosts_own_installation_cannot_be_changed_from_a_command(workspace: Path, open_tmp: Path) -> None:
    canary = open_tmp / "planted-code-ran"
    targets = {  # where this host's code lives (outside the workspace here)
        "site": Path(DEPENDENCIES),
        "tether": TETHER_SRC,
        "bin": Path(sys.executable).parent,
        "stdlib": Path(os.__file__).parent,
    }
    before = {name: (sorted(p.name for p in d.iterdir()), digest(d / "__init__.py") if (d / "__init__.py").exists() else {})
              for name, d in targets.items()}  # fmt: skip
    sandbox = Sandbox(str(workspace))
    for name, d in targets.items():
        for attack in (
            f"echo 'import os; os.system(\"touch {canary}\")' > {d}/zz-planted.pth",
            f"echo x >> {d}/__init__.py",
            f"mv {d}/__init__.py {d}/x.py",
            f"rm {d}/__init__.py",
            f"chmod 777 {d}",
            f"ln -s /tmp {d}/zz-link",
        ):
            result = await sandbox.run(["bash", "-c", attack])
            assert result.exit_code != 0, (name, attack, result)
        result = await sandbox.run(["python3", "-I", "-c", f"open({str(d / 'zz.py')!r}, 'w').write('x')"])
        assert result.exit_code != 0, (name, result)
    after = {name: (sorted(p.name for p in d.iterdir()), digest(d / "__init__.py") if (d / "__init__.py").exists() else {})
             for name, d in targets.items()}  # fmt: skip
    assert after == before
    assert not canary.exists()


async def test_a_workspace_on_the_import_path_runs_no_command(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sandbox = Sandbox(str(workspace))
    monkeypatch.syspath_prepend(str(workspace))
    with pytest.raises(SandboxUnavailable, match="is on this process's import or program path"):
        await sandbox.run(["true"])
    with pytest.raises(SandboxUnavailable, match="is on this process's import or program path"):
        shell_tool(sandbox)
    with pytest.raises(PathRefused, match=r"writes are refused: the workspace .* is on this process's import"):
        await call(write_file_tool(str(workspace), approval=False), path="json.py", content="x")
    assert not (workspace / "json.py").exists()


async def test_program_and_import_directories_in_the_workspace_are_read_only(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "tools" / "bin").mkdir(parents=True)
    (workspace / "lib").mkdir()
    monkeypatch.setenv("PATH", f"{workspace / 'tools' / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setattr(sys, "path", [*sys.path, str(workspace / "lib")])
    sandbox = Sandbox(str(workspace))
    for attack in (
        "printf '#!/bin/sh\\nexit 0\\n' > tools/bin/bwrap",  # tether finds its helpers on PATH
        "echo x > lib/sitecustomize.py",
        "mv tools tools2 && mkdir -p tools/bin && echo x > tools/bin/bash",
        "rmdir tools/bin",
    ):
        result = await sandbox.run(["bash", "-c", attack])
        assert result.exit_code != 0, (attack, result)
    assert sorted(p.name for p in workspace.iterdir()) == [".git", ".tether", "hello.txt", "lib", "tools"]
    assert list((workspace / "tools" / "bin").iterdir()) == [] and list((workspace / "lib").iterdir()) == []
    ok = await sandbox.run(["bash", "-c", "echo fine > tools/notes.txt"])  # pinned, not read-only
    assert ok.ok, ok
    write = write_file_tool(str(workspace), approval=False)
    for path in ("lib/evil.py", "tools/bin/bash"):
        with pytest.raises(PathRefused, match=f"path {path!r} is code the tether process imports or runs"):
            await call(write, path=path, content="x")
    monkeypatch.setattr(sys, "path", [*sys.path, str(workspace / "not-yet")])  # a command could create it
    with pytest.raises(SandboxUnavailable, match="does not exist: a command could create it"):
        await sandbox.run(["true"])
