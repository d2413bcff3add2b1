"""What waits to be sent to WebSocket clients: bounded per client, and for all together.

A client that stops reading must not make the server hold memory for it, whoever and
however many they are. Each client's queue holds at most `per_client` bytes, and every
queue together at most the budget's `total` (the frame being written to a socket counts
until the write is done: it is held in memory as long). A frame that would go past the
total first drops the slowest clients, those furthest behind (the most bytes waiting for
them; of equals, the one waiting longest), until it fits; a client past its own bound is
dropped itself. A client that reads has about one frame waiting at most, so the ones
that stopped go first.

A dropped client's queue is freed at once, and its connection is told why: one
`connection/dropped` notification, sent should it read again within DROP_GRACE, then the
connection is closed (aborted at the grace, or at once when the budget needs what it still
holds). Why not just abort, as before: a client that was only slow learns why it lost its
connection instead of finding it reset.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable

from server.rpc.refusals import RateLimitedLog

logger = logging.getLogger("sessiond.ws")
drops = RateLimitedLog(logger)
DROP_GRACE = 120.0
"""Seconds a dropped client has to read its notification before its socket is aborted."""
_CLOSE = b""  # in a queue: close the connection once what is before it is sent


class OutboxBudget:
    """The bytes queued for every client of one server, together."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.used = 0
        self.outboxes: set[Outbox] = set()

    def make_room(self, size: int) -> None:
        """Drop the slowest clients until `size` more bytes fit (a client dropped before
        that still holds the frame it was being sent is aborted)."""
        while self.used + size > self.total:
            waiting = [o for o in self.outboxes if o.queued and o.waiting_since is not None]
            if not waiting:
                return
            slowest = max(waiting, key=lambda o: (o.queued, -(o.waiting_since or 0.0)))
            slowest.drop(
                f"it is the slowest reader while all clients together have {self.used} bytes "
                f"queued (at most {self.total})"
            )


class Outbox:
    """One client's queue and the task that writes it to the socket, in order."""

    def __init__(
        self,
        budget: OutboxBudget,
        per_client: int,
        name: str,
        *,
        send: Callable[[bytes], Awaitable[None]],
        close: Callable[[str], Awaitable[None]],
        abort: Callable[[], None],
        notice: Callable[[str, int], bytes],
        on_drop: Callable[[], None],
    ) -> None:
        """`send` writes one frame (raising once the connection is gone), `close` closes it
        with a reason, `abort` resets it at once; `notice(reason, queued)` is the
        notification a dropped client gets; `on_drop` hears of the drop once."""
        self.budget = budget
        self.per_client = per_client
        self.name = name
        self._send, self._close, self._abort = send, close, abort
        self._notice, self._on_drop = notice, on_drop
        self._frames: deque[bytes] = deque()
        self._ready = asyncio.Event()
        self._sending = 0  # bytes of the frame being written
        self.queued = 0
        """Bytes held for this client: queued, and the frame being written."""
        self.waiting_since: float | None = None
        """When the oldest frame still held was queued (None: nothing is held)."""
        self.dropped = False
        self._finished = False
        self._grace: asyncio.TimerHandle | None = None
        budget.outboxes.add(self)

    def put(self, data: bytes) -> None:
        if self.dropped or self._finished:
            return
        if self.queued + len(data) > self.per_client:
            self.drop(f"it stopped reading ({self.queued} bytes queued for it)")
            return
        self.budget.make_room(len(data))
        if self.dropped:  # it was the slowest
            return  # type: ignore[unreachable]  # mypy keeps `dropped` False past make_room
        self._hold(data)

    def _hold(self, data: bytes) -> None:
        self._frames.append(data)
        self.queued += len(data)
        self.budget.used += len(data)
        if self.waiting_since is None:
            self.waiting_since = time.monotonic()
        self._ready.set()

    def drop(self, reason: str) -> None:
        """Free what is queued; tell the client why (once it reads) and close; a second
        drop (the budget needs the frame it still holds) aborts it at once."""
        if self.dropped:
            self._abort()
            self._release(self.queued)
            return
        self.dropped = True
        drops.warning("dropping WebSocket client %s: %s", self.name, reason)
        queued = self.queued
        self._release(self.queued - self._sending)
        self._frames.clear()
        self._hold(self._notice(reason, queued))
        self._frames.append(_CLOSE)
        self._grace = asyncio.get_running_loop().call_later(DROP_GRACE, self._abort)
        self._on_drop()

    def finish(self) -> None:
        """The connection ended: stop writing once what is queued is sent (or it fails)."""
        self._finished = True
        self._ready.set()

    async def run(self) -> None:
        """Write frames in the order they were queued, until the connection ends."""
        try:
            while True:
                if not self._frames:
                    if self._finished:
                        return
                    self._ready.clear()
                    await self._ready.wait()
                    continue
                data = self._frames.popleft()
                if data is _CLOSE:
                    await self._close("sessiond dropped this client: see connection/dropped")
                    return
                self._sending = len(data)
                try:
                    await self._send(data)
                finally:
                    self._sending = 0
                    self._release(len(data))
                if not self._frames:
                    self.waiting_since = None
        except Exception as exc:  # the connection is gone: nobody will read the rest
            logger.debug("WebSocket client %s: writer ends: %s", self.name, exc)
        finally:
            self._frames.clear()
            self._release(self.queued)
            self.budget.outboxes.discard(self)
            if self._grace is not None:
                self._grace.cancel()

    def _release(self, size: int) -> None:
        size = min(size, self.queued)
        self.queued -= size
        self.budget.used -= size
        if not self.queued:
            self.waiting_since = None
