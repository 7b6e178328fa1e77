"""LocalModel: the real 0.5B model in-process (marked ``local_model``), and the
packaging promises that hold without it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from support import add_numbers as add
from tether import Agent, Context, Message, UserError
from tether.providers.local import LocalModel

# -- without the model -------------------------------------------------------


def test_importing_tether_never_imports_the_binding() -> None:
    code = "import sys, tether, tether.providers; print('xllamacpp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


async def test_a_missing_binding_names_the_install_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "tiny.gguf"
    fake.write_bytes(b"GGUF" + bytes(64))
    monkeypatch.setitem(sys.modules, "xllamacpp", None)  # import fails as if not installed
    with pytest.raises(UserError, match=r"pip install 'tether\[local\]'"):
        await LocalModel(fake).decide(Context([Message.user("hi")]), [])


def test_the_default_is_a_pinned_model() -> None:
    from tether.providers._weights import WEIGHTS
    from tether.providers.local import DEFAULT_MODEL

    assert LocalModel().model == DEFAULT_MODEL
    assert DEFAULT_MODEL in WEIGHTS


def test_bad_settings_are_refused_early() -> None:
    with pytest.raises(UserError, match="threads must be at least 1"):
        LocalModel(threads=0)
    with pytest.raises(UserError, match="context_size"):
        LocalModel(context_size=16)


# -- with the model ------------------------------------------------------------

pytestmark_model = pytest.mark.local_model


@pytest.fixture(scope="module")
def model(model_path: Path) -> LocalModel:
    local = LocalModel(model_path, max_tokens=128)
    local.load()
    return local


@pytestmark_model
async def test_without_tools_the_model_just_talks(model: LocalModel) -> None:
    message = await model.decide(Context([Message.user("Say hello to Ada in one short sentence.")]), [])
    assert message.role == "assistant" and not message.tool_calls
    assert "ada" in message.content.lower()
    assert message.usage is not None and message.usage.output_tokens > 0 and message.usage.requests == 1


@pytestmark_model
async def test_the_model_calls_the_tool_and_answers_with_its_result(model: LocalModel) -> None:
    result = await Agent(model, [add], max_steps=4).run("What is 1234 + 4321?")
    assert result.status == "finished"
    call = result.context[1].tool_calls[0]
    assert call.name == "add"
    assert result.context[2].content == "5555.0"
    assert "5555" in (result.output or "")
    assert result.usage.requests >= 2


@pytestmark_model
async def test_streaming_shows_the_answer_and_never_the_json(model: LocalModel) -> None:
    events = [ev async for ev in Agent(model, [add], max_steps=4).stream("What is 20 + 22?")]
    tokens = "".join(ev.text for ev in events if ev.kind == "token")
    finished = events[-1]
    assert finished.kind == "finished"
    assert tokens == finished.output and "42" in tokens
    assert '"name"' not in tokens


@pytestmark_model
async def test_the_event_loop_stays_free_while_the_model_thinks(model: LocalModel) -> None:
    ticks = 0
    thinking = True

    async def tick() -> None:
        nonlocal ticks
        while thinking:
            ticks += 1
            await asyncio.sleep(0.005)

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0)
    before = ticks
    await model.decide(Context([Message.user("Count from one to twenty in words.")]), [])
    thinking = False
    await ticker
    assert ticks - before > 5  # a blocked loop would not have ticked at all


@pytestmark_model
async def test_a_prompt_too_long_for_the_context_fails_the_run_cleanly(model_path: Path) -> None:
    result = await Agent(LocalModel(model_path, context_size=512)).run("word " * 1000)
    assert result.status == "failed"
    assert "exceeds the available context size (512 tokens)" in (result.error or "")


@pytestmark_model
def test_the_model_loads_once_per_process(model: LocalModel, model_path: Path) -> None:
    assert LocalModel(model_path, temperature=0.5).load() is model.load()


@pytestmark_model
def test_the_loopback_port_answers_401_to_everyone(model: LocalModel) -> None:
    address = model.load().listening_address
    assert address.startswith("http://127.0.0.1:")
    assert httpx.get(address + "/v1/models").status_code == 401
    chat = {"messages": [{"role": "user", "content": "hi"}]}
    guessed = {"Authorization": "Bearer sk-guess"}
    assert httpx.post(address + "/v1/chat/completions", json=chat, headers=guessed).status_code == 401
