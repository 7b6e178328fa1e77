"""Path confinement for the file tools (no sandbox needed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.toolkits import PathRefused, Workspace


def test_relative_paths_inside_are_normalised(workspace: Path) -> None:
    ws = Workspace(str(workspace))
    assert ws.relative("hello.txt") == "hello.txt"
    assert ws.relative("./a/../hello.txt") == "hello.txt"
    assert ws.relative(str(workspace / "hello.txt")) == "hello.txt"
    assert ws.relative(".") == "."


@pytest.mark.parametrize("path", ["..", "../outside/id_rsa", "/etc/passwd", "a/../../x", "/"])
def test_paths_leaving_the_workspace_are_refused(workspace: Path, path: str) -> None:
    with pytest.raises(PathRefused, match="outside the workspace"):
        Workspace(str(workspace)).relative(path)


def test_symlink_leaving_the_workspace_is_refused(workspace: Path, outside: Path) -> None:
    (workspace / "out").symlink_to(outside)
    (workspace / "key").symlink_to(outside / "id_rsa")
    (workspace / "dangling").symlink_to(outside / "missing")
    ws = Workspace(str(workspace))
    for path in ("out/id_rsa", "key", "dangling", "out"):
        with pytest.raises(PathRefused, match="outside the workspace"):
            ws.relative(path)


def test_symlink_inside_the_workspace_is_followed(workspace: Path) -> None:
    (workspace / "docs").mkdir()
    (workspace / "link").symlink_to("docs")
    assert Workspace(str(workspace)).relative("link/readme.md") == "docs/readme.md"


def test_workspace_given_through_a_symlink_is_resolved(workspace: Path, tmp_path: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(workspace)
    ws = Workspace(str(alias))
    assert ws.root == str(workspace)
    assert ws.relative(str(alias / "hello.txt")) == "hello.txt"


def test_git_is_read_only_and_tether_hidden(workspace: Path) -> None:
    ws = Workspace(str(workspace))
    assert ws.relative(".git/config") == ".git/config"
    with pytest.raises(PathRefused, match="read-only"):
        ws.relative(".git/hooks/pre-commit", write=True)
    with pytest.raises(PathRefused, match="may not access"):
        ws.relative(".tether/hmac.key")
    with pytest.raises(PathRefused, match="read-only"):
        ws.relative(".", write=True)


def test_empty_and_nul_paths_are_refused(workspace: Path) -> None:
    for path in ("", "a\x00b"):
        with pytest.raises(PathRefused, match="NUL"):
            Workspace(str(workspace)).relative(path)


def test_swapping_a_directory_for_a_symlink_after_the_check_is_caught(workspace: Path, outside: Path) -> None:
    """The open walks the resolved path with O_NOFOLLOW, so a swap after resolving fails."""
    (workspace / "sub").mkdir()
    ws = Workspace(str(workspace))
    rel = ws.relative("sub/id_rsa")
    os.rmdir(workspace / "sub")
    (workspace / "sub").symlink_to(outside)
    with pytest.raises(PathRefused, match="symbolic link"), ws._parent_fd(rel):
        pass


def test_writes_create_parents_and_replace_atomically(workspace: Path) -> None:
    ws = Workspace(str(workspace))
    assert ws.write_bytes("a/b/c.txt", b"one") is True
    assert ws.write_bytes("a/b/c.txt", b"two") is False
    assert (workspace / "a/b/c.txt").read_bytes() == b"two"
    assert [p.name for p in (workspace / "a/b").iterdir()] == ["c.txt"]  # no temp files left


def test_write_through_final_symlink_outside_is_refused(workspace: Path, outside: Path) -> None:
    (workspace / "evil").symlink_to(outside / "id_rsa")
    with pytest.raises(PathRefused):
        Workspace(str(workspace)).write_bytes("evil", b"pwned")
    assert (outside / "id_rsa").read_text() == "canary-secret-7c1e\n"


def test_listing_leaves_out_hidden_entries(workspace: Path) -> None:
    names = [entry.name for entry in Workspace(str(workspace)).list(".")]
    assert names == [".git", "hello.txt"]


_segments = st.sampled_from(["..", ".", "a", "b", "out", "in", "/", "", "hello.txt"])


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(_segments, max_size=6))
def test_no_path_resolves_outside_the_workspace(tmp_path_factory: pytest.TempPathFactory, parts: list[str]) -> None:
    root = tmp_path_factory.getbasetemp() / "prop"
    if not root.exists():
        (root / "ws" / "a").mkdir(parents=True)
        (root / "secret").mkdir()
        (root / "ws" / "out").symlink_to(root / "secret")
        (root / "ws" / "in").symlink_to("a")
    ws = Workspace(str(root / "ws"))
    path = "/".join(parts) or "."
    try:
        rel = ws.relative(path)
    except PathRefused:
        return
    real = os.path.realpath(os.path.join(ws.root, rel))
    assert real == ws.root or real.startswith(ws.root + "/")
