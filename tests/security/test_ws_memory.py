"""Clients that stop reading cannot make the WebSocket server hold memory without bound,
however many there are.

Threat: an authenticated client (a buggy harness, an agent driving one) that subscribes to
a busy thread and never reads. Each client's queue was bounded (4 frames), but not their
sum: 5 such subscribers while a writer recorded 600 KB batches took the server from 42 to
383 MiB. All queues together are bounded now; the slowest clients are dropped, told why
(`connection/dropped`, sent should they read again) and named in the log, while a client
that reads gets every notification. Memory is measured from /proc of the real server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Callable
from pathlib import Path

import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tests.support.rpc_client import HANG_GUARD
from tests.support.ws_client import WsClient, WsServerProcess

MIB = 1 << 20
STALLED = 5
BATCHES = 200
BATCH_BYTES = 600_000
HELD_BOUND = 128 * MIB
"""What the server's peak RSS may grow by while the 5 stay stalled: the 64 MiB all queues
together may hold (4 frames of the default 16 MiB), plus the writer's own traffic."""


def vm_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


async def stalled_subscriber(record: dict, thread_id: str) -> ClientConnection:
    """Initialized and subscribed (both answers read), then never read from again: with a
    queue of one message the client stops taking bytes off its socket."""
    ws = await connect(
        f"ws://127.0.0.1:{record['port']}",
        additional_headers={"Authorization": f"Bearer {record['token']}"},
        max_queue=1,
        max_size=None,
    )
    for n, (method, params) in enumerate(
        [("initialize", {}), ("thread/subscribe", {"threadId": thread_id})], 1
    ):
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": n, "method": method, "params": params}))
        assert "error" not in json.loads(await ws.recv())
    return ws


async def read_to_the_end(ws: ClientConnection) -> list[dict]:
    """Everything the server still sends, until it closes the connection."""
    messages = []
    with contextlib.suppress(ConnectionClosed):
        async with asyncio.timeout(HANG_GUARD):
            async for frame in ws:
                messages.append(orjson.loads(frame))
    return messages


async def test_stalled_subscribers_together_hold_bounded_memory_and_the_slowest_are_dropped(
    ws_server: Callable[..., WsServerProcess], tmp_path: Path
) -> None:
    server = ws_server()
    writer = await WsClient.open(server.record)
    started = await writer.request("thread/start", {"cwd": str(tmp_path)})
    tid, sid = started["thread"]["threadId"], started["sessionId"]
    reader = await WsClient.open(server.record)
    await reader.request("thread/subscribe", {"threadId": tid})
    stalled = [await stalled_subscriber(server.record, tid) for _ in range(STALLED)]
    before = vm_kib(server.proc.pid, "VmHWM") * 1024
    for _ in range(BATCHES):
        item = {"type": "message", "id": str(uuid.uuid4()), "role": "user",
                "content": "x" * BATCH_BYTES}  # fmt: skip
        answer = await writer.request(
            "thread/record", {"threadId": tid, "sessionId": sid, "items": [item]}
        )
    assert answer["lastSeq"] == BATCHES + 1  # every record went through
    grown = vm_kib(server.proc.pid, "VmHWM") * 1024 - before
    assert grown < HELD_BOUND, f"peak RSS grew by {grown / MIB:.0f} MiB"
    await reader.wait_for(
        lambda: sum(n["method"] == "item/recorded" for n in reader.notifications) == BATCHES
    )  # the client that reads misses nothing
    log = server.stderr()
    assert log.count("dropping WebSocket client") == STALLED, log[-3000:]
    for ws in stalled:  # each was dropped, and is told why once it reads
        messages = await read_to_the_end(ws)
        [dropped] = [m for m in messages if m.get("method") == "connection/dropped"]
        assert dropped["params"]["queuedBytes"] > 0 and dropped["params"]["reason"]
        assert messages[-1] is dropped  # nothing after it
    await writer.close()
    await reader.close()
