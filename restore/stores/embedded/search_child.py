"""A long-running server's searches, in a process of their own.

Python runs one thread at a time in a process: a search's catch-up (reading the new lines
of every thread recorded since, inserting them into FTS5) and its query on a thread beside
the store thread still took the interpreter from the recording threads, and recording
with a search every hundred records ran at 65-81% of never searching on a two-core
machine whose second core stood idle (docs/benchmarks.md). Here the same `ThreadSearch`
runs in a child process over the same index file (WAL: its reads and the store's writes
go on together, as they did from a thread), on a core of its own.

The child is started by the first search (never at startup), gets sessiond's environment
without the store's credentials (restore/child_env.py) and sessiond's own code directory
as its working directory (so `-m` imports nothing from a client's folder), and leaves
when its input ends: the server closing, or dying (kill -9 included), closes it. One
search at a time, over two pipes carrying `multiprocessing.connection` frames (pickled:
both ends are sessiond's own code). A child that dies is started again by the next
search; the search it died in runs on the calling thread instead (`ThreadSearch.search`).

A cancelled search (its client sent `$/cancelRequest`) is told to the child on the same
pipe (`("cancel", n)`, n naming the search); the child looks for it between its steps (the
catch-up's transactions, SQLite's program as the query runs, each snippet) and answers
`("cancelled",)`. A child that does not within `CANCEL_GRACE` (busy in C, waiting on a
lock) is killed, and the next search starts another: a cancelled search never holds the
searches behind it.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING

from protocol.errors import ErrorKind, ProtocolError
from restore.child_env import child_environment
from restore.search.cancel import Cancel, Cancelled
from restore.search.query import Query
from restore.stores.api import Progress, SearchFilters, SearchPage

if TYPE_CHECKING:
    pass

logger = logging.getLogger(__name__)

CHILD_MAIN = "restore.stores.embedded.search_child_main"
"""What the child runs (apart from this module, which the parent's search imports: the
child's imports the search itself)."""
CODE_ROOT = Path(__file__).resolve().parents[3]
"""The directory holding the `restore` package: the child's working directory."""
STOP_GRACE = 2.0
CANCEL_GRACE = 0.25
"""Seconds a cancelled search's child may take to stop before it is killed."""
CANCEL_POLL = 0.05
"""How often the waiting end looks whether a cancel's grace ran out."""


def _nothing() -> None:
    pass


class SearchChildGone(Exception):
    """The child exited (or could not start) before it answered."""


class SearchChild:
    """The parent's end: `search` as `ThreadSearch.search`, answered by the child."""

    def __init__(self, index_path: Path) -> None:
        self._index_path = index_path
        self._process: subprocess.Popen[bytes] | None = None
        self._to: Connection | None = None
        self._from: Connection | None = None
        self._sending = threading.Lock()
        """A cancel is sent from whichever thread the client's cancel reached."""
        self._numbers = itertools.count(1)
        self._cancel_seen: float | None = None
        """When the waiting end first saw the search it waits for cancelled."""

    def search(
        self,
        query: Query,
        filters: SearchFilters,
        *,
        cursor: str | None,
        limit: int,
        progress: Progress | None,
        budget: float | None,
        cancel: Cancel | None = None,
    ) -> SearchPage:
        to, answers = self._connections()
        number = next(self._numbers)
        self._cancel_seen = None
        forget: Callable[[], None] = _nothing
        try:
            with self._sending:
                to.send(("search", number, query, filters, cursor, limit, budget))
            if cancel is not None:
                forget = cancel.on_cancel(lambda: self._tell_cancel(number))
            while True:
                if cancel is not None and not self._answered(answers, cancel):
                    continue
                kind, *rest = answers.recv()
                if kind == "progress":
                    if progress is not None:
                        progress(*rest)
                    continue
                if kind == "page":
                    page: SearchPage = rest[0]
                    return page
                if kind == "cancelled":
                    raise Cancelled("the client cancelled the search")
                kind_name, message, details = rest
                raise ProtocolError(ErrorKind(kind_name), message, **details)
        except (EOFError, OSError) as exc:
            code = self.close()
            if cancel is not None and cancel.cancelled:
                raise Cancelled("the client cancelled the search") from exc
            raise SearchChildGone(f"the search process exited (code {code})") from exc
        except (ProtocolError, Cancelled):
            raise
        except BaseException:  # mid-answer (a progress report failed): start afresh
            self.close()
            raise
        finally:
            forget()

    def _answered(self, answers: Connection, cancel: Cancel) -> bool:
        """Whether an answer waits; while none does, a cancel's grace is counted, and past
        it the child is killed (`Cancelled`)."""
        if answers.poll(CANCEL_POLL):
            return True
        if cancel.cancelled:
            now = time.monotonic()
            if self._cancel_seen is None:
                self._cancel_seen = now
            if now - self._cancel_seen >= CANCEL_GRACE:
                self.kill()
                raise Cancelled("the client cancelled the search (its process was stopped)")
        return False

    def _tell_cancel(self, number: int) -> None:
        with self._sending, contextlib.suppress(OSError, ValueError):
            if self._to is not None:
                self._to.send(("cancel", number))

    def kill(self) -> None:
        """Ended now, not asked: it is busy, and a search waits behind it."""
        process = self._process
        if process is not None and process.poll() is None:
            process.kill()
        self.close()

    def _connections(self) -> tuple[Connection, Connection]:
        if self._process is not None and self._process.poll() is not None:
            self.close()
        if self._to is None or self._from is None:
            self._start()
        assert self._to is not None and self._from is not None
        return self._to, self._from

    def _start(self) -> None:
        down_read, down_write = os.pipe()
        up_read, up_write = os.pipe()
        argv = [sys.executable, "-m", CHILD_MAIN, str(down_read), str(up_write)]
        try:
            self._process = subprocess.Popen(
                [*argv, str(self._index_path)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                pass_fds=(down_read, up_write),
                cwd=CODE_ROOT,
                env=child_environment(),
            )
        except OSError as exc:
            for fd in (down_read, down_write, up_read, up_write):
                os.close(fd)
            raise SearchChildGone(f"the search process did not start: {exc}") from exc
        os.close(down_read)
        os.close(up_write)
        self._to = Connection(down_write, readable=False)
        self._from = Connection(up_read, writable=False)

    def close(self) -> int | None:
        """Its input closed (it leaves), waited for, killed past a grace; its exit code."""
        for end in (self._to, self._from):
            if end is not None:
                with contextlib.suppress(OSError):
                    end.close()
        self._to = self._from = None
        process, self._process = self._process, None
        if process is None:
            return None
        try:
            return process.wait(STOP_GRACE)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait()
