"""What users get wrong gets one line saying what to set or install, and exit status 2."""

from __future__ import annotations

from pathlib import Path

import pytest


def _one_line_error(done, *, code: int = 2) -> str:  # type: ignore[no-untyped-def]
    assert done.code == code, done
    assert "Traceback" not in done.err
    lines = done.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.err
    return lines[0]


def test_unknown_model_prefix(tether) -> None:
    line = _one_line_error(tether("run", "hi", "--model", "gemini:pro"))
    assert line == (
        "error: unknown model prefix 'gemini' in 'gemini:pro'; use openai:NAME, anthropic:NAME, "
        "local or scripted:FILE (or give --base-url for an OpenAI-compatible server)"
    )


def test_openai_model_without_a_key_names_the_variable(tether) -> None:
    line = _one_line_error(tether("run", "hi", "--model", "openai:gpt-4o-mini"))
    assert line == (
        "error: model 'openai:gpt-4o-mini' needs an API key: set OPENAI_API_KEY "
        "(or name another variable with --api-key-env)"
    )
    line = _one_line_error(tether("chat", "--model", "gpt-4o-mini", "--api-key-env", "MY_KEY"))
    assert "set MY_KEY " in line
    line = _one_line_error(tether("run", "hi", env={"TETHER_MODEL": "anthropic:claude-sonnet-4-5"}))
    assert "set ANTHROPIC_API_KEY " in line


def test_missing_cli_extra(tether) -> None:
    done = tether("--help", python_prelude="import sys; sys.modules['rich'] = None")
    line = _one_line_error(done)
    assert line == (
        "error: the tether command line needs tether[cli] ('rich' is missing): "
        "pip install 'tether[cli]' (in a checkout: pip install -e '.[cli]')"
    )


def test_missing_local_extra(tether) -> None:
    done = tether("run", "hi", python_prelude="import sys; sys.modules['xllamacpp'] = None")
    line = _one_line_error(done)
    assert line.startswith("error: the offline local model needs tether[local]")
    assert line.endswith("pip install 'tether[local]' (in a checkout: pip install -e '.[local]')")


def test_missing_postgres_extra(tether) -> None:
    done = tether(
        "runs", "--store", "postgresql://127.0.0.1/x", python_prelude="import sys; sys.modules['psycopg'] = None"
    )
    assert _one_line_error(done) == (
        "error: PostgresStore needs psycopg 3: pip install 'tether[postgres]' (in a checkout: pip install -e '.[postgres]')"
    )


def test_bad_store_url_and_workspace(tether, tmp_path: Path) -> None:
    assert "unknown store URL scheme 'redis'" in _one_line_error(tether("runs", "--store", "redis://x"))
    line = _one_line_error(tether("runs", "--workspace", str(tmp_path / "nope")))
    assert line.endswith("is not a directory (check --workspace)")


def test_scripts_are_checked_before_anything_runs(tether, tmp_path: Path) -> None:
    assert "cannot read script" in _one_line_error(tether("run", "hi", "--model", "scripted:/nonexistent.json"))
    bad = tmp_path / "bad.json"
    bad.write_text('[{"tool": "x", "arguments": {}}]')
    line = _one_line_error(tether("run", "hi", "--model", f"scripted:{bad}"))
    assert line.startswith("error: reply #1 of script ")


@pytest.mark.sandbox
def test_without_bubblewrap_the_sandbox_refuses_unless_told(tether, script, tmp_path: Path) -> None:
    path = {"PATH": str(tmp_path)}  # no bwrap here
    line = _one_line_error(tether("run", "hi", "--model", script(["ok"]), env=path))
    assert line.startswith("error: bubblewrap not found") and "--unsafe-no-sandbox" in line
    done = tether("run", "hi", "--model", script(["ok"]), "--unsafe-no-sandbox", env=path)
    assert done.code == 0, done.err
    assert done.err.startswith("warning: --unsafe-no-sandbox: shell and python commands run on this machine")


def test_deciding_on_unknown_runs_and_calls(tether, script) -> None:
    # Outside a workspace nothing is created: the error says where it looked.
    line = _one_line_error(tether("approve", "0123abcd"))
    assert line.startswith("error: no runs here: ") and line.endswith(
        "(run this in the workspace, or pass --workspace / --store)"
    )
    tether("run", "hi", "--model", script(["hello"]))  # now there is a store
    assert _one_line_error(tether("approve", "0123abcd")).startswith("error: no run '0123abcd' in sqlite:///")
    assert _one_line_error(tether("resume", "--model", "scripted:x.json")) == "error: name one RUN_ID or pass --all"
    assert "edits one call" in _one_line_error(tether("approve", "r", "c1", "c2", "--args", "{}"))


@pytest.mark.sandbox
def test_deciding_on_a_call_that_is_not_waiting(tether, script) -> None:
    model = script([{"tool": "write_file", "args": {"path": "a.txt", "content": "x"}}])
    done = tether("run", "w", "--model", model)
    rid = done.err.split()[2]
    line = _one_line_error(tether("deny", rid, "call_9_9"))
    assert line == f"error: call 'call_9_9' is not waiting in run {rid!r}; open calls: ['call_1_0']"
    assert "--args is not valid JSON" in _one_line_error(tether("approve", rid, "call_1_0", "--args", "{"))


def test_config_file_settings_are_read_and_checked(tether, script, ws: Path, home: Path) -> None:
    (ws / ".tether").mkdir(exist_ok=True)
    (ws / ".tether" / "config.toml").write_text('model = "gemini:pro"\n')
    assert "unknown model prefix 'gemini'" in _one_line_error(tether("run", "hi"))
    (ws / ".tether").mkdir(exist_ok=True)
    (ws / ".tether" / "config.toml").write_text('modle = "x"\n')
    line = _one_line_error(tether("run", "hi"))
    assert line.startswith(f"error: unknown setting 'modle' in {str(ws / '.tether' / 'config.toml')!r}")
    (ws / ".tether" / "config.toml").unlink()
    user = home / ".config" / "tether"
    user.mkdir(parents=True)
    (user / "config.toml").write_text('model = "openai:gpt-4o"\n')
    assert "'openai:gpt-4o' needs an API key" in _one_line_error(tether("run", "hi"))


@pytest.mark.postgres
def test_a_store_that_cannot_be_reached_is_one_plain_line(tether) -> None:
    url = "postgresql://postgres@127.0.0.1:1/test"  # nothing listens on port 1
    for args in (["runs"], ["approve", "0123abcd"], ["run", "hi", "--model", "scripted:x.json"]):
        line = _one_line_error(tether(*args, "--store", url, env={"TETHER_SIGNING_KEY": "ab" * 32}))
        assert line.startswith(f"error: cannot open the store {url}: cannot connect to PostgreSQL: ")
        assert "StoreError" not in line
