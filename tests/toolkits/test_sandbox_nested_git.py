"""Every `.git` in the workspace is read-only to sandboxed commands (issue 9, item 3).

The review's attack: a nested repository (``vendored/.git``) got a hook and a
``core.fsmonitor`` from a sandboxed command, and a later host ``git status`` in
that folder ran both. Here the same commands fail, and the host ``git status``
runs nothing. A ``.git`` a command creates is the agent's own; it is protected
from the next command on.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tether.toolkits import Sandbox

pytestmark = pytest.mark.sandbox


@pytest.fixture
def vendored(workspace: Path) -> Path:
    repo = workspace / "vendored"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (workspace / "deep" / "er").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(workspace / "deep" / "er")], check=True)
    (workspace / "sub").mkdir()
    (workspace / "sub" / ".git").write_text("gitdir: ../.git/modules/sub\n")
    return repo


async def sh(sandbox: Sandbox, command: str) -> tuple[int, str]:
    result = await sandbox.run(["bash", "-c", command])
    return result.exit_code, (result.stdout + result.stderr).decode(errors="replace")


def host_git_status(repo: Path, canary: Path) -> None:
    """What the operator runs later; hooks and fsmonitor would touch ``canary``."""
    subprocess.run(["git", "-C", str(repo), "status", "--short"], capture_output=True, check=False)
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "x"], capture_output=True)
    assert not canary.exists(), "a planted hook or fsmonitor ran on the host"


async def test_a_nested_repository_cannot_be_given_hooks_or_fsmonitor(
    workspace: Path, vendored: Path, open_tmp: Path
) -> None:
    canary = open_tmp / "ran"
    config = (vendored / ".git" / "config").read_text()
    attacks = [
        f"printf '[core]\\n\\tfsmonitor = touch {canary}\\n' >> vendored/.git/config",
        f"git -C vendored config core.fsmonitor 'touch {canary}'",
        f"printf '#!/bin/sh\\ntouch {canary}\\n' > vendored/.git/hooks/pre-commit && chmod +x vendored/.git/hooks/pre-commit",
        f"git -C deep/er config core.hooksPath /tmp; echo 'touch {canary}' > deep/er/.git/hooks/post-commit",
        "echo 'gitdir: /tmp/elsewhere' > sub/.git",
        "mv vendored/.git vendored/git-old",
        "rm -rf vendored/.git deep/er/.git",
        "mv vendored/.git/config vendored/.git/config.old",
    ]
    sandbox = Sandbox(str(workspace))
    for attack in attacks:
        code, out = await sh(sandbox, attack)
        assert code != 0, (attack, out)
    assert (vendored / ".git" / "config").read_text() == config
    assert not (vendored / ".git" / "hooks" / "pre-commit").exists()
    assert (workspace / "sub" / ".git").read_text() == "gitdir: ../.git/modules/sub\n"
    host_git_status(vendored, canary)
    host_git_status(workspace / "deep" / "er", canary)
    # Control: the rest of the nested repository's folder is the agent's to change.
    code, out = await sh(sandbox, "echo code > vendored/lib.py && cat vendored/.git/HEAD")
    assert code == 0 and out.startswith("ref: refs/heads/"), out


async def test_the_folder_of_a_repository_cannot_be_moved_or_removed(workspace: Path, vendored: Path) -> None:
    """Pinned in place: moved aside, a repository could be hidden from the walk before a parallel command."""
    config = (vendored / ".git" / "config").read_text()
    for attack in ("mv vendored v2 && echo '[core]' >> v2/.git/config", "mv deep deep2", "rmdir deep/er/.git"):
        code, out = await sh(Sandbox(str(workspace)), attack)
        assert code != 0 and "busy" in out, (attack, out)
    code, out = await sh(Sandbox(str(workspace)), "rm -rf deep/er")
    assert code != 0, out
    assert (vendored / ".git" / "config").read_text() == config
    assert not (workspace / "v2").exists() and (workspace / "deep" / "er" / ".git" / "config").exists()
    code, out = await sh(Sandbox(str(workspace)), "echo x > vendored/new.py && rm vendored/new.py")
    assert code == 0, out  # pinned, not read-only


async def test_a_git_made_by_one_command_is_read_only_to_the_next(workspace: Path, open_tmp: Path) -> None:
    """What holds for repositories the agent makes: from the next command on, like any other."""
    sandbox = Sandbox(str(workspace))
    code, out = await sh(
        sandbox, "git init -q made && mkdir -p x/.git/hooks && mkdir foo && echo '[core]' > foo/config"
    )
    assert code == 0, out
    code, out = await sh(sandbox, "mv foo y.git && mkdir y && mv y.git y/.git")  # a rename makes a .git too
    assert code == 0, out
    for attack in (
        "echo '[core]' >> made/.git/config",
        f"echo 'touch {open_tmp}/ran' > x/.git/hooks/pre-commit",
        "echo '[core]' >> y/.git/config",
        "rm -rf made/.git",
    ):
        code, out = await sh(sandbox, attack)
        assert code != 0, (attack, out)
    assert not (workspace / "x" / ".git" / "hooks" / "pre-commit").exists()
    assert (workspace / "y" / ".git" / "config").read_text() == "[core]\n"
