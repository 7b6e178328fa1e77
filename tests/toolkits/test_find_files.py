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


def test_a_bare_name_pattern_counts_every_folder_and_says_where(tree: Path) -> None:
    find = find_files_tool(str(tree))
    assert _call(find, pattern="*.py") == (
        "6 files match '*.py': 3 at the top level, 3 in src/. a.py, b.py, c.py, src/app.py, src/cli.py, src/deep/x.py"
    )
    assert _call(find, pattern="**/*.py") == _call(find, pattern="*.py").replace("'*.py'", "'**/*.py'")
    assert _call(find, pattern="notes.tx?") == "1 file match 'notes.tx?': at the top level. notes.txt"


def test_a_pattern_with_a_slash_is_a_path_from_the_root(tree: Path) -> None:
    find = find_files_tool(str(tree))
    assert _call(find, pattern="./*.py") == "3 files match './*.py': all at the top level. a.py, b.py, c.py"
    assert _call(find, pattern="src/*.py") == "2 files match 'src/*.py': 2 in src/. src/app.py, src/cli.py"
    assert _call(find, pattern="src/**/*.py") == (
        "3 files match 'src/**/*.py': 3 in src/. src/app.py, src/cli.py, src/deep/x.py"
    )


def test_an_empty_folder_says_nothing_matches_anywhere(tmp_path: Path) -> None:
    find = find_files_tool(str(tmp_path))
    assert _call(find, pattern="*.py") == "0 files match '*.py' in this folder or any folder below it"
    assert _call(find, pattern="src/*.py") == "0 files match 'src/*.py'"


def test_a_flat_folder_says_they_are_all_at_the_top_level(tmp_path: Path) -> None:
    for name in ("a.py", "b.py", "notes.txt"):
        (tmp_path / name).write_text("x")
    out = _call(find_files_tool(str(tmp_path)), pattern="*.py")
    assert out == "2 files match '*.py': all at the top level. a.py, b.py"


def test_a_deep_repository_is_counted_per_top_level_folder_within_bounds(tmp_path: Path) -> None:
    layout = {"src/tether/providers": 80, "tests/local": 50, "bench": 4, "": 2}
    layout |= {f"pkg{i}/mod": 1 for i in range(10)}
    for folder, n in layout.items():
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            (tmp_path / folder / f"m{i}.py").write_text("x")
    venv = tmp_path / ".venv" / "lib" / "site"
    venv.mkdir(parents=True)
    (tmp_path / ".venv" / "pyvenv.cfg").write_text("home = /usr\n")
    for i in range(3000):
        (venv / f"dep{i}.py").write_text("x")
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / "x.py").write_text("x")
    out = _call(find_files_tool(str(tmp_path)), pattern="*.py")
    head, rest = out.split(". ", 1)
    assert head == (
        "146 files match '*.py': 80 in src/, 50 in tests/, 4 in bench/, 2 at the top level, "
        "1 in pkg0/, 1 in pkg1/, 1 in pkg2/, 1 in pkg3/, 6 in 6 other folders"
    )
    assert rest.split(" [...")[0].count(", ") == 39 and rest.endswith(
        "[... 106 more] (not searched: .venv/, node_modules/)"
    )
    assert len(out) < 2000  # the model's context is not flooded


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
    assert out == "5 files match '*.txt': all at the top level. f0.txt, f1.txt [... 3 more]"


def test_glob_regex() -> None:
    assert _glob_regex("**/a/*.py").fullmatch("a/b.py")
    assert _glob_regex("**/a/*.py").fullmatch("x/y/a/b.py")
    assert not _glob_regex("*.py").fullmatch("src/b.py")
    assert not _glob_regex("a.py").fullmatch("aXpy")
