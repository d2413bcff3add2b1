"""Many clients at once on one server process: every item stored once, every follower sees
every item of every thread it follows, in order."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path

from tests.support.ws_client import WsClient, WsServerProcess

WRITERS, FOLLOWERS, ITEMS = 50, 5, 200


class Follower:
    """A subscriber's view: the item ids it was told about, per thread, in arrival order."""

    def __init__(self, client: WsClient) -> None:
        self.client = client
        self.seen: dict[str, list[dict]] = {}
        self._read = 0
        self.total = 0

    def catch_up(self) -> int:
        notifications = self.client.notifications
        for note in notifications[self._read :]:
            if note["method"] == "item/recorded":
                items = note["params"]["items"]
                self.seen.setdefault(note["params"]["threadId"], []).extend(items)
                self.total += len(items)
        self._read = len(notifications)
        return self.total


async def test_50_writers_with_5_followers_store_and_deliver_every_item_in_order(
    ws_server: Callable[..., WsServerProcess], tmp_path: Path
) -> None:
    server = ws_server()
    writers = await asyncio.gather(
        *(WsClient.open(server.record, name=f"writer-{n}") for n in range(WRITERS))
    )
    followers = [
        Follower(await WsClient.open(server.record, name=f"follower-{n}")) for n in range(FOLLOWERS)
    ]
    started = await asyncio.gather(
        *(w.request("thread/start", {"cwd": str(tmp_path)}) for w in writers)
    )
    thread_ids = [s["thread"]["threadId"] for s in started]
    for follower in followers:
        await asyncio.gather(
            *(follower.client.request("thread/subscribe", {"threadId": t}) for t in thread_ids)
        )
    sent: dict[str, list[str]] = {t: [] for t in thread_ids}

    async def record(writer: WsClient, thread_id: str, session_id: str) -> None:
        for n in range(ITEMS):
            item = {"type": "message", "id": str(uuid.uuid4()), "role": "user", "content": f"{n}"}
            answer = await writer.request(
                "thread/record", {"threadId": thread_id, "sessionId": session_id, "items": [item]}
            )
            assert answer["firstSeq"] == n + 2  # seq 1 is the thread's session_meta
            sent[thread_id].append(item["id"])

    await asyncio.gather(
        *(
            record(w, s["thread"]["threadId"], s["sessionId"])
            for w, s in zip(writers, started, strict=True)
        )
    )

    reader = writers[0]
    for thread_id, ids in sent.items():
        items = (await reader.request("thread/read", {"threadId": thread_id, "limit": 1000}))[
            "items"
        ]
        assert [i["id"] for i in items if i["type"] == "message"] == ids  # once each, in order
    for follower in followers:
        await follower.client.wait_for(lambda f=follower: f.catch_up() == WRITERS * ITEMS)
        for thread_id, ids in sent.items():
            seen = follower.seen[thread_id]
            assert [i["id"] for i in seen] == ids
            assert [i["seq"] for i in seen] == list(range(2, ITEMS + 2))
    await asyncio.gather(*(c.close() for c in [*writers, *(f.client for f in followers)]))
