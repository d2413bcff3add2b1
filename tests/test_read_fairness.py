"""One client paging through a huge thread never holds another client's record: pages are
read off the store thread (files are append-only; readers need no lock). A real server and
two real WebSocket clients. The page reads are held at a pause point (restore/faults.py)
while the record is made: what is asserted is what the server did while a read was
provably under way, never how long anything took."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from tests.support.items import message
from tests.support.wait import eventually
from tests.support.ws_client import WsClient, WsServerProcess

ITEMS, BATCH, PAGE, READS = 20_000, 1000, 2000, 8


async def test_a_record_is_answered_while_another_client_pages_through_a_huge_thread(
    ws_server: Callable[..., WsServerProcess], tmp_path: Path
) -> None:
    pause = tmp_path / "pause"
    pause.mkdir()
    server = ws_server(env={"SESSIOND_DEBUG": "1", "SESSIOND_PAUSE_AT": f"thread-read:{pause}"})
    reader = await WsClient.open(server.record, name="reader")
    writer = await WsClient.open(server.record, name="writer")
    huge = await writer.request("thread/start", {"cwd": str(tmp_path)})
    huge_id = huge["thread"]["threadId"]
    for _ in range(0, ITEMS, BATCH):
        items = [message("x" * 900) for _ in range(BATCH)]
        params = {"threadId": huge_id, "sessionId": huge["sessionId"], "items": items}
        await writer.request("thread/record", params)
    small = await writer.request("thread/start", {"cwd": str(tmp_path)})
    small_id = small["thread"]["threadId"]
    # The reader follows the small thread: the server tells it of the record on the same
    # connection as its pages.
    await reader.request("thread/subscribe", {"threadId": small_id})

    reads = [
        await reader.start_request(
            "thread/read", {"threadId": huge_id, "afterSeq": (n * PAGE) % ITEMS, "limit": PAGE}
        )
        for n in range(READS)
    ]
    # A page is being read right now, and every read waits: held at the pause point.
    await asyncio.to_thread(eventually, (pause / "thread-read.reached").exists, "a page read")
    # Queued behind the pages on one store thread, the record would wait for the reads
    # (for ever: they wait for this test). It is answered, and its follower told, first.
    record = await writer.request(
        "thread/record",
        {"threadId": small_id, "sessionId": small["sessionId"], "items": [message("small")]},
    )
    await reader.wait_for(lambda: "item/recorded" in reader.arrivals)
    answered_while_paused = [read for read in reads if read.done()]
    (pause / "thread-read.go").touch()
    pages = await asyncio.gather(*reads)

    assert record["lastSeq"] == 2
    assert answered_while_paused == []  # the reads were still under way
    assert all(len(page["result"]["items"]) == PAGE for page in pages)
    # A follower's item is sent as the record is answered: no read of the thread is
    # needed, so none may queue behind the pages.
    debug = await writer.request("sessiond/debug", {})
    assert debug["relayReads"] == 0
    await reader.close()
    await writer.close()
