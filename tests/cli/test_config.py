"""Settings precedence, model names, the signing key and scripted brains, in process."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

import pytest

from tether import Agent, Context, Message, tool
from tether.cli._config import ModelSpec, default_store_url, load_settings, make_policy, parse_model
from tether.cli._errors import ConfigError
from tether.cli._keys import signing_key
from tether.cli._scripted import load_script


@pytest.mark.parametrize(
    ("text", "base_url", "spec"),
    [
        (None, None, ModelSpec("local", "", "local")),
        ("local", None, ModelSpec("local", "", "local")),
        ("local:/models/x.gguf", None, ModelSpec("local", "/models/x.gguf", "local:/models/x.gguf")),
        ("openai:gpt-4o-mini", None, ModelSpec("openai", "gpt-4o-mini", "openai:gpt-4o-mini")),
        ("anthropic:claude-x", None, ModelSpec("anthropic", "claude-x", "anthropic:claude-x")),
        ("gpt-4o-mini", None, ModelSpec("openai", "gpt-4o-mini", "gpt-4o-mini")),
        ("llama3.1:8b", "http://127.0.0.1:11434/v1", ModelSpec("openai", "llama3.1:8b", "llama3.1:8b")),
        ("scripted:demo.json", None, ModelSpec("scripted", "demo.json", "scripted:demo.json")),
    ],
)
def test_model_names(text: str | None, base_url: str | None, spec: ModelSpec) -> None:
    assert parse_model(text, base_url) == spec


def test_model_names_that_cannot_work() -> None:
    with pytest.raises(ConfigError, match=r"unknown model prefix 'llama3\.1'"):
        parse_model("llama3.1:8b")  # an Ollama name needs the server's URL
    with pytest.raises(ConfigError, match="names no model after 'openai:'"):
        parse_model("openai:")


def test_flags_beat_environment_beat_workspace_file_beat_user_file(tmp_path: Path) -> None:
    ws, home = tmp_path / "ws", tmp_path / "home"
    (home / ".config" / "tether").mkdir(parents=True)
    ws.mkdir()
    (home / ".config" / "tether" / "config.toml").write_text(
        'model = "user-model"\nbase_url = "http://user"\nmax_steps = 7\ninstructions = "be brief"\n'
    )
    (ws / ".tether").mkdir(exist_ok=True)
    (ws / ".tether" / "config.toml").write_text('model = "ws-model"\nbase_url = "http://ws"\n')
    env = {"HOME": str(home), "TETHER_MODEL": "env-model"}
    s = load_settings(workspace=str(ws), env=env)
    assert (s.model, s.base_url, s.max_steps, s.instructions) == ("env-model", "http://ws", 7, "be brief")
    s = load_settings(workspace=str(ws), model="flag-model", max_steps=3, env=env)
    assert (s.model, s.max_steps) == ("flag-model", 3)
    assert s.store_url == default_store_url(ws.resolve()) == f"sqlite:///{ws.resolve()}/.tether/runs.db"


def test_config_values_are_type_checked(tmp_path: Path) -> None:
    (tmp_path / ".tether").mkdir(exist_ok=True)
    (tmp_path / ".tether" / "config.toml").write_text("max_steps = 'many'\n")
    with pytest.raises(ConfigError, match=r"setting 'max_steps' in .* must be an integer, got .many."):
        load_settings(workspace=str(tmp_path), env={"HOME": str(tmp_path)})
    (tmp_path / ".tether").mkdir(exist_ok=True)
    (tmp_path / ".tether" / "config.toml").write_text("model = \n")
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_settings(workspace=str(tmp_path), env={"HOME": str(tmp_path)})


def test_signing_key_from_the_environment_or_a_private_file_beside_the_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db' / 'runs.db'}"
    assert signing_key(url, {"TETHER_SIGNING_KEY": "ab" * 32}, create=True) == bytes.fromhex("ab" * 32)
    assert (
        signing_key(url, {"TETHER_SIGNING_KEY": "not hex but long enough"}, create=True) == b"not hex but long enough"
    )
    with pytest.raises(ConfigError, match=r"the store has no signing key: .*signing\.key' does not exist"):
        signing_key(url, {}, create=False)  # deciding never makes a key
    first = signing_key(url, {}, create=True)
    path = tmp_path / "db" / "signing.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(first) == 32
    assert signing_key(url, {}, create=False) == signing_key(url, {}, create=True) == first  # made once, then read
    assert signing_key("memory://", {}, create=True) != signing_key("memory://", {}, create=True)
    with pytest.raises(ConfigError, match="a postgresql store needs TETHER_SIGNING_KEY"):
        signing_key("postgresql://db/x", {}, create=True)


@tool(effect="none")
def lookup(item: str) -> str:
    """Look an item up."""
    return f"{item}: in stock"


def test_a_script_follows_the_conversation_not_the_process(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(
        '[{"tool": "lookup", "args": {"item": "milk"}, "reasoning": "checking"},'
        ' {"answer": "found: {last_tool_result}"}, "second turn"]'
    )
    agent = Agent(load_script(str(path)), [lookup])
    first = agent.run_sync("milk?")
    assert first.output == "found: milk: in stock"
    # A new ScriptedFile (another process) continuing the same conversation picks up at reply 3.
    again = Agent(load_script(str(path)), [lookup]).run_sync("and now?", context=first.context)
    assert again.output == "second turn"
    fresh = Agent(load_script(str(path)), [lookup]).run_sync("a new conversation")
    assert fresh.output == "found: milk: in stock"  # starts the script over


def test_a_script_streams_its_words(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text('["three little words"]')
    model = load_script(str(path))

    async def pieces() -> list[str | Message]:
        return [p async for p in model.stream(Context([Message.user("hi")]), [])]

    got = asyncio.run(pieces())
    assert got[:-1] == ["three ", "little ", "words"] and isinstance(got[-1], Message)


def test_servers_of_your_own_need_no_key_but_vendors_do(tmp_path: Path) -> None:
    from tether.providers.openai_compat import OpenAICompatible

    env = {"HOME": str(tmp_path)}
    own = load_settings(workspace=str(tmp_path), model="llama3.1:8b", base_url="http://127.0.0.1:11434/v1", env=env)
    assert isinstance(make_policy(own), OpenAICompatible)
    vendor = load_settings(workspace=str(tmp_path), model="gpt-4o", env=env)
    with pytest.raises(ConfigError, match="set OPENAI_API_KEY"):
        make_policy(vendor)
    named = load_settings(workspace=str(tmp_path), model="m", base_url="http://127.0.0.1/v1", api_key_env="K", env=env)
    with pytest.raises(ConfigError, match="set K "):
        make_policy(named)
