"""Images and PDFs on the wire: the exact request bodies sent to OpenAI chat completions and Anthropic.

The expected bodies follow each vendor's documented request format: OpenAI's
``image_url`` parts (a data URL or a link) and ``file`` parts (``filename`` and
``file_data`` as a data URL, PDFs only) in user notes, a tool's images in a
user note after the results (a tool message is text only); Anthropic's
``image`` and ``document`` blocks with ``base64`` or ``url`` sources, in user
notes and inside ``tool_result`` content.
"""

from __future__ import annotations

import httpx
import pytest

from tether import Agent, Context, Message, ToolCall, UserError
from tether.parts import File, Image, Text
from tether.providers import Anthropic, OpenAICompatible

PNG = b"\x89PNG\r\n\x1a\n"
PDF = b"%PDF-1.4\n%%EOF"
NOTES = [
    Message.system("You read documents."),
    Message.user("What do these show?", Image(PNG, "image/png"), File(PDF, "application/pdf", "invoice.pdf")),
    Message.assistant("", [ToolCall.of("screenshot", {"page": "home"}, id="call_1")]),
    Message.tool_result("call_1", (Text("home:"), Image(PNG, "image/png")), name="screenshot"),
    Message.assistant("A logo and an invoice."),
]
LAST = Message.user("And this one?", Image(url="https://example.com/cat.jpg"))

OPENAI_BODY = (
    '{"model":"gpt-4o","messages":[{"role":"system","content":"You read documents."},{"role":"user","cont'
    'ent":[{"type":"text","text":"What do these show?"},{"type":"image_url","image_url":{"url":"data:imag'
    'e/png;base64,iVBORw0KGgo="}},{"type":"file","file":{"filename":"invoice.pdf","file_data":"data:appli'
    'cation/pdf;base64,JVBERi0xLjQKJSVFT0Y="}}]},{"role":"assistant","content":null,"tool_calls":[{"id":"'
    'call_1","type":"function","function":{"name":"screenshot","arguments":"{\\"page\\": \\"home\\"}"}}]},{"r'
    'ole":"tool","tool_call_id":"call_1","content":"home:\\n[image image/png, 8 bytes]"},{"role":"user","c'
    'ontent":[{"type":"text","text":"The images and files the tool results above refer to, in order:"},{"'
    'type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]},{"role":"assistant","c'
    'ontent":"A logo and an invoice."},{"role":"user","content":[{"type":"text","text":"And this one?"},{'
    '"type":"image_url","image_url":{"url":"https://example.com/cat.jpg"}}]}]}'
)
ANTHROPIC_BODY = (
    '{"model":"claude-sonnet-4-5","max_tokens":1024,"system":"You read documents.","messages":[{"role":"u'
    'ser","content":[{"type":"text","text":"What do these show?"},{"type":"image","source":{"type":"base6'
    '4","media_type":"image/png","data":"iVBORw0KGgo="}},{"type":"document","source":{"type":"base64","me'
    'dia_type":"application/pdf","data":"JVBERi0xLjQKJSVFT0Y="},"title":"invoice.pdf"}]},{"role":"assista'
    'nt","content":[{"type":"tool_use","id":"call_1","name":"screenshot","input":{"page":"home"}}]},{"rol'
    'e":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":[{"type":"text","text":"'
    'home:"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}'
    ']},{"role":"assistant","content":"A logo and an invoice."},{"role":"user","content":[{"type":"text",'
    '"text":"And this one?"},{"type":"image","source":{"type":"url","url":"https://example.com/cat.jpg"}}'
    "]}]}"
)


def _capture(reply: dict) -> tuple[list[bytes], httpx.MockTransport]:
    sent: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.content)
        return httpx.Response(200, json=reply)

    return sent, httpx.MockTransport(handler)


def test_openai_gets_image_url_and_file_parts_and_a_tools_images_after_its_results() -> None:
    sent, transport = _capture({"choices": [{"message": {"role": "assistant", "content": "A cat."}}]})
    model = OpenAICompatible("gpt-4o", base_url="http://127.0.0.1:1/v1", api_key="k", stream=False, transport=transport)
    result = Agent(model).run_sync(LAST, context=Context(NOTES))
    assert result.output == "A cat."
    assert sent == [OPENAI_BODY.encode()]


def test_anthropic_gets_image_and_document_blocks_in_notes_and_tool_results() -> None:
    reply = {"content": [{"type": "text", "text": "A cat."}], "usage": {"input_tokens": 9, "output_tokens": 2}}
    sent, transport = _capture(reply)
    model = Anthropic(
        "claude-sonnet-4-5", base_url="http://127.0.0.1:1", api_key="k", stream=False, cache=False,
        max_tokens=1024, transport=transport,
    )  # fmt: skip
    result = Agent(model).run_sync(LAST, context=Context(NOTES))
    assert result.output == "A cat."
    assert sent == [ANTHROPIC_BODY.encode()]


def test_a_part_a_vendor_cannot_take_is_refused_before_any_request() -> None:
    sent, transport = _capture({})
    openai = OpenAICompatible(
        "gpt-4o", base_url="http://127.0.0.1:1/v1", api_key="k", stream=False, transport=transport
    )
    with pytest.raises(UserError, match="takes files as bytes, not URLs"):
        Agent(openai).run_sync(Message.user("read", File(url="https://example.com/a.pdf")))
    claude = Anthropic(
        "claude-sonnet-4-5", base_url="http://127.0.0.1:1", api_key="k", stream=False, transport=transport
    )
    with pytest.raises(UserError, match="Anthropic takes documents of"):
        Agent(claude).run_sync(Message.user("read", File(b"PK\x03\x04", "application/zip", "a.zip")))
    assert sent == []
