"""The frame decoder: both framings, any chunking, oversized frames skipped in sync."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from server.rpc.framing import (
    BadHeader,
    Frame,
    FrameDecoder,
    FrameTooLarge,
    Framing,
    NotAMessage,
    encode,
)

bodies = st.lists(
    st.dictionaries(st.text(max_size=5), st.text(max_size=40), max_size=4).map(
        lambda d: json.dumps({"jsonrpc": "2.0", "method": "m", "params": d}).encode()
    ),
    min_size=1,
    max_size=8,
)


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, last = [], 0
    for point in [*points, len(data)]:
        pieces.append(data[last:point])
        last = point
    return pieces


@given(bodies, st.sampled_from(list(Framing)), st.lists(st.integers(0, 10_000), max_size=20))
def test_any_chunking_yields_the_same_frames(
    messages: list[bytes], framing: Framing, cuts: list[int]
) -> None:
    stream = b"".join(encode(framing, body) for body in messages)
    decoder = FrameDecoder()
    events = [e for chunk in _chunks(stream, cuts) for e in decoder.feed(chunk)]
    assert events == [Frame(body) for body in messages]
    assert decoder.framing is framing


@given(
    st.sampled_from(list(Framing)),
    st.integers(101, 5000),
    st.lists(st.integers(0, 9000), max_size=10),
)
def test_oversized_frame_is_skipped_and_the_next_one_decodes(
    framing: Framing, size: int, cuts: list[int]
) -> None:
    big = b'{"x":"' + b"a" * size + b'"}'
    small = b'{"ok":1}'
    stream = encode(framing, small) + encode(framing, big) + encode(framing, small)
    decoder = FrameDecoder(max_frame=100)
    events = [e for chunk in _chunks(stream, cuts) for e in decoder.feed(chunk)]
    assert events[0] == Frame(small) and events[-1] == Frame(small)
    assert len(events) == 3 and isinstance(events[1], FrameTooLarge)


def test_framing_is_detected_from_the_first_bytes() -> None:
    lines = FrameDecoder()
    assert lines.feed(b'\n  {"a":1}\n[1]\n') == [Frame(b'{"a":1}'), Frame(b"[1]")]
    assert lines.framing is Framing.LINES
    headers = FrameDecoder()
    assert headers.feed(b"content-length: 2\r\nContent-Type: x\r\n\r\n{}") == [Frame(b"{}")]
    assert headers.framing is Framing.HEADERS


def test_header_without_length_is_reported_and_decoding_resumes() -> None:
    decoder = FrameDecoder()
    events = decoder.feed(b"Content-Type: x\r\nX-Nonsense: 1\r\n\r\nContent-Length: 2\r\n\r\n{}")
    assert isinstance(events[0], BadHeader) and events[1:] == [Frame(b"{}")]


def test_a_first_line_of_neither_framing_is_reported_and_the_next_one_decides() -> None:
    """Issue 35: `hello` typed at a terminal once switched the stream to headers for
    good, and every JSON line after it was swallowed in silence."""
    lines = FrameDecoder()
    assert lines.feed(b"hello\n") == [NotAMessage(b"hello")]
    assert lines.framing is None
    assert lines.feed(b'{"a":1}\n') == [Frame(b'{"a":1}')]
    assert lines.framing is Framing.LINES
    headers = FrameDecoder()
    events = headers.feed(b"X-Nonsense: 1\r\n\r\nContent-Len")
    assert events == [NotAMessage(b"X-Nonsense: 1")] and headers.framing is None
    assert headers.feed(b"gth: 2\r\n\r\n{}") == [Frame(b"{}")]
    assert headers.framing is Framing.HEADERS
    long = FrameDecoder()
    assert long.feed(b"x" * 10_000) == [NotAMessage(b"x" * 200)]
    assert long.feed(b"y" * 10_000 + b'\n{"b":2}\n') == [Frame(b'{"b":2}')]


@given(st.binary(max_size=3000))
def test_arbitrary_bytes_never_raise(data: bytes) -> None:
    decoder = FrameDecoder(max_frame=512)
    for event in decoder.feed(data):
        assert isinstance(event, Frame | FrameTooLarge | BadHeader | NotAMessage)
