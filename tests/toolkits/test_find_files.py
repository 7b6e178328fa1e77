"""find_files counts for the model, stays in the workspace and follows no links."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tether.toolkits import PathRefused, find_files_tool
from tether.toolkits.files import _glob_regex


def _call(tool, **args) -> str:
    import asyncio

    from tether import Invocation

    return asyncio.run(tool.invoke(tool.validate(args), Invocation("r", "c", tool.name)))


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for rel in [
        "a.py",
        "b.py",
        "c.py",
        "notes.txt",
        "src/app.py",
        "src/cli.py",
        "src/deep/x.py",
        ".git/hooks/h.py",
        ".tether/secret.py",
    ]:
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("x")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "leak.py").write_text("x")
    os.symlink(outside, tmp_path / "link_dir")
    os.symlink(outside / "leak.py", tmp_path / "link.py")
    return tmp_path


def test_top_level_recursive_and_folder_patterns(tree: Path) -> None:
    find = find_files_tool(str(tree))
    assert _call(find, pattern="*.py") == "3 files match '*.py': a.py, b.py, c.py"
    assert _call(find, pattern="**/*.py") == (
        "6 files match '**/*.py': a.py, b.py, c.py, src/app.py, src/cli.py, src/deep/x.py"
    )
    assert _call(find, pattern="src/*.py") == "2 files match 'src/*.py': src/app.py, src/cli.py"
    assert _call(find, pattern="*.md") == "0 files match '*.md'"
    assert _call(find, pattern="notes.tx?") == "1 file match 'notes.tx?': notes.txt"


def test_links_hidden_and_escaping_patterns_are_not_followed(tree: Path) -> None:
    find = find_files_tool(str(tree))
    everything = _call(find, pattern="**")
    assert "leak.py" not in everything and "link" not in everything
    assert ".git" not in everything and ".tether" not in everything
    for bad in ["../*.py", "/etc/*", ""]:
        with pytest.raises(PathRefused):
            _call(find, pattern=bad)


def test_long_results_are_capped(tmp_path: Path) -> None:
    for i in range(5):
        (tmp_path / f"f{i}.txt").write_text("x")
    out = _call(find_files_tool(str(tmp_path), max_names=2), pattern="*.txt")
    assert out == "5 files match '*.txt': f0.txt, f1.txt [... 3 more]"


def test_glob_regex() -> None:
    assert _glob_regex("**/a/*.py").fullmatch("a/b.py")
    assert _glob_regex("**/a/*.py").fullmatch("x/y/a/b.py")
    assert not _glob_regex("*.py").fullmatch("src/b.py")
    assert not _glob_regex("a.py").fullmatch("aXpy")
