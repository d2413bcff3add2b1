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
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protocol.errors import ErrorKind, ProtocolError
from restore.child_env import child_environment
from restore.search.query import Query
from restore.stores.api import Progress, SearchFilters, SearchPage

if TYPE_CHECKING:
    import sqlite3

logger = logging.getLogger(__name__)

CODE_ROOT = Path(__file__).resolve().parents[3]
"""The directory holding the `restore` package: the child's working directory."""
STOP_GRACE = 2.0


class SearchChildGone(Exception):
    """The child exited (or could not start) before it answered."""


class SearchChild:
    """The parent's end: `search` as `ThreadSearch.search`, answered by the child."""

    def __init__(self, index_path: Path) -> None:
        self._index_path = index_path
        self._process: subprocess.Popen[bytes] | None = None
        self._to: Connection | None = None
        self._from: Connection | None = None

    def search(
        self,
        query: Query,
        filters: SearchFilters,
        *,
        cursor: str | None,
        limit: int,
        progress: Progress | None,
        budget: float | None,
    ) -> SearchPage:
        to, answers = self._connections()
        try:
            to.send((query, filters, cursor, limit, budget))
            while True:
                kind, *rest = answers.recv()
                if kind == "progress":
                    if progress is not None:
                        progress(*rest)
                    continue
                if kind == "page":
                    page: SearchPage = rest[0]
                    return page
                kind_name, message, details = rest
                raise ProtocolError(ErrorKind(kind_name), message, **details)
        except (EOFError, OSError) as exc:
            code = self.close()
            raise SearchChildGone(f"the search process exited (code {code})") from exc
        except ProtocolError:
            raise
        except BaseException:  # mid-answer (a progress report failed): start afresh
            self.close()
            raise

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
        argv = [sys.executable, "-m", __name__, str(down_read), str(up_write)]
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


class _IndexAt:
    """The index file as the child sees it: a path, reached by a connection of its own."""

    in_memory = False

    def __init__(self, path: Path) -> None:
        self.path = path

    def connection(self) -> sqlite3.Connection:
        raise AssertionError("the child has no store connection")

    def connect_beside(self) -> sqlite3.Connection:
        from restore.stores.embedded.index import connect_beside

        return connect_beside(self.path)


def serve(requests: Connection, answers: Connection, index_path: Path) -> None:
    """The child: one search per request, until its input ends."""
    from restore.search.snippets import snippet
    from restore.stores.embedded.search import ThreadSearch

    search = ThreadSearch(_IndexAt(index_path))

    def progress(done: int, total: int) -> None:
        answers.send(("progress", done, total))

    try:
        while True:
            try:
                query, filters, cursor, limit, budget = requests.recv()
            except EOFError:
                return
            answer: tuple[Any, ...]
            try:
                page = search.search(query, filters, cursor=cursor, limit=limit,
                                     progress=progress, budget=budget)  # fmt: skip
                page.hits = [replace(hit, text="", shown=snippet(hit.text, query))
                             for hit in page.hits]  # fmt: skip
                answer = ("page", page)
            except ProtocolError as exc:
                answer = ("error", str(exc.kind), exc.message, exc.details)
            answers.send(answer)
    finally:
        search.close()


def main() -> None:
    down, up, index_path = sys.argv[1:4]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is its server's to act on
    logging.basicConfig(level=logging.WARNING, format="sessiond-search: %(message)s")
    with contextlib.suppress(BrokenPipeError):
        serve(Connection(int(down), writable=False), Connection(int(up), readable=False),
              Path(index_path))  # fmt: skip


if __name__ == "__main__":
    main()
