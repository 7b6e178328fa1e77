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

from tether.exceptions import UserError

pytestmark = [pytest.mark.local_model, pytest.mark.sandbox]
ROOT = Path(__file__).resolve().parents[2]


def _require_default_model() -> None:
    try:
        import xllamacpp  # noqa: F401

        from tether.providers._weights import gguf_path

        gguf_path("qwen2.5-coder-1.5b")
    except (ImportError, UserError) as exc:
        if os.environ.get("TETHER_REQUIRE_LOCAL_MODEL") == "1":
            pytest.fail(f"the default local model is required here: {exc}")
        pytest.skip(f"the default local model is not installed: {exc}")


def test_the_readme_first_command_counts_python_files_offline(tmp_path: Path, tether_script: str) -> None:
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"tether run \"([^\"]+)\"", readme)
    assert command is not None, 'the README\'s first screen must show `tether run "..."`'
    task = command.group(1)
    _require_default_model()
    for name in ("a.py", "b.py", "c.py", "notes.txt", "README.md"):
        (tmp_path / name).write_text("x\n")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("TETHER_MODEL")}
    out = subprocess.run(
        [tether_script, "run", task],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert "-> find_files returned: 3 files match" in out.stdout
    final = out.stdout.rsplit("final answer:", 1)[-1]
    assert re.search(r"\b(3|three)\b", final, flags=re.I), out.stdout
