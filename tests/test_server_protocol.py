"""Bad input over both framings: a typed error each time, and the server keeps serving."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.rpc_client import RpcError, ServerProcess

Spawn = Callable[..., ServerProcess]
FRAMINGS = ["headers", "lines"]


@pytest.mark.parametrize("framing", FRAMINGS)
def test_requests_before_initialize_get_32002(spawn: Spawn, framing: str) -> None:
    server = spawn(framing=framing)
    with pytest.raises(RpcError) as early:
        server.request("thread/list", {})
    assert early.value.code == -32002 and early.value.kind == "ServerNotInitialized"
    result = server.initialize()
    assert result["capabilities"]["subsystems"][0] == "worktree"
    assert result["capabilities"]["subsystems"][-1] == "verifier"
    assert server.request("thread/list", {}) == {"threads": [], "nextCursor": None}


def test_requests_piped_right_behind_initialize_are_served(spawn: Spawn, tmp_path: Path) -> None:
    """A script writes initialize and its first requests at once, without waiting for the
    answer: initialize takes effect before the next message is read."""
    server = spawn(framing="lines")
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "thread/start", "params": {"cwd": str(tmp_path)}},
        {"jsonrpc": "2.0", "id": 3, "method": "thread/list", "params": {}},
    ]
    server.send_raw(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
    assert "result" in server.response(1)
    started = server.response(2)["result"]["thread"]["threadId"]
    assert [t["threadId"] for t in server.response(3)["result"]["threads"]] == [started]


@pytest.mark.parametrize("framing", FRAMINGS)
def test_unknown_method_and_bad_params(spawn: Spawn, framing: str, tmp_path: Path) -> None:
    server = spawn(framing=framing)
    server.initialize()
    with pytest.raises(RpcError) as unknown:
        server.request("thread/teleport", {})
    assert unknown.value.code == -32601 and unknown.value.kind == "MethodNotFound"
    with pytest.raises(RpcError) as bad:
        server.request("thread/list", {"limit": "many"})
    assert bad.value.code == -32602 and bad.value.kind == "InvalidParams"
    assert bad.value.data["errors"][0]["loc"] == "limit"
    tid = server.request("thread/start", {"cwd": str(tmp_path)})["thread"]["threadId"]
    sid = server.request("thread/resume", {"threadId": tid})["session"]["sessionId"]
    with pytest.raises(RpcError) as server_only:
        server.request(
            "thread/record",
            {
                "threadId": tid,
                "sessionId": sid,
                "items": [
                    {
                        "type": "session_meta",
                        "id": "x",
                        "cwd": "/",
                        "threadId": tid,
                        "source": "startup",
                    }
                ],
            },
        )
    assert server_only.value.kind == "InvalidParams"
    with pytest.raises(RpcError) as missing:
        server.request("thread/read", {"threadId": "6f1e5a70-0000-4000-8000-000000000000"})
    assert missing.value.kind == "ThreadNotFound"


@pytest.mark.parametrize("framing", FRAMINGS)
def test_malformed_json_gets_parse_error_and_serving_continues(spawn: Spawn, framing: str) -> None:
    server = spawn(framing=framing)
    server.initialize()
    body = b'{"jsonrpc": "2.0", "id": 7, "method": "thread/list", "params": {'
    if framing == "lines":
        server.send_raw(body + b"\n")
    else:
        server.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    error = server.wait_orphan()["error"]
    assert error["code"] == -32700 and error["data"]["kind"] == "ParseError"
    server.send({"jsonrpc": "2.0", "id": 8, "method": 42})
    assert server.response(8)["error"]["data"]["kind"] == "InvalidRequest"
    server.send({"jsonrpc": "2.0", "id": 9, "method": "thread/list", "params": [1, 2]})
    assert server.response(9)["error"]["data"]["kind"] == "InvalidParams"
    server.send([{"jsonrpc": "2.0", "id": 10, "method": "thread/list"}])  # type: ignore[arg-type]
    assert server.wait_orphan()["error"]["data"]["kind"] == "InvalidRequest"
    assert server.request("thread/list", {})["threads"] == []


def test_clean_shutdown_exits_zero_and_exit_without_shutdown_exits_one(spawn: Spawn) -> None:
    server = spawn()
    server.initialize()
    assert server.shutdown() == 0
    rude = spawn()
    rude.initialize()
    rude.notify("exit")
    assert rude.proc.wait(timeout=60) == 1


def test_every_request_the_protocol_names_is_served(spawn: Spawn) -> None:
    """Each method of protocol/methods.py reaches a handler in a fresh server (none is
    MethodNotFound: `thread/subscribe` no longer depends on an import happening first),
    and the handler table names nothing else."""
    from protocol.methods import METHODS
    from server.handlers.table import HANDLERS

    assert sorted(HANDLERS) == sorted(METHODS)
    server = spawn()
    server.initialize()
    kinds = {}
    for method in METHODS:
        if method in ("initialize", "shutdown"):
            continue
        # Bad params on purpose: the handler's validation answers, nothing is changed.
        with pytest.raises(RpcError) as refused:
            server.request(method, {"threadId": 7, "cwd": 7, "limit": "many", "report": 7})
        kinds[method] = refused.value.kind
    assert kinds and set(kinds.values()) == {"InvalidParams"}


def test_a_first_line_that_is_not_a_message_gets_a_parse_error_and_the_next_one_is_served(
    spawn: Spawn,
) -> None:
    """Issue 35: `hello` typed first once switched the stream to headers for good: every
    JSON line after it was swallowed, and the server exited 0 without a word."""
    server = spawn(framing="lines")
    server.send_raw(b"hello there\n")
    error = server.wait_orphan()["error"]
    assert (error["code"], error["data"]["kind"]) == (-32700, "ParseError")
    assert error["message"].startswith("not a JSON-RPC message: 'hello there': send one JSON")
    server.initialize()
    assert server.request("thread/list", {})["threads"] == []
    assert server.shutdown() == 0
    headers = spawn()  # an LSP client's headers after the stray line: answered in its framing
    body = json.dumps({"jsonrpc": "2.0", "id": 99, "method": "initialize", "params": {}})
    headers.send_raw(b"Starting...\r\n" + b"Content-Length: %d\r\n\r\n" % len(body) + body.encode())
    assert headers.wait_orphan()["error"]["data"]["kind"] == "ParseError"
    assert headers.response(99)["result"]["protocolVersion"] == 1


def test_serve_on_a_terminal_says_what_it_expects_on_stderr(home: Path) -> None:
    """A person who runs `sessiond serve --stdio` at a terminal sees one line saying what it
    waits for, how to leave and where the methods are (a client on a pipe sees nothing)."""
    import os
    import pty
    import subprocess
    import sys

    from tests.support.rpc_client import REPO

    leader, follower = pty.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "server.cli", "--home", str(home), "serve", "--stdio"],
            stdin=follower,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        assert process.stderr is not None
        said = process.stderr.readline().decode()
        os.write(leader, b"\x04")  # Ctrl-D: the end of input
        assert process.wait(timeout=60) == 0
    finally:
        os.close(leader)
        os.close(follower)
    assert said == (
        "sessiond: serving JSON-RPC 2.0 on stdin/stdout: one JSON request a line (or "
        'Content-Length framed), the first {"jsonrpc":"2.0","id":1,"method":"initialize",'
        '"params":{}}; Ctrl-D ends it; every method: docs/protocol.md in the sessiond '
        "repository\n"
    )
    assert process.stderr.read() == b""
    piped = ServerProcess(home)
    try:
        piped.initialize()
        assert "serving JSON-RPC" not in piped.stderr()
    finally:
        piped.close()


def test_thread_start_records_its_first_turn_and_answers_as_its_notice_does(
    spawn: Spawn, tmp_path: Path
) -> None:
    """One request, a thread with content (the README's Try-it); its answer and the
    `thread/started` every client gets say the same but `childCount` (the notice counts, an
    answer is a snapshot a client may keep: not counted); an item it refuses starts nothing."""
    server = spawn()
    server.initialize()
    turn = [
        {"type": "message", "id": "q", "role": "user", "content": "where is it?"},
        {"type": "message", "id": "a", "role": "assistant", "content": "in the queue"},
    ]
    started = server.request("thread/start", {"cwd": str(tmp_path), "title": "t", "items": turn})
    (notice,) = server.wait_notification("thread/started")
    assert started["thread"] == {**notice["params"]["thread"], "childCount": None}
    assert notice["params"]["thread"]["childCount"] == 0
    assert started["thread"]["itemCount"] == 2
    assert started["thread"]["preview"] == "where is it?"
    items = server.request("thread/read", {"threadId": started["thread"]["threadId"]})["items"]
    assert [(i["type"], i.get("content")) for i in items] == [
        ("session_meta", None), ("message", "where is it?"), ("message", "in the queue")
    ]  # fmt: skip
    with pytest.raises(RpcError) as refused:
        server.request("thread/start", {"cwd": str(tmp_path), "items": [{"type": "lifecycle"}]})
    assert refused.value.kind == "InvalidParams" and "items[0]" in refused.value.message
    assert len(server.request("thread/list", {})["threads"]) == 1
