"""The wire holds against a misbehaving client and against other local processes.

Threats: a client that sends ids or envelopes the server does not expect, or never reads
its answers; a local process (another user, a web page through DNS rebinding) that opens
connections it cannot authenticate, or sends odd handshakes. Each test drives a real
server process over its real pipe or socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.faults.helpers import Spawn, start
from tests.support.rpc_client import HANG_GUARD
from tests.support.ws_client import WsClient, WsServerProcess

WsSpawn = Callable[..., WsServerProcess]


def _frame(message: dict, framing: str) -> bytes:
    body = json.dumps(message).encode()
    return body + b"\n" if framing == "lines" else b"Content-Length: %d\r\n\r\n" % len(body) + body


@pytest.mark.parametrize("framing", ["headers", "lines"])
@pytest.mark.parametrize("bad_id", [[1], {"id": 1}])
def test_cancel_request_with_a_structured_id_cancels_nothing_and_serving_goes_on(
    spawn: Spawn, framing: str, bad_id: object
) -> None:
    server = spawn(framing=framing)
    server.initialize()
    # A request in flight when the cancel arrives, and one right behind it, in one read.
    in_flight = {"jsonrpc": "2.0", "id": 98, "method": "thread/list", "params": {}}
    cancel = {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": bad_id}}
    listing = {"jsonrpc": "2.0", "id": 99, "method": "thread/list", "params": {}}
    server.send_raw(b"".join(_frame(m, framing) for m in (in_flight, cancel, listing)))
    assert server.response(98)["result"]["threads"] == []
    assert server.response(99)["result"]["threads"] == []


async def test_cancel_request_with_a_structured_id_keeps_the_websocket_open(
    ws_server: WsSpawn,
) -> None:
    client = await WsClient.open(ws_server().record)
    in_flight = await client.start_request("thread/list")
    await client.notify("$/cancelRequest", {"id": [1, 2]})
    assert (await client.request("thread/list"))["threads"] == []
    assert (await asyncio.wait_for(in_flight, HANG_GUARD))["result"]["threads"] == []
    await client.close()


def test_a_request_method_sent_as_a_notification_is_not_run(spawn: Spawn, tmp_path: Path) -> None:
    server = spawn()
    server.initialize()
    tid, sid = start(server, tmp_path)
    server.notify("thread/start", {"cwd": str(tmp_path)})
    item = {"type": "message", "id": str(uuid.uuid4()), "role": "user", "content": "lost?"}
    server.notify("thread/record", {"threadId": tid, "sessionId": sid, "items": [item]})
    assert [t["threadId"] for t in server.request("thread/list", {})["threads"]] == [tid]
    items = server.request("thread/read", {"threadId": tid})["items"]
    assert [i["type"] for i in items] == ["session_meta"]  # the record did not run either
    assert server.shutdown() == 0
    log = server.stderr_path.read_text()
    assert "never awaited" not in log
    assert "sent as a notification" in log


def test_no_answer_is_larger_than_max_frame(spawn: Spawn, tmp_path: Path) -> None:
    server = spawn(args=["--max-frame", "8192"], env={"SESSIOND_DURABILITY": "none"})
    server.initialize()
    for n in range(20):
        start(server, tmp_path, title=f"{n:02d} " + "t" * 490)
    reply = server.response(server.request_async("thread/list", {"limit": 200}))
    assert reply["error"]["data"]["kind"] == "PayloadTooLarge"
    assert reply["error"]["data"]["limit"] == 8192
    assert len(server.request("thread/list", {"limit": 3})["threads"]) == 3  # ask for less


async def test_a_websocket_client_that_never_reads_is_dropped_and_others_are_served(
    ws_server: WsSpawn, tmp_path: Path
) -> None:
    server = ws_server("--max-frame", "65536")
    writer = await WsClient.open(server.record)
    started = await writer.request("thread/start", {"cwd": str(tmp_path)})
    tid, sid = started["thread"]["threadId"], started["sessionId"]
    items = [{"type": "message", "id": str(uuid.uuid4()), "role": "user", "content": "x" * 1400}
             for _ in range(40)]  # fmt: skip
    await writer.request("thread/record", {"threadId": tid, "sessionId": sid, "items": items})
    # A client whose reads stop after one frame: everything else waits in the server.
    stalled = await connect(
        f"ws://127.0.0.1:{server.record['port']}",
        additional_headers={"Authorization": f"Bearer {server.record['token']}"},
        max_queue=1,
    )
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}
    await stalled.send(json.dumps(init))
    dropped = False
    for n in range(1, 3000):  # ~60 KB answers: far more than the kernel's socket buffers
        read = {"jsonrpc": "2.0", "id": n, "method": "thread/read", "params": {"threadId": tid}}
        try:
            await stalled.send(json.dumps(read))
            if n % 50 == 0:
                await asyncio.sleep(0.05)  # let the server answer into its outbox
        except ConnectionClosed:
            dropped = True
            break
    if not dropped:  # the drop may land after the last send: its close is then seen here
        with contextlib.suppress(ConnectionClosed, TimeoutError):
            await asyncio.wait_for(stalled.wait_closed(), HANG_GUARD)
        dropped = stalled.state.name == "CLOSED"
    assert dropped
    assert "stopped reading" in server.stderr()
    assert len((await writer.request("thread/read", {"threadId": tid}))["items"]) == 41
    await writer.close()


def _handshake(port: int, *headers: str) -> str:
    """A hand-written upgrade request; returns the response's status line."""
    request = (
        "GET / HTTP/1.1\r\n"
        "Upgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        + "".join(f"{header}\r\n" for header in headers)
        + "\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD) as sock:
        sock.sendall(request.encode())
        return sock.makefile("rb").readline().decode().strip()


def test_two_authorization_headers_are_refused_not_a_server_error(
    ws_server: WsSpawn,
) -> None:
    server = ws_server()
    port, token = server.record["port"], server.record["token"]
    status = _handshake(port, f"Host: 127.0.0.1:{port}", f"Authorization: Bearer {token}",
                        "Authorization: Bearer other")  # fmt: skip
    assert status.split()[1] == "400"
    assert "Traceback" not in server.stderr()
    ok = _handshake(port, f"Host: 127.0.0.1:{port}", f"Authorization: Bearer {token}")
    assert ok.split()[1] == "101"


@pytest.mark.parametrize("host", ["evil.example:{port}", "sessiond.attacker.test", None])
def test_a_host_that_is_not_loopback_is_refused_dns_rebinding(
    ws_server: WsSpawn, host: str | None
) -> None:
    server = ws_server()
    port, token = server.record["port"], server.record["token"]
    headers = [f"Authorization: Bearer {token}"]
    if host is not None:
        headers.append(f"Host: {host.format(port=port)}")
    assert _handshake(port, *headers).split()[1] == "403"
    for name in ("127.0.0.1", "localhost"):
        status = _handshake(port, f"Host: {name}:{port}", f"Authorization: Bearer {token}")
        assert status.split()[1] == "101"


async def test_idle_unauthenticated_sockets_are_capped_and_a_client_still_gets_in(
    ws_server: WsSpawn,
) -> None:
    server = ws_server()
    idle = [socket.create_connection(("127.0.0.1", server.record["port"])) for _ in range(200)]
    try:
        client = await WsClient.open(server.record)  # accepted after all 200: a sync point
        assert (await client.request("thread/list"))["threads"] == []
        assert len(_open_sockets(server.proc.pid)) <= 64 + 4  # the cap, the listener, the client
        await client.close()
    finally:
        for sock in idle:
            sock.close()


def _open_sockets(pid: int) -> list[str]:
    found = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue  # closed meanwhile: the server is closing the oldest idle sockets
        if target.startswith("socket:"):
            found.append(fd)
    return found


def test_refusals_are_logged_at_a_bounded_rate(ws_server: WsSpawn) -> None:
    server = ws_server()
    port = server.record["port"]
    for _ in range(300):
        assert _handshake(port, f"Host: 127.0.0.1:{port}").split()[1] == "401"
    log = server.stderr()
    assert log.count("refused WebSocket connection") <= 20
    assert "no token" in log
