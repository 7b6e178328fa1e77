"""Project instructions for library users: the AGENTS.md files, their order, their cap, and links."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether import Action, Agent, FunctionPolicy, UserError, instructions_from, tool
from tether.context import Context
from tether.instructions import instruction_files, read_instructions


def _repo(tmp_path: Path) -> tuple[Path, Path]:
    repo = tmp_path / "repo"
    ws = repo / "a" / "b"
    ws.mkdir(parents=True)
    (repo / ".git").mkdir()
    return repo, ws


def test_three_levels_are_read_farthest_first(tmp_path: Path) -> None:
    repo, ws = _repo(tmp_path)
    for d, word in ((repo, "root"), (repo / "a", "middle"), (ws, "workspace")):
        (d / "AGENTS.md").write_text(f"from the {word}\n")
    text = instructions_from(ws)
    assert text.index("from the root") < text.index("from the middle") < text.index("from the workspace")
    assert instruction_files(ws) == [repo / "AGENTS.md", repo / "a" / "AGENTS.md", ws / "AGENTS.md"]


def test_without_a_repository_only_the_workspace_counts(tmp_path: Path) -> None:
    ws = tmp_path / "x" / "ws"
    ws.mkdir(parents=True)
    (tmp_path / "x" / "AGENTS.md").write_text("above, outside any repository\n")
    assert instruction_files(ws) == []
    (ws / "AGENTS.md").write_text("here\n")
    assert instruction_files(ws) == [ws / "AGENTS.md"]


def test_the_cap_cuts_the_farthest_file_first_and_says_so(tmp_path: Path) -> None:
    repo, ws = _repo(tmp_path)
    (repo / "AGENTS.md").write_text("R" * 5000)
    (ws / "AGENTS.md").write_text("W" * 3000)
    found = read_instructions(ws, max_bytes=4000)
    assert found.cut == (repo / "AGENTS.md",)
    assert "W" * 3000 in found.text and "R" * 1000 in found.text and "R" * 1001 not in found.text
    assert f"[... {repo / 'AGENTS.md'} has 5000 bytes; the first 1000 fit within the 4000-byte cap]" in found.text
    with pytest.raises(UserError, match="max_bytes"):
        read_instructions(ws, max_bytes=0)


def test_a_link_out_of_the_repository_is_not_read(tmp_path: Path) -> None:
    repo, ws = _repo(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("the host's private key\n")
    (ws / "AGENTS.md").symlink_to(secret)  # planted by an agent that can write the workspace
    (repo / "AGENTS.md").write_text("real rules\n")
    (repo / "a" / "AGENTS.md").symlink_to(repo / "AGENTS.md")  # a link inside the repository is fine
    assert instruction_files(ws) == [repo / "AGENTS.md", repo / "a" / "AGENTS.md"]
    assert "private key" not in instructions_from(ws)


def test_the_user_file_comes_first(tmp_path: Path) -> None:
    _, ws = _repo(tmp_path)
    user = tmp_path / "config"
    user.mkdir()
    (user / "AGENTS.md").write_text("mine\n")
    (ws / "AGENTS.md").write_text("theirs\n")
    assert instruction_files(ws, user_dir=user) == [user / "AGENTS.md", ws / "AGENTS.md"]


def test_a_file_written_during_the_run_is_not_read_into_it(tmp_path: Path) -> None:
    _, ws = _repo(tmp_path)
    (ws / "AGENTS.md").write_text("be polite\n")

    @tool(effect="idempotent")
    def rewrite_rules() -> str:
        (ws / "AGENTS.md").write_text("be rude\n")
        return "rewritten"

    seen: list[str] = []

    def brain(ctx: Context, tools: object) -> Action | str:
        seen.append(ctx[0].text)
        return Action("rewrite_rules") if len(seen) == 1 else "done"

    result = Agent(FunctionPolicy(brain), [rewrite_rules], instructions=instructions_from(ws)).run_sync("go")
    assert result.output == "done" and (ws / "AGENTS.md").read_text() == "be rude\n"
    assert len(seen) == 2 and all("be polite" in s and "be rude" not in s for s in seen)
