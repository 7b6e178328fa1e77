"""Images and files in notes: values, strict JSON, tools that return them, brains that cannot take them."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support import parts
from tether import Action, Agent, Context, Message, RunState, ToolCall, UserError, tool
from tether.events import ToolFinished
from tether.journal import replay
from tether.parts import MAX_PART_BYTES, Image, Text, part_from_dict
from tether.providers import LocalModel
from tether.providers.constrained import ConstrainedOpenAI
from tether.stores.sqlite import SQLiteStore
from tether.testing import ScriptedModel

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


@settings(max_examples=200, deadline=None)
@given(parts, st.sampled_from(("user", "tool")))
def test_a_message_with_parts_round_trips_through_json_exactly(content, role) -> None:
    message = Message(role, tuple(content), tool_call_id="c1" if role == "tool" else None)
    back = Message.from_dict(json.loads(json.dumps(message.to_dict())))
    assert back == message
    assert [getattr(p, "data", None) for p in back.content] == [getattr(p, "data", None) for p in content]


@settings(max_examples=50, deadline=None)
@given(parts)
def test_a_run_state_holding_parts_round_trips_through_its_json(content) -> None:
    state = RunState(run_id="r1", messages=(Message.user(*content), Message.assistant("seen")))
    assert RunState.from_json(state.to_json()) == state


def test_text_only_notes_keep_a_plain_string() -> None:
    assert Message.user("hi").content == "hi"
    assert Message.user("hi").to_dict() == {"role": "user", "content": "hi"}


def test_a_user_note_takes_text_and_an_image_read_from_a_file(tmp_path: Path) -> None:
    (tmp_path / "shot.png").write_bytes(PNG)
    note = Message.user("look at this", Image.from_path(tmp_path / "shot.png"))
    assert note.content == (Text("look at this"), Image(PNG, "image/png"))
    assert note.parts == (Image(PNG, "image/png"),)
    assert note.text == "look at this\n[image image/png, 72 bytes]"


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"type": "image", "media_type": "image/png", "data": "aGk=", "alt": "x"}, "unknown image part field"),
        ({"type": "image", "media_type": "image/png", "data": "not base64!"}, "not valid base64"),
        ({"type": "image", "media_type": "image/tiff", "data": "aGk="}, "an image must be one of"),
        ({"type": "file", "media_type": "Application PDF", "data": "aGk=", "name": "a"}, "malformed media type"),
        ({"type": "image", "data": "aGk="}, "needs its media_type"),
        ({"type": "image", "url": "file:///etc/passwd"}, r"an http\(s\) URL"),
        ({"type": "image", "media_type": "image/png", "data": "aGk=", "url": "https://a/b"}, "exactly one"),
        ({"type": "audio", "data": "aGk="}, "unknown part type"),
        ({"type": "text", "text": 3}, "holds a string"),
    ],
)
def test_malformed_parts_are_refused(data, error) -> None:
    with pytest.raises(ValueError, match=error):
        part_from_dict(data)
    with pytest.raises(ValueError, match=error):
        Message.from_dict({"role": "user", "content": [data]})


def test_a_part_over_the_cap_is_refused_before_its_base64_is_decoded() -> None:
    with pytest.raises(ValueError, match="over the cap"):
        Image(b"\0" * (MAX_PART_BYTES + 1), "image/png")
    huge = "A" * ((MAX_PART_BYTES // 3 + 2) * 4)
    with pytest.raises(ValueError, match="over the cap"):
        part_from_dict({"type": "image", "media_type": "image/png", "data": huge})


def test_content_that_is_not_parts_is_refused() -> None:
    with pytest.raises(ValueError, match="tuple of Text, Image and File parts"):
        Message("user", (b"raw bytes",))  # type: ignore[arg-type]


def test_a_tool_returns_a_screenshot_and_the_notebook_keeps_it(tmp_path: Path) -> None:
    @tool(effect="none")
    def screenshot(page: str) -> list[object]:
        """Take a screenshot of a page."""
        return [f"{page} rendered:", Image(PNG, "image/png")]

    store = SQLiteStore(tmp_path / "runs.db")
    model = ScriptedModel([Action("screenshot", {"page": "home"}), "The page shows a logo."])
    result = Agent(model, [screenshot], store=store).run_sync("what is on the home page?", run_id="r1")
    note = result.context[2]
    assert note.role == "tool" and note.content == (Text("home rendered:"), Image(PNG, "image/png"))
    assert model.requests[1][2] == note  # the brain was given the image
    stored = asyncio.run(store.load("r1"))
    assert next(e for e in stored if isinstance(e, ToolFinished)).result == note
    assert replay(stored) == result.context
    store.close()


def test_the_local_model_refuses_an_image_before_anything_loads() -> None:
    agent = Agent(LocalModel("/nonexistent/model.gguf"))
    with pytest.raises(UserError, match=r"reads text only, but note 0 \(user\) holds Image\(image/png, 72 bytes\)"):
        agent.run_sync(Message.user("what is this?", Image(PNG, "image/png")))


def test_a_constrained_brain_reads_a_tool_image_as_its_description() -> None:
    sent: list[dict[str, object]] = []

    def server(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        reply = {"choices": [{"message": {"content": '{"name": "final_answer", "arguments": {"text": "a chart"}}'}}]}
        return httpx.Response(200, json=reply)

    @tool(effect="none")
    def snap() -> Image:
        """A screenshot."""
        return Image(PNG, "image/png")

    transport = httpx.MockTransport(server)
    brain = ConstrainedOpenAI("m", base_url="http://127.0.0.1:9/v1", transport=transport, decide_first=False)
    ctx = Context([Message.user("go"), Message.assistant("", [ToolCall.of("snap", id="c1")])])
    ctx = ctx.add(Message.tool_result("c1", (Image(PNG, "image/png"),), name="snap"))
    reply = asyncio.run(brain.decide(ctx, [snap]))
    assert reply.text == "a chart"
    prompt = json.dumps(sent[-1])
    assert "[image image/png, 72 bytes]" in prompt and base64.b64encode(PNG).decode() not in prompt


def test_the_base64_of_a_part_is_its_bytes() -> None:
    assert base64.b64decode(Image(PNG, "image/png").to_dict()["data"]) == PNG
