"""``tether run`` against real HTTP model servers on 127.0.0.1 (OpenAI and Anthropic shapes)."""

from __future__ import annotations

import json

import pytest

from providers.fakeserver import FakeServer, Reply, turn
from tether.events import Token, from_dict

pytestmark = pytest.mark.sandbox


@pytest.mark.parametrize("shape", ["openai", "anthropic"])
def test_run_talks_to_the_configured_server_with_the_key(tether, shape: str) -> None:
    with FakeServer() as server:
        server.push(turn(tool_calls=[("read_file", {"path": "notes.txt"})]), turn("You need milk."))
        if shape == "openai":
            args = ["--model", "openai:fake-model", "--base-url", server.openai_url]
            env = {"OPENAI_API_KEY": "sk-test"}
        else:
            args = ["--model", "anthropic:fake-model", "--base-url", server.anthropic_url]
            env = {"ANTHROPIC_API_KEY": "sk-test"}
        done = tether("run", "what do I need?", *args, "--json", env=env)
        server.assert_consumed()
    assert done.code == 0, done.err
    events = [from_dict(json.loads(line)) for line in done.lines()]
    assert "".join(e.text for e in events if isinstance(e, Token)) == "You need milk."
    assert events[-1].kind == "finished"
    first, second = server.requests
    auth = first.headers.get("authorization") or first.headers.get("x-api-key")
    assert auth in ("Bearer sk-test", "sk-test")
    offered = {t.get("name") or t["function"]["name"] for t in first.json()["tools"]}
    assert offered == {"read_file", "write_file", "edit_file", "list_dir", "find_files", "shell", "python", "ask_human"}
    assert "buy milk" in second.body.decode()  # the tool result went back to the model


def test_a_named_key_variable_is_used(tether) -> None:
    with FakeServer() as server:
        server.push(turn("hi"))
        done = tether(
            "run",
            "hi",
            "--model",
            "fake-model",
            "--base-url",
            server.openai_url,
            "--api-key-env",
            "MY_KEY",
            env={"MY_KEY": "from-my-key"},
        )
    assert done.code == 0, done.err
    assert server.requests[0].headers["authorization"] == "Bearer from-my-key"


def test_a_provider_failure_fails_the_run_with_status_1_and_says_how_to_resume(tether) -> None:
    with FakeServer() as server:
        server.push(Reply.error(400, "context too long"), turn("recovered"))
        # An Ollama-style name on a server of our own: no key needed.
        args = ["--model", "llama3.1:8b", "--base-url", server.openai_url]
        failed = tether("run", "hi", *args)
        assert failed.code == 1
        lines = failed.err.splitlines()
        rid = lines[0].split()[2]
        assert lines[0].startswith(f"error: run {rid} failed: ") and "context too long" in lines[0]
        # The run recorded its brain: resuming without flags talks to the same server and model.
        assert lines[1] == f"  continue it with: tether resume {rid}"
        resumed = tether("resume", rid)
        server.assert_consumed()
    assert [r.json()["model"] for r in server.requests] == ["llama3.1:8b", "llama3.1:8b"]
    assert resumed.code == 0, resumed.err
    assert resumed.lines()[-1] == "  final answer: recovered"
