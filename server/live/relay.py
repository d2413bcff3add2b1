"""`item/recorded` for followed threads, whoever wrote the items, on either store.

Another process's appends reach this server only as word that the thread changed: the
file watcher's (server/live/watch.py, several appends coalesced into one debounced event) or,
with the PostgreSQL store, LISTEN/NOTIFY (restore/stores/postgres/listener.py; none at all while
the listener reconnects). So for each thread that has followers here the relay keeps the
last seq it published, and when the thread changes elsewhere it reads the items after
that seq (`Pages.after`: the file through its offset map, or the rows) and publishes them:
exactly the new items, in seq order, once each, whatever was coalesced or missed.

- Threads nobody here follows cost nothing: no state, no query per notification.
- This server's own appends (`thread/record`'s) are published from memory when they
  follow the last seq published; when they do not (another machine wrote in between,
  or a read is under way), the rows are read instead, so order holds.
- Reads run on the server's reader threads, never on the event loop, one at a time per
  thread, a page per notification: at most `PAGE_ITEMS` items and never more bytes than
  `--max-frame` (a thread that grew by 100k items while this server was away goes out as
  many notifications, not one).
- Every (re)start of the PostgreSQL listener (`listening`) reads every followed thread
  once: what was written before LISTEN was in place, or while it was lost, cannot have
  been announced.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import orjson

from protocol.errors import ErrorKind, ProtocolError

if TYPE_CHECKING:
    from server.host import Host

logger = logging.getLogger("sessiond.relay")
RETRY_FIRST, RETRY_MAX = 0.5, 30.0  # seconds before a failed read is tried again, doubling
PAGE_ITEMS = 1000
"""Items per notification at most, as many as one `thread/record` may carry
(protocol.methods.MAX_ITEMS_PER_RECORD; not imported: pydantic stays off the startup
path). Bytes are bounded by --max-frame as well."""


@dataclass(slots=True)
class _Followed:
    last: int | None = None
    """The last seq published here; None until the first subscribe has read it."""
    subscribing: int = 0  # subscribes reading the thread's last seq right now
    stale: bool = False  # it may have changed since `last`: read the rows after it
    seen: int = 0
    """While subscribing: the highest last seq a change reported (compared with the seq
    the subscribe reads: a change it already covers needs no read)."""
    reading: asyncio.Task[None] | None = None
    retry: float = 0.0  # the last wait after a failed read (0: the last read went through)


class Relay:
    """Per followed thread: what was published, and the reads that catch up with it."""

    def __init__(
        self, host: Host, publish: Callable[[str, list[Any]], None], max_bytes: int
    ) -> None:
        self._host = host
        self._publish = publish
        """`item/recorded` to the thread's followers (`Subscriptions.publish`)."""
        self._max_bytes = max_bytes  # --max-frame
        self._threads: dict[str, _Followed] = {}
        self.reads = 0
        """Pages read from the store (sessiond/debug: unfollowed threads cause none)."""

    # --- following ---------------------------------------------------------------------

    def subscribing(self, thread_id: str) -> None:
        """A subscribe is about to read the thread's last seq: a change seen meanwhile is
        remembered, and read once the seq is known."""
        self._threads.setdefault(thread_id, _Followed()).subscribing += 1

    def subscribed(self, thread_id: str, last_seq: int | None, followed: bool) -> None:
        """The subscribe's read is done: `last_seq` is the thread's last committed seq
        (None: the read failed); `followed`: the thread has followers now."""
        state = self._threads[thread_id]
        state.subscribing -= 1
        if state.last is None and last_seq is not None and followed:
            state.last = last_seq
            # A change reported while the seq was read matters only if it went beyond it.
            state.stale = state.stale or state.seen > last_seq
        if not followed and state.subscribing == 0:
            self.unfollowed(thread_id)
        elif state.stale:
            self._read_soon(thread_id, state)

    def unfollowed(self, thread_id: str) -> None:
        """The thread's last follower here went away: forget it. A read under way sees
        its state replaced and ends without publishing; a subscribe under way starts
        afresh from the seq it reads."""
        state = self._threads.pop(thread_id, None)
        if state is not None and state.subscribing:
            self._threads[thread_id] = _Followed(subscribing=state.subscribing)

    # --- what happened -----------------------------------------------------------------

    def recorded(self, thread_id: str, items: list[dict[str, Any]]) -> None:
        """This server's own append (committed): published from memory when it follows
        the last seq published, else read back in order with whatever came before it."""
        state = self._threads.get(thread_id)
        if state is None or not items:
            return
        if state.last is not None and state.reading is None and not state.stale:
            first, last = items[0]["seq"], items[-1]["seq"]
            if last <= state.last:
                return  # published already (read back from the rows)
            if first == state.last + 1:
                state.last = last
                self._publish(thread_id, items)
                return
        state.stale = True
        self._read_soon(thread_id, state)

    def changed(self, thread_id: str, last_seq: int | None) -> None:
        """Another process changed the thread (its row's last seq, when known)."""
        state = self._threads.get(thread_id)
        if state is None:
            return  # nobody here follows it: not even a query
        if state.last is not None and last_seq is not None and last_seq <= state.last:
            return  # not an append (archived, renamed), or published already
        if state.last is None and last_seq is not None:
            state.seen = max(state.seen, last_seq)  # judged when the subscribe's read ends
            return
        state.stale = True
        self._read_soon(thread_id, state)

    def listening(self) -> None:
        """The listener is (again) in place: what it may have missed is read for each
        followed thread."""
        for thread_id, state in self._threads.items():
            state.stale = True
            self._read_soon(thread_id, state)

    # --- reading -----------------------------------------------------------------------

    def _read_soon(self, thread_id: str, state: _Followed) -> None:
        if self._threads.get(thread_id) is not state:
            return  # unfollowed since (a retry that came too late)
        if state.last is None or state.reading is not None:
            return  # the subscribe, or the read under way, looks again when it ends
        loop = self._host.loop
        if loop is None:
            return
        state.reading = loop.create_task(
            self._catch_up(thread_id, state), name=f"sessiond-relay-{thread_id}"
        )

    def _retry_later(self, thread_id: str, state: _Followed) -> None:
        state.stale = True
        state.retry = min(state.retry * 2, RETRY_MAX) if state.retry else RETRY_FIRST
        if self._host.loop is not None:
            self._host.loop.call_later(state.retry, self._read_soon, thread_id, state)

    async def _catch_up(self, thread_id: str, state: _Followed) -> None:
        """Pages of rows after the last seq published, each published as it arrives,
        until a read finds the thread's end with nothing changed meanwhile."""
        host = self._host
        pages, max_frame = host.pages, self._max_bytes
        try:
            while state.stale and self._threads.get(thread_id) is state:
                state.stale = False
                after = state.last
                assert after is not None
                self.reads += 1
                try:
                    read = partial(
                        pages.after, thread_id, after, limit=PAGE_ITEMS, max_bytes=max_frame
                    )
                    rows, more = await host.run_reader(read)
                except ProtocolError as exc:
                    if exc.kind is not ErrorKind.PAYLOAD_TOO_LARGE:
                        # The database is away: read again from the same seq in a while
                        # (or at the listener's `listening`, or the next change).
                        logger.info("following %s: %s", thread_id, exc.message)
                        self._retry_later(thread_id, state)
                        return
                    # No message can carry it (thread/read cannot either): its followers
                    # see the gap in seqs; the rest goes on.
                    seq = int(exc.details["seq"])
                    logger.warning(
                        "following %s: item seq %d (%d bytes) fits in no message; not sent",
                        thread_id,
                        seq,
                        exc.details["size"],
                    )
                    state.last, state.stale = seq, True
                    continue
                state.retry = 0.0
                if self._threads.get(thread_id) is not state:
                    return  # unfollowed while reading
                if rows:  # every row is after `after`, ascending
                    state.last = rows[-1][0]
                    # Sent as the rows hold them: embedded, not decoded and encoded again.
                    items = [orjson.Fragment(line) for _, line in rows]
                    self._publish(thread_id, items)
                state.stale = state.stale or more
        except Exception:  # a bug, not a fault: said once, and the next change tries again
            logger.exception("following %s", thread_id)
            state.stale = True
        finally:
            state.reading = None  # a state replaced meanwhile is no longer looked at
