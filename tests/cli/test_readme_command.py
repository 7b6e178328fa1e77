"""The README's first command, as a new user runs it: offline, no key, the default local model.

Needs ``tether[local]`` (the 1.5B weights). Skipped when they are missing,
unless ``TETHER_REQUIRE_LOCAL_MODEL=1`` (CI), which makes that a failure.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from support import require_local_model

pytestmark = [pytest.mark.local_model, pytest.mark.sandbox]
ROOT = Path(__file__).resolve().parents[2]


def _require_default_model() -> None:
    require_local_model("qwen2.5-coder-1.5b")


FLAT = {"a.py": 1, "b.py": 1, "c.py": 1, "notes.txt": 1, "README.md": 1}
DEEP = {"setup.py": 1, "src/app/models.py": 1, "src/app/views.py": 1, "src/app/util/io.py": 1}
DEEP |= {f"tests/test_{i}.py": 1 for i in range(4)} | {"docs/index.md": 1}


def _task() -> str:
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"tether run \"([^\"]+)\"", readme)
    assert command is not None, 'the README\'s first screen must show `tether run "..."`'
    return command.group(1)


def _run_readme_command(folder: Path, files: dict[str, int], tether_script: str) -> tuple[str, str]:
    task = _task()
    _require_default_model()
    for name in files:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("x\n")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("TETHER_MODEL")}
    out = subprocess.run(
        [tether_script, "run", task],
        cwd=folder, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout, out.stdout.rsplit("final answer:", 1)[-1]


def test_the_readme_first_command_counts_python_files_offline(tmp_path: Path, tether_script: str) -> None:
    stdout, final = _run_readme_command(tmp_path, FLAT, tether_script)
    assert "-> find_files returned: 3 files match" in stdout
    assert re.search(r"\b(3|three)\b", final, flags=re.I), stdout


def test_the_readme_first_command_counts_every_folder_of_a_deep_repository(tmp_path: Path, tether_script: str) -> None:
    stdout, final = _run_readme_command(tmp_path, DEEP, tether_script)
    assert "-> find_files returned: 8 files match" in stdout
    assert re.search(r"\b(8|eight)\b", final, flags=re.I), stdout
    assert "4 in tests/, 3 in src/, 1 at the top level" in stdout  # where they are (the 1.5B may leave it out)


def test_the_readme_first_command_in_an_empty_folder_says_there_are_none(tmp_path: Path, tether_script: str) -> None:
    stdout, final = _run_readme_command(tmp_path, {}, tether_script)
    assert "-> find_files returned: 0 files match" in stdout
    assert re.search(r"\b(no|0|zero|none)\b", final, flags=re.I), stdout
