"""The SSE decoder: WHATWG line rules, and any chunking gives the same events."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tether.providers._sse import ServerSentEvent, SSEDecoder


def decode(*chunks: bytes) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    events = [ev for chunk in chunks for ev in decoder.feed(chunk)]
    return events + decoder.close()


def test_each_line_ending_style_ends_lines() -> None:
    for eol in (b"\n", b"\r\n", b"\r"):
        stream = b"data: a" + eol + eol + b"event: x" + eol + b"data: b" + eol + eol
        assert decode(stream) == [ServerSentEvent("a"), ServerSentEvent("b", "x")]


def test_comments_are_skipped_and_data_lines_join_with_newlines() -> None:
    stream = b": keep-alive\n\ndata: one\ndata:two\ndata:  three\n\n"
    assert decode(stream) == [ServerSentEvent("one\ntwo\n three")]


def test_an_event_without_data_is_not_dispatched_and_fields_reset() -> None:
    stream = b"event: ping\n\ndata: x\n\n"
    assert decode(stream) == [ServerSentEvent("x", "message")]


def test_ids_persist_and_unknown_fields_are_ignored() -> None:
    stream = b"id: 7\nretry: 10\nfoo: bar\ndata: a\n\ndata: b\n\n"
    assert decode(stream) == [ServerSentEvent("a", id="7"), ServerSentEvent("b", id="7")]


def test_an_unterminated_event_at_the_end_is_dropped() -> None:
    assert decode(b"data: complete\n\ndata: [DONE]") == [ServerSentEvent("complete")]
    assert decode(b"data: complete\n\ndata: cut\n") == [ServerSentEvent("complete")]


def test_a_crlf_split_across_chunks_is_one_line_end() -> None:
    assert decode(b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n") == [ServerSentEvent("a"), ServerSentEvent("b")]


def test_a_final_bare_cr_is_a_line_end_at_close() -> None:
    assert decode(b"data: a\r\r") == [ServerSentEvent("a")]


def test_multibyte_utf8_split_across_chunks_survives() -> None:
    data = "data: héllo ✓\n\n".encode()
    assert decode(*(data[i : i + 1] for i in range(len(data)))) == [ServerSentEvent("héllo ✓")]


text = st.text(alphabet=st.characters(blacklist_characters="\r\n\0", blacklist_categories=("Cs",)), max_size=20)
field = st.one_of(
    st.tuples(st.just("data"), text),
    st.tuples(st.just("event"), text),
    st.tuples(st.just("id"), text),
    st.tuples(st.just(""), text),  # a comment
)
event_lines = st.lists(field, min_size=0, max_size=4)


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    eol = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
    out = b""
    for lines in draw(st.lists(event_lines, max_size=6)):
        for name, value in lines:
            out += (f":{value}" if not name else f"{name}: {value}").encode() + eol
        out += eol
    return out


@given(streams(), st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_any_chunking_of_a_stream_gives_the_same_events(stream: bytes, cuts: list[int]) -> None:
    points = sorted({min(c, len(stream)) for c in cuts})
    chunks = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    assert decode(*chunks) == decode(stream)


@given(streams())
def test_byte_by_byte_feeding_gives_the_same_events(stream: bytes) -> None:
    assert decode(*(stream[i : i + 1] for i in range(len(stream)))) == decode(stream)


@given(st.lists(st.tuples(text, st.text(max_size=30)), max_size=5))
def test_encoded_events_decode_back_to_their_data(items: list[tuple[str, str]]) -> None:
    stream = b""
    expected = []
    for name, data in items:
        lines = data.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        stream += (f"event: {name}\n" if name else "").encode()
        stream += "".join(f"data: {line}\n" for line in lines).encode() + b"\n"
        expected.append(ServerSentEvent("\n".join(lines), name or "message"))
    assert decode(stream) == expected
