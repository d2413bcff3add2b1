"""A stdio client's `initialize`, answered before the server's modules are imported.

Every editor window spawns `sessiond serve --stdio` and waits for `initialize`'s answer
before it shows anything. That answer is a constant of the configuration
(server/handlers/handshake.py `answer`), yet importing asyncio, orjson and the server took
~60 ms of this machine kind's ~95 ms before it could be sent (docs/benchmarks.md, "Opening a
window from spawn"). So the first message is read here, blocking, with nothing loaded but
the frame decoder, the handshake's checks and the standard library's `json`; when it is a
well-formed `initialize` the answer is written at once, and the server starts after,
taking the connection as initialized and the bytes read past the first message as its
first input. Anything else — a notification, a batch, a first line that is not JSON, a
value the two JSON readers could read differently — is answered by nothing here: every
byte goes to the server, which answers it as it always has.
"""

from __future__ import annotations

import os

from server.config import ServerConfig
from server.rpc.framing import Event, Frame, FrameDecoder, encode

TYPE_CHECKING = False  # as typing's, without importing typing
if TYPE_CHECKING:
    from typing import Any

CHUNK = 1 << 16
SAFE_ID = 1 << 53
"""Integer ids beyond this are left to the server's reader (orjson refuses some that
`json` takes)."""


class Opening:
    """What was read before the server started: the decoder (its framing and the bytes it
    holds), the events it decoded that nobody has handled, whether input has ended, and —
    when `initialize` was answered here — that connection's folders and client info."""

    def __init__(self, decoder: FrameDecoder, events: list[Event], ended: bool) -> None:
        self.decoder = decoder
        self.events = events
        self.ended = ended
        self.answered = False
        self.folders: list[dict[str, Any]] = []
        self.client_info: dict[str, Any] | None = None


def answer_initialize(config: ServerConfig, stdin: int = 0, stdout: int = 1) -> Opening:
    """Read up to the first message on `stdin`; answer it on `stdout` if it is
    `initialize`. Returns what the server needs to go on."""
    decoder = FrameDecoder(config.max_frame)
    events: list[Event] = []
    while not events:
        chunk = os.read(stdin, CHUNK)
        if not chunk:
            return Opening(decoder, events, ended=True)
        events = decoder.feed(chunk)
    first = events[0]
    request = _initialize_request(first.body) if isinstance(first, Frame) else None
    if request is None or decoder.framing is None:
        return Opening(decoder, events, ended=False)
    msg_id, params = request
    from protocol.errors import ProtocolError
    from server.handlers import handshake

    try:
        folders, client_info = handshake.accept(params)
    except ProtocolError:
        return Opening(decoder, events, ended=False)  # the server says what is wrong
    import json

    result = handshake.answer(config)
    body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": result}, separators=(",", ":"))
    _write_all(stdout, encode(decoder.framing, body.encode()))
    opening = Opening(decoder, events[1:], ended=False)
    opening.answered = True
    opening.folders = folders
    opening.client_info = client_info
    return opening


def _initialize_request(body: bytes) -> tuple[int | str, dict[str, Any]] | None:
    """(id, params) of a plain `initialize` request, else None. Read with `json` only when
    it cannot differ from the server's reader (orjson, lone surrogates mended): no escape
    sequence, no NaN or Infinity, a small id."""
    if b"\\u" in body:
        return None
    import json

    def refuse(constant: str) -> Any:
        raise ValueError(constant)

    try:
        message = json.loads(body, parse_constant=refuse)
    except ValueError:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    if message.get("method") != "initialize":
        return None
    msg_id = message.get("id")
    if isinstance(msg_id, bool) or not (
        isinstance(msg_id, str) or (isinstance(msg_id, int) and abs(msg_id) < SAFE_ID)
    ):
        return None
    params = message.get("params")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        return None
    return msg_id, params


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
