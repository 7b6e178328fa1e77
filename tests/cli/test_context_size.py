"""The offline model's context window from the command line: a flag, a config key, and the resume hint."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.cli._commands import finish
from tether.cli._config import Settings
from tether.cli._session import Outcome


def test_the_flag_reaches_the_local_model(tether) -> None:
    done = tether("run", "hi", "--context-size", "100")
    assert done.code == 2 and done.err == "error: context_size must be at least 512, got 100\n"


def test_the_config_key_reaches_the_local_model(tether, ws: Path) -> None:
    (ws / ".tether").mkdir()
    (ws / ".tether" / "config.toml").write_text("context_size = 200\n")
    done = tether("run", "hi")
    assert done.code == 2 and done.err == "error: context_size must be at least 512, got 200\n"
    (ws / ".tether" / "config.toml").write_text('context_size = "big"\n')
    assert "must be an integer" in tether("run", "hi").err


def test_it_is_refused_for_another_model(tether, script) -> None:
    done = tether("run", "hi", "--context-size", "4096", "--model", script(["hi"]))
    assert done.code == 2 and "sets the offline local model's window" in done.err


def test_a_run_that_overflowed_the_window_is_told_how_to_resume_with_a_bigger_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reason = "ProviderError: the request exceeds the available context size, try increasing it"
    with pytest.raises(SystemExit):
        finish(Outcome("r1", "failed", reason=reason), Settings(workspace=tmp_path, store_url="memory://"))
    hint = capsys.readouterr().err.splitlines()[-1]
    assert hint.startswith("  continue it with: tether resume r1") and hint.endswith(" --context-size 16384")
