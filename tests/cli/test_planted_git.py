"""Git repositories an agent plants run nothing on the host (adversarial review, finding E).

A sandboxed ``shell`` call may create ``.git`` directories (and ``.git`` files
pointing elsewhere) with every setting that makes ``git`` run a program:
``core.fsmonitor``, ``core.hooksPath`` and hooks, ``core.sshCommand``,
``core.pager``, ``core.editor``, ``diff.external``, filters, aliases, credential
helpers. Here the agent plants them through the real command line (pause,
approve, resume), then every command that reads or shows the workspace runs
(``run`` with the file tools, ``runs``, ``show``, ``resume --all``). A ``git`` on
``PATH`` that logs its calls shows tether never runs git on the host, and a
canary outside the workspace shows no planted program ran. The control: the
operator's own ``git status`` afterwards does run the plant.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tether.toolkits import Sandbox, file_tools
from tether.tools import Invocation, Tool

pytestmark = pytest.mark.sandbox


async def call(tool: Tool, **args: object) -> object:
    return await tool.invoke(tool.validate(dict(args)), Invocation(run_id="r", call_id="c", tool_name=tool.name))


def plant(ws: Path, canary: Path) -> str:
    """A shell command for the sandbox: three repositories, each set to run ``touch CANARY`` every way."""
    run = f"touch {canary}"
    settings = {
        "core.fsmonitor": run,
        "core.hooksPath": str(ws / "evil-hooks"),
        "core.sshCommand": run,
        "core.pager": run,
        "core.editor": run,
        "core.askPass": run,
        "diff.external": run,
        "filter.x.clean": run,
        "filter.x.smudge": run,
        "filter.x.process": run,
        "alias.st": f"!{run}",
        "credential.helper": f"!{run}",
        "sequence.editor": run,
    }
    configure = " && ".join(f"git -C $r config {key} '{value}'" for key, value in settings.items())
    hooks = ["pre-commit", "post-checkout", "post-index-change", "reference-transaction", "fsmonitor-watchman"]
    lines = [
        "set -e",
        "git init -q . && git init -q sub && mkdir -p linked evil-hooks && git init -q --bare elsewhere.git",
        "echo 'gitdir: ../elsewhere.git' > linked/.git",
        f"for r in . sub elsewhere.git; do {configure}; done",
        *(f"printf '#!/bin/sh\\n{run}\\n' > evil-hooks/{h} && cp evil-hooks/{h} .git/hooks/{h}" for h in hooks),
        "chmod +x evil-hooks/* .git/hooks/*",
        "echo '* filter=x diff=x' > .gitattributes && cp .gitattributes sub/",
        "echo planted",
    ]
    return "\n".join(lines)


@pytest.fixture
def logged_git(tmp_path: Path) -> tuple[Path, Path]:
    """A ``git`` first on PATH that logs every call before running the real one: (its folder, the log)."""
    shim, log = tmp_path / "shim", tmp_path / "git-calls.log"
    shim.mkdir()
    (shim / "git").write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec /usr/bin/git "$@"\n')
    (shim / "git").chmod(0o755)
    return shim, log


def test_planted_repositories_run_nothing_through_any_command(
    tether, script, ws: Path, logged_git: tuple[Path, Path], tmp_path: Path
) -> None:
    shim, log = logged_git
    canary = tmp_path / "planted-git-code-ran"  # outside the workspace: only the host can make it
    env = {"PATH": f"{shim}:{os.environ['PATH']}"}
    model = script([{"tool": "shell", "args": {"command": plant(ws, canary)}}, "planted"])
    paused = tether("run", "plant", "--model", model, env=env)
    assert paused.code == 3, paused.err
    rid = next(w for w in paused.err.split() if len(w) == 32 and all(c in "0123456789abcdef" for c in w))
    assert tether("approve", rid, env=env).code == 0
    resumed = tether("resume", rid, env=env)
    assert resumed.code == 0 and "planted" in resumed.out, resumed.out + resumed.err
    assert (ws / ".git" / "config").read_text().count(str(canary)) >= 10  # the plant is there

    reads = [
        {"tool": "read_file", "args": {"path": ".git/config"}},
        {"tool": "list_dir", "args": {"path": "sub"}},
        {"tool": "find_files", "args": {"pattern": "**/*"}},
        {"tool": "read_file", "args": {"path": "linked/.git"}},
        "looked",
    ]
    looked = tether("run", "look around", "--model", script(reads), env=env)
    assert looked.code == 0, looked.err
    for args in (["runs"], ["show", rid], ["resume", "--all"]):
        done = tether(*args, env=env)
        assert done.code in (0, 1, 2), (args, done.err)
    assert not canary.exists(), "a planted git setting ran on the host"
    assert not log.exists(), f"tether ran git on the host: {log.read_text()}"
    # Control: the operator's own git in that folder does run the plant.
    subprocess.run(["git", "-C", str(ws), "status"], capture_output=True, env={**os.environ, "HOME": str(tmp_path)})
    assert canary.exists()


async def test_the_toolkit_runs_no_git_on_the_host(
    tmp_path: Path, logged_git: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    shim, log = logged_git
    monkeypatch.setenv("PATH", f"{shim}:{os.environ['PATH']}")
    canary = tmp_path / "planted-git-code-ran"
    workspace = tmp_path / "tool-ws"
    workspace.mkdir()
    sandbox = Sandbox(str(workspace))
    planted = await sandbox.run(["bash", "-c", plant(workspace, canary)])
    assert planted.stdout == b"planted\n", planted
    again = await sandbox.run(["bash", "-c", "git status --short >/dev/null; echo ok > after.txt"])
    assert again.ok, again  # the scan, the mounts and the limits of the next command
    read, write, edit, listing, find = file_tools(str(workspace), approval=False)
    await call(read, path=".git/config")
    await call(write, path="notes.txt", content="x\n")
    await call(edit, path="notes.txt", old="x", new="y")
    await call(listing, path="sub")
    await call(find, pattern="**/*")
    assert not canary.exists()
    assert not log.exists(), log.read_text()
