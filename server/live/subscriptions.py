"""Who follows which thread: the fan-out of `thread/subscribe`
(server/handlers/subscriptions.py).

A subscription is in-memory state of one connection: it ends with `thread/unsubscribe` or
when the connection goes away, and costs nothing on disk. Subscribers get `item/recorded`
(the stored lines of each append, in seq order) for the threads they follow; the thread's
`thread/updated` is broadcast to every client anyway. Order holds because every append
runs on the one worker, handlers resume in the order the worker finished them, and each
connection writes its messages in order. Other processes' appends (a second window's
server, another machine on a shared store) reach followers through the relay
(server/live/relay.py), which this server's own go through too, so the two keep one order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from server.host import Host
    from server.live.relay import Relay
    from server.rpc.dispatch import SessiondProtocol


class Subscriptions:
    """Followers per thread id, each in the order they subscribed."""

    def __init__(self, host: Host, max_bytes: int) -> None:
        self._host = host
        self._max_bytes = max_bytes  # --max-frame: the relay's pages are cut by it
        self._followers: dict[str, dict[SessiondProtocol, None]] = {}
        self.relay: Relay | None = None
        """Followed threads' positions (server/live/relay.py); made by the first subscribe."""

    def follow_with_relay(self) -> Relay:
        if self.relay is None:
            from server.live.relay import Relay

            self.relay = Relay(self._host, self.publish, self._max_bytes)
        return self.relay

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
        """This server's own append, once acknowledged: to the followers (nobody follows
        anything before the first subscribe). Items this server writes outside
        `thread/record` (a resume's or a close's session records) are not passed here:
        followers get them with the next append, read back with it in seq order."""
        if self.relay is not None:
            self.relay.recorded(thread_id, items)

    def changed_elsewhere(self, thread_id: str, last_seq: int | None) -> None:
        """Another process (or machine) appended to the thread: its followers here get
        the items after the last one they got, read back from the store."""
        if self.relay is not None:
            self.relay.changed(thread_id, last_seq)

    def publish(self, thread_id: str, items: list[Any]) -> None:
        """`item/recorded` to every follower of the thread; nothing when no item was new.
        The items are dicts, or the stored lines as `orjson.Fragment`s."""
        if not items:
            return
        for connection in self.followers(thread_id):
            connection.notify("item/recorded", {"threadId": thread_id, "items": items})
