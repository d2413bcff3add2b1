"""Read-ahead for `thread/read`: while a client takes in one page, the next one in the
same direction is read.

A client paging through a long history (an agent handed every message since the last
compact, the extension's "Load earlier messages") asks for page k+1 only once it has parsed
page k and found its cursor. Reading page k+1 meanwhile, on a reader thread, lets the
server's parse of it overlap the client's parse of page k: bench J3 (resume + every
message since the boundary, 100k messages) spends about half its time in each.

Bounded: one page per connection (at most `--max-frame` bytes), replaced by the next read
and dropped when the client asks for anything else. Never stale: a page is only answered
while `ThreadPages.holds` says the thread's file is the one it was read from and has only
grown (backward) or not changed size (forward); otherwise the page is read again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from restore.stores.api import Page


class PageKey(NamedTuple):
    thread_id: str
    after: int | None
    before: int | None
    limit: int


class ReadAhead:
    """The one page read ahead for a connection, by the request that would ask for it."""

    def __init__(self) -> None:
        self._key: PageKey | None = None
        self._page: asyncio.Future[Page] | None = None

    def take(self, key: PageKey) -> asyncio.Future[Page] | None:
        """The page read ahead for exactly this request, if any; it is given out once."""
        page, self._page = self._page, None
        if page is None or key != self._key:
            return None
        return page

    def start(self, key: PageKey, read: Callable[[], Awaitable[Page]]) -> None:
        """Read `key`'s page now; a failure is not reported here (the request, if it comes,
        reads again and gets the error itself)."""
        self._key = key
        self._page = asyncio.ensure_future(read())
        self._page.add_done_callback(_consume_failure)

    @staticmethod
    def next_key(key: PageKey, page: Page) -> PageKey | None:
        """The request that continues `key` in its direction; None at the end."""
        if page.next_seq is None:
            return None
        if key.before is not None:
            return key._replace(before=page.next_seq)
        return key._replace(after=page.next_seq)


def _consume_failure(future: asyncio.Future[Page]) -> None:
    if not future.cancelled():
        future.exception()  # retrieved: a failed read-ahead is not an unhandled error
