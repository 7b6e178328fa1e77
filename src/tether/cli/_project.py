"""What a project tells the agent: its ``AGENTS.md`` files and skills, read once per command.

:func:`project_of` reads the workspace's project instructions (and the user's,
from the configuration directory) when the command builds its agent, so a file
the agent writes while it works is not read into the run that wrote it; the run
keeps the text in its first note, and ``tether show`` prints that note
(:func:`instructions_shown`) so a person sees what the model was given.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..events import Event, RunStarted
from ..instructions import LEAD, ProjectInstructions, read_instructions
from ..skills import INDEX_HEAD
from ._config import Settings
from ._render import visible
from ._trust import user_config_dir

SKILLS_DIR = Path(".agents") / "skills"  # in the workspace; the user's are in the config directory's skills/


@dataclass(frozen=True, slots=True)
class Project:
    """The project instructions and skill folders a command's agent starts its runs with."""

    instructions: ProjectInstructions
    skills: tuple[Path, ...] = ()

    def note(self, skill_names: Sequence[str] = ()) -> str:
        """What the command says on stderr when a run starts: which files it read, which skills it has."""
        found, said = self.instructions, []
        if found.files:
            cut = f" (cut to fit the cap: {', '.join(map(str, found.cut))})" if found.cut else ""
            said.append(f"instructions from {', '.join(map(str, found.files))}{cut}")
        if skill_names:
            said.append(f"skills: {', '.join(skill_names)} (from {', '.join(map(str, self.skills))})")
        return "\n".join(said)


def project_of(settings: Settings) -> Project:
    """The workspace's project instructions, with the user's own first; the user's skills, then the workspace's."""
    user = user_config_dir(settings.env)
    folders = (user / "skills", settings.workspace / SKILLS_DIR)
    skills = tuple(f for f in folders if f.is_dir())
    return Project(read_instructions(settings.workspace, user_dir=user), skills)


def instructions_shown(events: Sequence[Event]) -> list[str]:
    """The instructions the run's model was given first (its leading system notes), indented, when
    they hold project instructions or skills (the command's own instructions alone are not repeated)."""
    first = events[0] if events else None
    if not isinstance(first, RunStarted):
        return []
    notes = [m.text for m in itertools.takewhile(lambda m: m.role == "system", first.messages)]
    if not any(LEAD in text or INDEX_HEAD in text for text in notes):
        return []
    lines = ["instructions the model was given:"]
    for text in notes:
        lines += ["  | " + line for line in visible(text).split("\n")]
    return lines
