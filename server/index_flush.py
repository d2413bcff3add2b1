"""The index-flush timer, once for both hosts: after a burst of records, the listing rows
the embedded store batches (`FLUSH_SECONDS`) are written once it pauses, so other
processes listing the same data dir see them within about a second, and no answer waits
for it. A shared store writes its rows with the items: flushing it does nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class IndexFlush:
    """One timer at a time: `soon()` during a burst arms it once; it fires `flush`."""

    def __init__(self, flush: Callable[[], None]) -> None:
        self._flush = flush
        self._handle: asyncio.TimerHandle | None = None

    def soon(self, loop: asyncio.AbstractEventLoop | None) -> None:
        if self._handle is None and loop is not None:
            from restore.stores.api import FLUSH_SECONDS

            self._handle = loop.call_later(FLUSH_SECONDS, self._fire)

    def _fire(self) -> None:
        self._handle = None
        self._flush()
