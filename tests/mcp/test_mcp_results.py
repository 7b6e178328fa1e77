"""How each kind of MCP content becomes the note the model reads (and what stays on the result)."""

from __future__ import annotations

import base64

import pytest

from tether.mcp import McpBlob
from tether.mcp._results import to_result

t = pytest.importorskip("mcp_types", reason="needs tether[mcp]")

PNG = b"\x89PNG\r\n\x1a\n" + bytes(12)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_every_kind_of_content_has_a_line_and_binary_content_keeps_its_bytes() -> None:
    result = to_result(
        t.CallToolResult(
            content=[
                t.TextContent(type="text", text="two files:"),
                t.ImageContent(type="image", data=b64(PNG), mime_type="image/png"),
                t.AudioContent(type="audio", data=b64(b"RIFF"), mime_type="audio/wav"),
                t.ResourceLink(type="resource_link", uri="file:///a.txt", name="a.txt", mime_type="text/plain"),
                t.EmbeddedResource(type="resource", resource=t.TextResourceContents(uri="file:///b.txt", text="hello")),
                t.EmbeddedResource(
                    type="resource",
                    resource=t.BlobResourceContents(uri="file:///c.bin", blob=b64(b"\x00\x01"), mime_type="x/bin"),
                ),
            ]
        )
    )
    assert result.text.splitlines() == [
        "two files:",
        "[image image/png, 20 bytes]",
        "[audio audio/wav, 4 bytes]",
        "[resource link file:///a.txt (a.txt) text/plain]",
        "[resource file:///b.txt]",
        "hello",
        "[resource file:///c.bin x/bin, 2 bytes]",
    ]
    assert result.blobs == (
        McpBlob("image", "image/png", PNG),
        McpBlob("audio", "audio/wav", b"RIFF"),
        McpBlob("resource", "x/bin", b"\x00\x01", "file:///c.bin"),
    )
    assert not result.is_error


def test_structured_content_is_shown_when_the_server_sent_no_text() -> None:
    only = to_result(t.CallToolResult(content=[], structured_content={"b": 1, "a": [2]}))
    both = to_result(t.CallToolResult(content=[t.TextContent(type="text", text="a=2")], structured_content={"a": 2}))
    assert (only.text, only.structured) == ('{"a": [2], "b": 1}', {"b": 1, "a": [2]})
    assert (both.text, both.structured) == ("a=2", {"a": 2})


def test_is_error_is_kept() -> None:
    result = to_result(t.CallToolResult(content=[t.TextContent(type="text", text="no such file")], is_error=True))
    assert (result.text, result.is_error) == ("no such file", True)


def test_an_image_a_model_can_take_is_an_image_part_of_the_note_in_its_place() -> None:
    from tether._loop.calls import result_content
    from tether.parts import Image

    result = to_result(
        t.CallToolResult(
            content=[
                t.TextContent(type="text", text="the chart:"),
                t.ImageContent(type="image", data=b64(PNG), mime_type="image/png"),
                t.ImageContent(type="image", data=b64(b"BM.."), mime_type="image/bmp"),  # no model takes BMP
            ]
        )
    )
    assert result.content == ["the chart:", Image(PNG, "image/png"), "[image image/bmp, 4 bytes]"]
    note = result_content(result.content)
    assert isinstance(note, tuple) and note[1] == Image(PNG, "image/png")
    text_only = to_result(t.CallToolResult(content=[t.TextContent(type="text", text="3 files")]))
    assert text_only.content == "3 files"
