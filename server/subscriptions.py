"""Who follows which thread: `thread/subscribe`, `thread/unsubscribe` and the fan-out.

A subscription is in-memory state of one connection: it ends with `thread/unsubscribe` or
when the connection goes away, and costs nothing on disk. Subscribers get `item/recorded`
(the stored lines of each append, in seq order) for the threads they follow; the thread's
`thread/updated` is broadcast to every client anyway. Order holds because every append
runs on the one worker, handlers resume in the order the worker finished them, and each
connection writes its messages in order. With a shared store, other machines' appends
reach followers through the relay (server/relay.py), which this server's own go through
too, so the two keep one order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from protocol.errors import thread_not_found
from restore.paths import validate_thread_id
from server.handlers import Context, handles

if TYPE_CHECKING:
    from restore.summary import ThreadSummary
    from server.relay import Relay
    from server.rpc import SessiondProtocol


class Subscriptions:
    """Followers per thread id, each in the order they subscribed."""

    def __init__(self) -> None:
        self._followers: dict[str, dict[SessiondProtocol, None]] = {}
        self.relay: Relay | None = None
        """Set with a shared store: followed threads' positions (server/relay.py)."""

    def add(self, thread_id: str, connection: SessiondProtocol) -> None:
        self._followers.setdefault(thread_id, {})[connection] = None

    def remove(self, thread_id: str, connection: SessiondProtocol) -> None:
        followers = self._followers.get(thread_id, {})
        followers.pop(connection, None)
        if not followers:
            self._followers.pop(thread_id, None)
            if self.relay is not None:
                self.relay.unfollowed(thread_id)

    def drop(self, connection: SessiondProtocol) -> None:
        """Forget a connection that went away."""
        for thread_id in [t for t, f in self._followers.items() if connection in f]:
            self.remove(thread_id, connection)

    def followers(self, thread_id: str) -> list[SessiondProtocol]:
        return list(self._followers.get(thread_id, ()))

    def recorded(self, thread_id: str, items: list[dict[str, Any]]) -> None:
        """This server's own append, once acknowledged: to the followers."""
        if self.relay is not None:
            self.relay.recorded(thread_id, items)
        else:
            self.publish(thread_id, items)

    def publish(self, thread_id: str, items: list[Any]) -> None:
        """`item/recorded` to every follower of the thread; nothing when no item was new.
        The items are dicts, or the stored lines as `orjson.Fragment`s."""
        if not items:
            return
        for connection in self.followers(thread_id):
            connection.notify("item/recorded", {"threadId": thread_id, "items": items})


@handles("thread/subscribe")
async def thread_subscribe(ctx: Context, params: Any) -> dict[str, Any]:
    thread_id = validate_thread_id(params.threadId)
    ctx.server.ensure_watching()  # appends by other processes reach followers too
    subscriptions = ctx.server.subscriptions
    relay = subscriptions.relay
    if relay is None:
        if not await ctx.server.run_in_worker(ctx.service.store.exists, thread_id):
            raise thread_not_found(thread_id)
        subscriptions.add(thread_id, ctx.connection)
        return {}
    # A shared store: the relay publishes from the thread's last seq as read now.
    relay.subscribing(thread_id)
    row: ThreadSummary | None = None
    try:
        row = await ctx.server.run_in_worker(ctx.service.store.get, thread_id)
        if row is None:
            raise thread_not_found(thread_id)
        subscriptions.add(thread_id, ctx.connection)
    finally:
        relay.subscribed(thread_id, row.lastSeq if row is not None else None,
                         bool(subscriptions.followers(thread_id)))  # fmt: skip
    return {}


@handles("thread/unsubscribe")
async def thread_unsubscribe(ctx: Context, params: Any) -> dict[str, Any]:
    ctx.server.subscriptions.remove(validate_thread_id(params.threadId), ctx.connection)
    return {}
