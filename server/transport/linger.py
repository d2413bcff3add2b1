"""How long a server spawned for editor windows stays: while a client is attached, plus a
grace (`serve --ws 0 --linger SECONDS`).

The first window spawns the server; every later one connects to it (server/cli/client.py).
Nobody owns it, so it ends itself: the grace starts when the last authenticated client
leaves (or at startup, should its spawner die before connecting) and an attach cancels it.
Connections still in their opening handshake do not count: an unauthenticated socket must
not keep a server alive. It also leaves at once when a write finds its data directory
deleted under it (server/transport/ws.py `home_lost`): nothing it holds can be kept.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

DEFAULT_LINGER_SECONDS = 30.0


class Linger:
    """Counts attached clients; `expire()` runs once no client has been attached for
    `seconds`."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, seconds: float, expire: Callable[[], None]
    ) -> None:
        self.loop = loop
        self.seconds = seconds
        self.expire = expire
        self.clients = 0
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        if self.clients == 0:
            self._arm()

    def attached(self) -> None:
        self.clients += 1
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def detached(self) -> None:
        self.clients -= 1
        if self.clients == 0:
            self._arm()

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.loop.call_later(self.seconds, self._expired)

    def _expired(self) -> None:
        self._timer = None
        if self.clients == 0:
            self.expire()
