"""Messages of one direction of the proxy, handled strictly in arrival order (`Lane`):
a handler that must wait holds back later messages from the same side only."""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable
from typing import Any

logger = logging.getLogger("sessiond.acp")


class Lane:
    """Messages of one direction, handled strictly in arrival order.

    A handler returns None when done, or an awaitable: later messages then wait for it.
    Messages are handled at once while nothing waits, so the common path costs no task."""

    def __init__(self, handle: Callable[[Any], Awaitable[None] | None]) -> None:
        self._handle = handle
        self._backlog: collections.deque[Any] = collections.deque()
        self._waiting = False

    def push(self, message: Any) -> None:
        if self._waiting:
            self._backlog.append(message)
            return
        pending = self._run(message)
        if pending is not None:
            self._waiting = True
            asyncio.get_running_loop().create_task(self._drain(pending))

    def _run(self, message: Any) -> Awaitable[None] | None:
        try:
            return self._handle(message)
        except Exception:
            logger.exception("handling an ACP message failed")
            return None

    async def _drain(self, pending: Awaitable[None]) -> None:
        while True:
            try:
                await pending
            except Exception:
                logger.exception("handling an ACP message failed")
            while self._backlog:
                next_pending = self._run(self._backlog.popleft())
                if next_pending is not None:
                    pending = next_pending
                    break
            else:
                self._waiting = False
                return
