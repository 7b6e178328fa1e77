"""Project instructions: the ``AGENTS.md`` files a run starts with.

Coding agents share a project's operating rules in ``AGENTS.md`` files: how to
build and test, conventions, what not to touch. :func:`instruction_files`
finds them: the user's own (in a configuration directory you name), then one
per directory from the repository root (the nearest directory above the
workspace that holds ``.git``) down to the workspace. Nearer files come later,
so where two disagree the nearer one wins. Without a repository, only the
workspace's own file counts.

:func:`instructions_from` reads them into one text for ``Agent(instructions=...)``,
each file under a line naming it, within a size cap: when they are too large
together, the farthest files are cut first and the cut is said in the text.
The text is read once, when you call it: a run keeps it in its first note (the
``run-started`` event), so a file the agent writes during the run is not read
into that run, and a replay or a resume sees exactly what the model saw.

>>> import pathlib, tempfile
>>> repo = pathlib.Path(tempfile.mkdtemp())
>>> (repo / ".git").mkdir(); (repo / "app").mkdir()
>>> _ = (repo / "AGENTS.md").write_text("Run the tests with make test.")
>>> _ = (repo / "app" / "AGENTS.md").write_text("This app uses tabs.")
>>> [p.relative_to(repo).as_posix() for p in instruction_files(repo / "app")]
['AGENTS.md', 'app/AGENTS.md']
>>> print(instructions_from(repo / "app").replace(str(repo), "REPO"))
Project instructions (from AGENTS.md files; where two disagree, the later one wins):
<BLANKLINE>
--- REPO/AGENTS.md ---
Run the tests with make test.
<BLANKLINE>
--- REPO/app/AGENTS.md ---
This app uses tabs.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .exceptions import UserError

if TYPE_CHECKING:
    from pathlib import Path  # imported where it is used, so that `import tether` stays light

__all__ = [
    "FILE_NAME",
    "LEAD",
    "MAX_BYTES",
    "ProjectInstructions",
    "instruction_files",
    "instructions_from",
    "read_instructions",
]

FILE_NAME = "AGENTS.md"
MAX_BYTES = 32_768
"""The default cap on the instructions' text, all files together (UTF-8 bytes)."""

LEAD = "Project instructions (from AGENTS.md files; where two disagree, the later one wins):"


@dataclass(frozen=True, slots=True)
class ProjectInstructions:
    """What :func:`read_instructions` found: the ``text`` for the model, the ``files`` it read
    (farthest first) and those of them that the cap ``cut`` short or left out."""

    text: str
    files: tuple[Path, ...]
    cut: tuple[Path, ...] = ()


def instruction_files(
    workspace: str | os.PathLike[str], *, user_dir: str | os.PathLike[str] | None = None
) -> list[Path]:
    """The ``AGENTS.md`` files for ``workspace``, farthest first: ``user_dir``'s, then the
    repository root's down to the workspace's. Only regular files count; a symbolic link counts
    only when it points inside the repository (or ``user_dir``), so a link planted in the
    workspace cannot pull a private file of the host into the prompt."""
    from pathlib import Path

    ws = Path(workspace).expanduser().resolve()
    if not ws.is_dir():
        raise UserError(f"workspace {str(ws)!r} is not a directory")
    dirs = [ws]
    if not (ws / ".git").exists():
        for parent in ws.parents:
            dirs.append(parent)
            if (parent / ".git").exists():
                break
        else:
            dirs = [ws]  # no repository above: the workspace alone
    found: list[Path] = []
    if user_dir is not None:
        home = Path(user_dir).expanduser().resolve()
        found += [p for p in [home / FILE_NAME] if _regular_within(p, home)]
    root = dirs[-1]
    found += [p for d in reversed(dirs) if _regular_within(p := d / FILE_NAME, root) and p not in found]
    return found


def read_instructions(
    workspace: str | os.PathLike[str],
    *,
    user_dir: str | os.PathLike[str] | None = None,
    max_bytes: int = MAX_BYTES,
) -> ProjectInstructions:
    """The ``AGENTS.md`` files for ``workspace`` read into one text of at most about ``max_bytes``.

    The budget goes to the nearest file first, so a cut falls on the farthest ones.
    """
    if not (isinstance(max_bytes, int) and max_bytes > 0):
        raise UserError(f"max_bytes must be a positive number of bytes, got {max_bytes!r}")
    files = instruction_files(workspace, user_dir=user_dir)
    left, parts, cut = max_bytes, [], []
    for path in reversed(files):  # nearest first: it gets the budget first
        with open(os.path.realpath(path), "rb") as f:  # never more than the budget, however large the file
            kept, size = f.read(left), os.fstat(f.fileno()).st_size
        left -= len(kept)
        text = kept.decode("utf-8", errors="ignore" if len(kept) < size else "replace").strip()
        if len(kept) < size:
            cut.append(path)
            text += f"\n[... {path} has {size} bytes; the first {len(kept)} fit within the {max_bytes}-byte cap]"
        parts.append(f"--- {path} ---\n{text}")
    if not parts:
        return ProjectInstructions("", ())
    text = "\n\n".join([LEAD, *reversed(parts)])
    return ProjectInstructions(text, tuple(files), tuple(reversed(cut)))


def instructions_from(
    workspace: str | os.PathLike[str],
    *,
    user_dir: str | os.PathLike[str] | None = None,
    max_bytes: int = MAX_BYTES,
) -> str:
    """The project instructions for ``workspace`` as one text (empty when there is no ``AGENTS.md``).

    Use it as an agent's instructions, or beside your own:
    ``Agent(model, tools, instructions=my_rules + "\\n\\n" + instructions_from("."))``.
    """
    return read_instructions(workspace, user_dir=user_dir, max_bytes=max_bytes).text


def _regular_within(path: Path, root: Path) -> bool:
    from pathlib import Path

    try:
        real = Path(os.path.realpath(path))
        return stat.S_ISREG(os.stat(real).st_mode) and (real == root or root in real.parents)
    except OSError:
        return False
