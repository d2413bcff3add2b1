"""One client paging through a huge thread never holds another client's record: pages are
read off the store thread (files are append-only; readers need no lock). A real server and
two real WebSocket clients; what is asserted is the order in which the server produced its
messages on one connection, never how long anything took."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path

from tests.ws_client import WsClient, WsServerProcess

ITEMS, BATCH, PAGE, READS = 20_000, 1000, 2000, 40


def message() -> dict:
    return {"type": "message", "id": str(uuid.uuid4()), "role": "user", "content": "x" * 900}


async def test_a_record_is_answered_while_another_client_pages_through_a_huge_thread(
    ws_server: Callable[..., WsServerProcess], tmp_path: Path
) -> None:
    server = ws_server(env={"SESSIOND_DEBUG": "1"})  # relayReads, should the order be off
    reader = await WsClient.open(server.record, name="reader")
    writer = await WsClient.open(server.record, name="writer")
    huge = await writer.request("thread/start", {"cwd": str(tmp_path)})
    huge_id = huge["thread"]["threadId"]
    for _ in range(0, ITEMS, BATCH):
        items = [message() for _ in range(BATCH)]
        params = {"threadId": huge_id, "sessionId": huge["sessionId"], "items": items}
        await writer.request("thread/record", params)
    small = await writer.request("thread/start", {"cwd": str(tmp_path)})
    small_id = small["thread"]["threadId"]
    # The reader follows the small thread: the server tells it of the record on the same
    # connection as its pages, so their order there is the order the server finished them.
    await reader.request("thread/subscribe", {"threadId": small_id})

    start = len(reader.arrivals)
    reads = [
        await reader.start_request(
            "thread/read", {"threadId": huge_id, "afterSeq": (n * PAGE) % ITEMS, "limit": PAGE}
        )
        for n in range(READS)
    ]
    await asyncio.wait(reads, return_when=asyncio.FIRST_COMPLETED)  # the pages are under way
    # Pages this client had already taken in when it sent the record are not a delay of
    # the record's (parsing ~2 MB pages, it may be slow to send it). Answers arrive by id,
    # notifications by method.
    before = sum(1 for a in reader.arrivals[start:] if "/" not in a)
    record = await writer.request(
        "thread/record",
        {"threadId": small_id, "sessionId": small["sessionId"], "items": [message()]},
    )
    await asyncio.gather(*reads)

    assert record["lastSeq"] == 2
    assert all(len(read.result()["result"]["items"]) == PAGE for read in reads)
    read_ids = {str(read.result()["id"]) for read in reads}
    order = [a for a in reader.arrivals if a in read_ids or a == "item/recorded"]
    # Queued behind the pages on one store thread, the record would come after all of them.
    # (A follower's item is sent as the record is answered: no read of the thread is
    # needed, so none may queue behind the pages; relayReads says whether one did.)
    debug = await writer.request("sessiond/debug", {})
    later = order.index("item/recorded") - before  # pages done after the record was sent
    assert later < (READS - before) // 2, (before, order, debug.get("relayReads"))
    assert debug["relayReads"] == 0
    await reader.close()
    await writer.close()
