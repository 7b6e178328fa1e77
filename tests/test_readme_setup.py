"""The README's test command installs what ``.ci/run`` installs: the extras, the pinned MCP servers (PyPI and npm)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _test_command() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("**Run the tests**") :]
    return section[section.index("```bash") : section.index("```", section.index("```bash") + 7)]


def _ci_installs() -> tuple[set[str], list[str], list[str]]:
    script = (ROOT / ".ci" / "run").read_text()
    suite = re.search(r"pip install -q -e '\.\[([a-z,-]+)\]'", script)
    assert suite is not None
    pinned = re.findall(r"pip install -q (?:--no-deps )?'([^']+==[^']+)'", script)
    npm = re.findall(r"npm install [^\n]*?'([^']+)'", script)
    return set(suite.group(1).split(",")), pinned, npm


def test_the_readme_test_command_installs_what_ci_installs() -> None:
    command = _test_command()
    extras, pinned, npm = _ci_installs()
    assert npm and pinned  # the script still installs third-party MCP servers
    given = re.search(r"pip install -e '\.\[([a-z,-]+)\]'", command)
    assert given is not None and extras <= set(given.group(1).split(","))
    for spec in pinned:
        assert f"'{spec}'" in command, f"the README's test command does not install {spec}"
    for spec in npm:
        assert f"npm install --prefix .ci/npm '{spec}'" in command, f"the README's test command does not install {spec}"
