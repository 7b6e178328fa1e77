"""Skills: folders of instructions and files that an agent loads only when a task needs them.

A skill is a folder with a ``SKILL.md``: front matter that gives its ``name``
and ``description``, then the instructions themselves, and beside them any
files the instructions use (scripts, references, templates)::

    pdf-forms/
      SKILL.md          ---
                        name: pdf-forms
                        description: Fill in PDF forms. Use when the user gives a form to complete.
                        ---
                        To fill a form, run scripts/fill.py ...
      scripts/fill.py

``Agent(model, tools, skills=["skills/"])`` takes skill folders, or folders of
them. Only each skill's name and description go into the agent's instructions;
a ``load_skill`` tool returns a skill's instructions and lists its files when
the model decides it needs them, and reads one of those files on request. It
never runs anything: a skill's scripts run only through the tools the agent
has, such as the sandboxed ``shell`` and ``python`` of :mod:`tether.toolkits`.

The front matter is read by a small strict parser of ``key: value`` lines (a
value may be quoted; a key with no value takes indented ``key: value`` lines,
as ``metadata:`` does), not by a YAML library: anything it cannot read for
certain is an error that names the file and the line, never a guess.

>>> import pathlib, tempfile
>>> folder = pathlib.Path(tempfile.mkdtemp()) / "greet"
>>> folder.mkdir()
>>> text = "---\\nname: greet\\ndescription: Greet people warmly.\\n---\\nSay hello first.\\n"
>>> _ = (folder / "SKILL.md").write_text(text)
>>> skills = skill_set([folder])
>>> print(skills.index())
Skills: each is a folder of instructions (and files) for one kind of task. When a task fits a skill's \
description, call load_skill with its name first and follow what it says.
- greet: Greet people warmly.
>>> [t.name for t in skills.tools]
['load_skill']
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .exceptions import UserError
from .tools import Invocation, Tool, tool

if TYPE_CHECKING:
    from pathlib import Path  # imported where it is used, so that `import tether` stays light

__all__ = ["INDEX_HEAD", "SKILL_FILE", "Skill", "SkillFolder", "SkillSet", "front_matter", "read_skill", "skill_set"]

SKILL_FILE = "SKILL.md"
MAX_SKILL_BYTES = 256 * 1024  # a SKILL.md, or a file load_skill reads
MAX_LISTED = 200  # files listed per skill
_NAME = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
_KEY = re.compile(r"([A-Za-z0-9_-]+):(?:[ \t]+(.*))?")
_YAML_ONLY = tuple("|>[{&*!%@`")  # block scalars, flow collections, anchors, tags: a YAML parser's job

FrontMatter = dict[str, str | dict[str, str]]
SkillFolder = str | os.PathLike[str]
"""A skill's folder, or a folder of skill folders (``Agent(skills=[...])``)."""


@dataclass(frozen=True, slots=True)
class Skill:
    """One skill: its ``name``, ``description``, ``folder``, instructions (``body``) and other fields."""

    name: str
    description: str
    folder: Path
    body: str
    fields: FrontMatter = field(default_factory=dict)

    def files(self) -> list[str]:
        """The skill's files besides ``SKILL.md``, relative to its folder (hidden ones left out)."""
        found = []
        for root, dirs, names in os.walk(self._root()):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(names):
                rel = os.path.relpath(os.path.join(root, name), self.folder)
                if not name.startswith(".") and rel != SKILL_FILE:
                    found.append(rel)
        return found

    def loaded(self) -> str:
        """What ``load_skill(name)`` returns: the instructions, then the files the skill has."""
        files = self.files()
        listed = "\n".join(f"- {f}" for f in files[:MAX_LISTED]) or "(none)"
        more = f"\n[... and {len(files) - MAX_LISTED} more]" if len(files) > MAX_LISTED else ""
        return (
            f"Skill {self.name} (its folder: {self.folder})\n\n{self.body.strip()}\n\n"
            f"Files of this skill (relative to its folder; read one with load_skill(name, file)):\n{listed}{more}\n"
            "Its scripts run only through your own tools (shell, python), which see the folder above read-only."
        )

    def read(self, file: str) -> str:
        """One of the skill's files, as text; never a path outside its folder, never a hidden file.

        ``folder`` was resolved once, when the agent was built; the sandboxed shell may since have
        swapped it (or a folder above it) for a symlink to a host folder it cannot read itself, so a
        read goes ahead only while the folder still resolves to itself, the file resolves inside
        it, and the file opened (without following a last symlink) is a regular file.
        """
        if _hidden(file):
            raise ValueError(f"{file!r} is a hidden file; skill {self.name!r} lists the files it offers")
        root = self._root()
        path = os.path.realpath(os.path.join(root, file))
        if not path.startswith(root + os.sep):
            raise ValueError(f"{file!r} is not a file of skill {self.name!r}")
        if _hidden(os.path.relpath(path, root)):  # a visible name that links to .env is still .env
            raise ValueError(f"{file!r} is a hidden file; skill {self.name!r} lists the files it offers")
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            raise ValueError(f"skill {self.name!r} has no file {file!r}: see the list load_skill gave") from None
        except OSError:  # ELOOP: the file became a symlink after it was resolved
            raise ValueError(f"{file!r} is not a regular file of skill {self.name!r}") from None
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not _opened_inside(fd, root):  # a folder on the way was swapped between resolving and opening
                raise ValueError(f"{file!r} is not a file of skill {self.name!r}")
            if not stat.S_ISREG(info.st_mode):
                raise ValueError(f"{file!r} is not a regular file of skill {self.name!r}")
            data, size = f.read(MAX_SKILL_BYTES), info.st_size
        try:
            text = data.decode()
        except UnicodeDecodeError:
            return f"<binary file, {size} bytes: use it from a script, do not read it>"
        return text if size <= len(data) else f"{text}\n[... the file has {size} bytes; the first {len(data)} shown]"

    def _root(self) -> str:
        """The skill's folder as resolved at build time, refused if it is now a symlink or resolves elsewhere."""
        root = str(self.folder)
        if os.path.islink(root) or os.path.realpath(root) != root:
            raise ValueError(f"the folder of skill {self.name!r} was replaced since the agent was built: not read")
        return root


def _hidden(path: str) -> bool:
    return any(part.startswith(".") for part in path.replace("\\", "/").split("/") if part not in ("", ".", ".."))


def _opened_inside(fd: int, root: str) -> bool:
    """Whether the file open as ``fd`` is inside ``root`` (Linux says where through /proc; elsewhere, trusted)."""
    try:
        where = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return True
    return where.startswith(root + os.sep)


@dataclass(frozen=True, slots=True)
class SkillSet:
    """The skills of an agent: the index for its instructions and the ``load_skill`` tool."""

    skills: tuple[Skill, ...] = ()

    def index(self) -> str:
        """The skills' names and descriptions, for the model's instructions ("" without skills)."""
        if not self.skills:
            return ""
        lines = [f"- {s.name}: {' '.join(s.description.split())}" for s in self.skills]
        return "\n".join((INDEX_HEAD, *lines))

    @property
    def tools(self) -> tuple[Tool, ...]:
        return (_load_skill_tool(self),) if self.skills else ()

    def folders(self) -> tuple[Path, ...]:
        """The skills' folders (what a sandbox should let commands read)."""
        return tuple(s.folder for s in self.skills)

    def instruct(self, instructions: Any) -> Any:
        """``instructions`` (text or a function of the run) followed by the index of the skills."""
        index = self.index()
        if not index:
            return instructions
        if callable(instructions):
            dynamic: Callable[[Invocation[Any]], str] = instructions
            return lambda call: _joined(dynamic(call), index)
        return _joined(instructions, index)


INDEX_HEAD = (
    "Skills: each is a folder of instructions (and files) for one kind of task. When a task fits a skill's "
    "description, call load_skill with its name first and follow what it says."
)


def _joined(text: str | None, index: str) -> str:
    return f"{text}\n\n{index}" if text else index


def skill_set(folders: Iterable[SkillFolder]) -> SkillSet:
    """The skills in ``folders``: each is a skill's folder (it has a ``SKILL.md``) or holds skill folders.

    Raises :class:`UserError` for a missing folder, a bad front matter (naming the file) or two skills
    with one name.
    """
    if isinstance(folders, str | os.PathLike):
        raise UserError("skills= takes a list of folders, e.g. skills=['skills/']")
    if not (folders := list(folders)):
        return SkillSet()
    from pathlib import Path

    found: dict[str, Skill] = {}
    for folder in folders:
        top = Path(folder).expanduser().resolve()
        if not top.is_dir():
            raise UserError(f"skills folder {str(top)!r} is not a directory")
        dirs = [top] if (top / SKILL_FILE).exists() else sorted(d for d in top.iterdir() if (d / SKILL_FILE).exists())
        for d in dirs:
            skill = read_skill(d)
            if (other := found.get(skill.name)) is not None:
                raise UserError(f"two skills are named {skill.name!r}: {other.folder} and {skill.folder}")
            found[skill.name] = skill
    return SkillSet(tuple(found.values()))


def read_skill(folder: str | os.PathLike[str]) -> Skill:
    """The skill in ``folder``, its ``SKILL.md`` checked: a ``name`` that is the folder's name
    (lowercase letters, digits and single hyphens, at most 64) and a ``description`` (at most 1024)."""
    from pathlib import Path

    path = Path(folder) / SKILL_FILE
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:  # a FIFO must not block
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise UserError(f"{path}: is not a regular file")
            data = f.read(MAX_SKILL_BYTES + 1)
        text = data.decode()
    except OSError as exc:
        raise UserError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: is not UTF-8 text") from None
    if len(data) > MAX_SKILL_BYTES:
        raise UserError(f"{path}: is larger than {MAX_SKILL_BYTES} bytes: move the details into files beside it")
    fields, body = front_matter(text, str(path))
    name, description = fields.get("name"), fields.get("description")
    if not isinstance(name, str) or not _NAME.fullmatch(name) or len(name) > 64:
        raise UserError(f"{path}: name must be lowercase letters, digits and single hyphens (at most 64), got {name!r}")
    if name != Path(folder).resolve().name:
        raise UserError(f"{path}: name {name!r} must be the name of its folder, {Path(folder).resolve().name!r}")
    if not isinstance(description, str) or not description.strip() or len(description) > 1024:
        raise UserError(f"{path}: description must be text of 1 to 1024 characters, saying what the skill does")
    return Skill(name, description, Path(folder).resolve(), body, fields)


def front_matter(text: str, source: str = "SKILL.md") -> tuple[FrontMatter, str]:
    """The ``key: value`` front matter of ``text`` (between two ``---`` lines) and the text after it.

    >>> front_matter("---\\nname: x\\nmetadata:\\n  owner: 'me'\\n---\\nbody")
    ({'name': 'x', 'metadata': {'owner': 'me'}}, 'body')
    >>> front_matter("---\\ndescription: >\\n  folded\\n---\\n", "a/SKILL.md")
    Traceback (most recent call last):
    tether.exceptions.UserError: a/SKILL.md: line 2: the value of 'description' is YAML this parser does not read \
(a block, list, map, anchor or tag): write it on one line, quoted if it holds ': ' or ' #'
    """
    lines = text.split("\n")
    if lines[0].rstrip("\r") != "---":
        raise UserError(f"{source}: line 1: must be '---', starting the front matter (name, description)")
    fields: FrontMatter = {}
    group: dict[str, str] | None = None
    for n, raw in enumerate(lines[1:], 2):
        line = raw.rstrip("\r")
        if line.rstrip() == "---":
            return fields, "\n".join(lines[n:])
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indented = line[0] in " \t"
        if indented and group is None:
            raise UserError(f"{source}: line {n}: an indented line belongs under a key with no value (as metadata:)")
        key, value = _pair(line.strip(), source, n)
        into: dict[str, Any] = group if indented and group is not None else fields
        if key in into:
            raise UserError(f"{source}: line {n}: {key!r} is given twice")
        if not indented and value is None:
            group = into[key] = {}
        else:
            group = group if indented else None
            into[key] = "" if value is None else value
    raise UserError(f"{source}: the front matter has no closing '---' line")


def _pair(line: str, source: str, n: int) -> tuple[str, str | None]:
    match = _KEY.fullmatch(line)
    if match is None:
        raise UserError(f"{source}: line {n}: expected 'key: value', got {line[:60]!r}")
    key, value = match.group(1), (match.group(2) or "").strip()
    if not value:
        return key, None
    if value[0] == '"':
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if not isinstance(parsed, str):
            raise UserError(f"{source}: line {n}: the value of {key!r} opens a quote it does not close")
        return key, parsed
    if value[0] == "'":
        if len(value) < 2 or value[-1] != "'" or "'" in value[1:-1].replace("''", ""):
            raise UserError(f"{source}: line {n}: the value of {key!r} opens a quote it does not close")
        return key, value[1:-1].replace("''", "'")
    if value.startswith(_YAML_ONLY):
        raise UserError(
            f"{source}: line {n}: the value of {key!r} is YAML this parser does not read (a block, list, map, "
            "anchor or tag): write it on one line, quoted if it holds ': ' or ' #'"
        )
    if ": " in value or " #" in value:
        raise UserError(
            f"{source}: line {n}: the value of {key!r} holds ': ' or ' #', which YAML reads otherwise: quote it"
        )
    return key, value


def _load_skill_tool(skills: SkillSet) -> Tool:
    by_name = {s.name: s for s in skills.skills}

    @tool(name="load_skill", effect="none")
    def load_skill(name: str, file: str = "") -> str:
        """Load one of the skills listed in your instructions: its instructions and the list of its
        files. Call it before a task that fits the skill's description.

        Args:
            name: the skill's name, as listed.
            file: instead of the instructions, read this file of the skill (a path from its list).
        """
        skill = by_name.get(name)
        if skill is None:
            raise ValueError(f"there is no skill named {name!r}; the skills are: {', '.join(by_name)}")
        return skill.read(file) if file else skill.loaded()

    return load_skill
