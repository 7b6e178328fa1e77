"""The example session in docs/cli.md is replayed command by command, so it never rots.

The script of the "Scripted brains" section is the brain; the "Deciding later"
session is run against it and every output compared, with the run id and the
clock swapped in.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
DOC_RUN_ID = "42426d5006d84de991554c7dc65ed2b1"
CLOCK = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d| +\d+(\.\d)? (ms|s)\b")  # times, durations

pytestmark = pytest.mark.sandbox


def _blocks(lang: str) -> list[str]:
    """The fenced code blocks of the page whose info string is ``lang``."""
    blocks: list[str] = []
    current: list[str] | None = None
    info = ""
    for line in DOC.read_text().splitlines():
        if line.startswith("```") and current is None:
            current, info = [], line[3:].strip()
        elif line.startswith("```"):
            if info == lang:
                blocks.append("\n".join(current) + "\n")
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def _session(block: str) -> list[tuple[str, list[str]]]:
    """``[(command, expected output lines)]`` from a block of ``$ command`` lines."""
    steps: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:].split("#")[0].strip(), []))
        elif steps:
            steps[-1][1].append(line)
    for _, output in steps:
        while output and not output[-1]:
            output.pop()  # the blank line before the next command
    return steps


def test_the_documented_session_is_what_tether_prints(tether, ws: Path, tmp_path: Path) -> None:
    (ws / "notes.txt").write_text("buy milk\ncall mum\n")
    script = tmp_path / "demo.json"
    script.write_text(next(b for b in _blocks("json") if "todo.md" in b))
    json.loads(script.read_text())
    env = {"TETHER_MODEL": f"scripted:{script}"}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    paused_block = next(b for b in _blocks("") if "--no-input" in b)
    (command, expected), *_ = _session(paused_block)
    done = tether(*shlex.split(command)[1:], env=env)
    rid = done.err.split()[2]
    assert (done.out + done.err).splitlines() == [line.replace(DOC_RUN_ID, rid) for line in expected]

    later = next(b for b in _blocks("") if "$ tether show 4242" in b)
    cwd = ws
    for command, expected in _session(later):
        if command.startswith("cd "):
            cwd = elsewhere
            continue
        argv = [a.replace("4242", rid[:8]).replace("~/project", str(ws)) for a in shlex.split(command)[1:]]
        done = tether(*argv, env=env, cwd=cwd)
        assert done.code == 0, (command, done.err)
        got = [CLOCK.sub("<clock>", line) for line in (done.out + done.err).splitlines()]
        want = [CLOCK.sub("<clock>", line.replace(DOC_RUN_ID, rid)) for line in expected]
        assert got == want, command
    assert (ws / "todo.md").read_text() == "- [ ] buy milk\n- [ ] call mum\n"
