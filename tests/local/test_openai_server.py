"""Providers against a real third-party OpenAI-compatible server (issue 4, item 5).

The server is llama.cpp's HTTP server (inside xllamacpp) on 127.0.0.1 with
Qwen2.5-Coder-0.5B: see ``llama_server`` in conftest.py.
"""

from __future__ import annotations

import pytest

from support import add_numbers as add
from tether import Agent, Context, Message, ProviderError, tool
from tether.providers import OpenAICompatible
from tether.providers.constrained import ConstrainedOpenAI

from .conftest import LlamaServer

pytestmark = pytest.mark.local_model


def constrained(server: LlamaServer, **options: object) -> ConstrainedOpenAI:
    # The 0.5B's profile (LocalModel's PROFILES): asked "what is left?" after a result it
    # names a tool again every time, so it is asked the first question again.
    options.setdefault("what_is_left", False)
    return ConstrainedOpenAI("qwen", base_url=server.base_url, api_key=server.api_key, max_tokens=128, **options)


async def test_constrained_plain_chat(llama_server: LlamaServer) -> None:
    async with constrained(llama_server) as model:
        message = await model.decide(Context([Message.user("Say hello to Ada in one short sentence.")]), [])
    assert "ada" in message.content.lower()
    assert message.usage is not None and message.usage.input_tokens > 0


async def test_constrained_agent_run_with_a_tool(llama_server: LlamaServer) -> None:
    async with constrained(llama_server) as model:
        result = await Agent(model, [add], max_steps=4).run("What is 1234 + 4321?")
    assert result.status == "finished"
    assert result.context[1].tool_calls[0].name == "add"
    assert result.context[2].content == "5555.0"
    assert "5555" in (result.output or "")


async def test_constrained_run_paused_for_approval_then_resumed(llama_server: LlamaServer) -> None:
    saved: list[str] = []

    @tool(approval=True, effect="idempotent")
    def save_note(text: str) -> str:
        """Save a note for the user.

        Args:
            text: the note to save.
        """
        saved.append(text)
        return "saved"

    async with constrained(llama_server) as model:
        agent = Agent(model, [save_note], max_steps=4)
        paused = await agent.run("Save a note that says: buy milk")
        assert paused.status == "paused"
        assert saved == []  # nothing runs before a human decides
        (pending,) = paused.items
        assert pending.call.name == "save_note"
        resumed = await agent.run(paused.state.approve(pending.call.id))
    assert resumed.status == "finished"
    assert len(saved) == 1 and "milk" in saved[0].lower()
    assert resumed.output


async def test_openai_compatible_plain_chat(llama_server: LlamaServer) -> None:
    async with OpenAICompatible(
        "qwen", base_url=llama_server.base_url, api_key=llama_server.api_key, stream=False, max_tokens=64, temperature=0
    ) as model:
        message = await model.decide(Context([Message.user("Say hello to Ada in one short sentence.")]), [])
    assert "ada" in message.content.lower()
    assert message.usage is not None and message.usage.output_tokens > 0


async def test_openai_compatible_streamed_run(llama_server: LlamaServer) -> None:
    async with OpenAICompatible(
        "qwen", base_url=llama_server.base_url, api_key=llama_server.api_key, max_tokens=64, temperature=0
    ) as model:
        events = [ev async for ev in Agent(model).stream("Name three colours, comma separated.")]
    tokens = [ev.text for ev in events if ev.kind == "token"]
    assert events[-1].kind == "finished"
    assert len(tokens) > 3
    assert "".join(tokens) == events[-1].output


async def test_a_wrong_key_is_a_401_provider_error(llama_server: LlamaServer) -> None:
    async with OpenAICompatible("qwen", base_url=llama_server.base_url, api_key="wrong", stream=False) as model:
        with pytest.raises(ProviderError) as err:
            await model.decide(Context([Message.user("hi")]), [])
    assert err.value.status_code == 401
    assert err.value.retryable is False
