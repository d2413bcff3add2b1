"""Fuzzed JSON-RPC input on both transports: every message gets a typed answer or is ignored
as JSON-RPC says (notifications, responses), and the other clients keep being served.

One server process per test serves every example; after each example a probe request on
the same connection must be answered (so the connection still works), and a bystander
client on the WebSocket must be served too.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from protocol.errors import CODE_OF_KIND
from protocol.methods import METHODS
from tests.support.rpc_client import HANG_GUARD, ServerProcess
from tests.support.ws_client import WsServerProcess, wait_for_record

EXAMPLES = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# `shutdown` and `exit` end the session by design, so they are not fuzzed.
FUZZED_METHODS = [
    *sorted(set(METHODS) - {"shutdown"}),
    "initialized",
    "$/cancelRequest",
    "workspace/didChangeWorkspaceFolders",
    "thread/teleport",
    "",
]
KNOWN_CODES = set(CODE_OF_KIND.values())

huge_ints = st.integers(min_value=-(2**80), max_value=2**80)
json_values = st.recursive(
    st.none() | st.booleans() | huge_ints | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
uuids = st.uuids().map(str)
params = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {},
        optional={
            "threadId": st.one_of(uuids, json_values),
            "sessionId": st.one_of(uuids, json_values),
            "items": json_values,
            "limit": st.one_of(huge_ints, json_values),
            "afterSeq": huge_ints,
            "cursor": json_values,
            "search": json_values,
            "id": json_values,
        },
    ),
)
envelopes = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2, None]),
        "id": st.one_of(huge_ints, st.text(max_size=10), st.floats(allow_nan=False), json_values),
        "method": st.one_of(st.sampled_from(FUZZED_METHODS), json_values),
        "params": params,
        "result": json_values,
    },
)


def _deep(depth: int) -> bytes:
    nested = b"[" * depth + b"]" * depth
    return b'{"jsonrpc":"2.0","id":1,"method":"thread/list","params":{"x":' + nested + b"}}"


payloads = st.one_of(
    st.binary(max_size=200),
    json_values.map(lambda v: json.dumps(v).encode()),
    # (`exit` ends the session by design: a shrunk failure must not become one)
    envelopes.filter(lambda v: v.get("method") != "exit").map(lambda v: json.dumps(v).encode()),
    st.integers(min_value=1000, max_value=5000).map(_deep),
)


def _session_end(text: str) -> str | None:
    """ "exit" or "shutdown" when the frame is one that ends the session by design (random
    bytes can spell one: Hypothesis also draws the strings it finds in the code under
    test), else None."""
    try:
        message = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than json reads
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    if message.get("method") == "exit" and "id" not in message:
        return "exit"
    if message.get("method") == "shutdown" and "id" in message:
        return "shutdown"
    return None


def check_answers(answers: list[dict[str, Any]], payload: bytes) -> None:
    """Each answer is a JSON-RPC response with a result or a typed, known error."""
    for answer in answers:
        assert answer.get("jsonrpc") == "2.0" and "method" not in answer, answer
        if "error" in answer:
            error = answer["error"]
            assert error["code"] in KNOWN_CODES, (payload, error)
            assert isinstance(error["data"]["kind"], str), (payload, error)
            assert error["data"]["kind"] != "InternalError", (payload, error)
        else:
            assert "result" in answer and answer["id"] is not None, (payload, answer)


class SyncWs:
    """A blocking WebSocket JSON-RPC client: send, then read until the probe's answer."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        assert "result" in self.call("initialize", {})[-1]

    @classmethod
    @contextlib.contextmanager
    def open(cls, record: dict[str, Any]) -> Iterator[SyncWs]:
        with connect(
            f"ws://127.0.0.1:{record['port']}",
            additional_headers={"Authorization": f"Bearer {record['token']}"},
            max_size=None,
            open_timeout=HANG_GUARD,
        ) as ws:
            yield cls(ws)

    def call(self, method: str, params: Any) -> list[dict[str, Any]]:
        """Send a request; return every response read up to and including its answer."""
        probe = f"probe-{uuid.uuid4()}"
        self.ws.send(
            json.dumps({"jsonrpc": "2.0", "id": probe, "method": method, "params": params})
        )
        answers = []
        while True:
            message = json.loads(self.ws.recv(timeout=HANG_GUARD))
            if "method" in message:
                continue  # a notification (thread/started, ...)
            answers.append(message)
            if message.get("id") == probe:
                return answers


def test_fuzzed_stdio_input_is_answered_and_everyone_keeps_being_served(home: Path) -> None:
    stack = contextlib.ExitStack()
    server = ServerProcess(
        home, framing="lines", args=["--ws", "0"], env={"SESSIOND_DURABILITY": "none"}
    )
    try:
        server.initialize()
        bystander = stack.enter_context(SyncWs.open(wait_for_record(home, server.proc.pid)))

        @EXAMPLES
        @given(payload=payloads)
        def fuzz(payload: bytes) -> None:
            line = payload.replace(b"\n", b" ")
            # Ending the server is what these do; tests/test_server_protocol.py has them.
            assume(_session_end(line.decode("utf-8", errors="replace")) is None)
            server.send_raw(line + b"\n")
            probe = server.request_async("thread/list", {"limit": 1})
            assert "result" in server.response(probe)
            with server._lock:
                answers = [*server.orphans, *server.responses.values()]
                server.orphans.clear()
                server.responses.clear()
            check_answers(answers, payload)
            assert "result" in bystander.call("thread/list", {"limit": 1})[-1]

        fuzz()
        stack.close()
        assert server.shutdown() == 0
    finally:
        stack.close()
        server.close()


def test_fuzzed_websocket_frames_are_answered_and_everyone_keeps_being_served(home: Path) -> None:
    stack = contextlib.ExitStack()
    server = WsServerProcess(home)
    try:
        fuzzer = stack.enter_context(SyncWs.open(server.record))
        bystander = stack.enter_context(SyncWs.open(server.record))

        @EXAMPLES
        @example(payload=b'{"jsonrpc":"2.0","method":"exit"}\n', binary=True)
        @given(payload=payloads, binary=st.booleans())
        def fuzz(payload: bytes, binary: bool) -> None:
            nonlocal fuzzer
            text = payload.decode("utf-8", errors="replace")
            assume(_session_end(text) != "shutdown")  # the server's end, by design
            fuzzer.ws.send(payload if binary else text)
            if _session_end(text) == "exit":
                # `exit` (which random bytes can spell too) closes that client's connection,
                # by design: it is gone, and the server goes on for everyone else.
                with pytest.raises(ConnectionClosed):
                    fuzzer.call("thread/list", {"limit": 1})
                fuzzer = stack.enter_context(SyncWs.open(server.record))
            else:
                answers = fuzzer.call("thread/list", {"limit": 1})
                assert "result" in answers[-1]
                check_answers(answers[:-1], payload)
            assert "result" in bystander.call("thread/list", {"limit": 1})[-1]

        fuzz()
    finally:
        stack.close()
        server.close()
