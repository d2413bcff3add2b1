"""The search process's own side (restore/stores/embedded/search_child.py starts it and
speaks for it in the server): one search per request on its input, each page's snippets
made here, the answer on its output, until its input ends."""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protocol.errors import ProtocolError
from restore.faults import pause_point
from restore.search.cancel import Cancel, Cancelled

if TYPE_CHECKING:
    import sqlite3


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


class _Told(Cancel):
    """The child's view of a search's cancel: set when `("cancel", n)` for this search
    has arrived on its input, looked for whenever asked."""

    def __init__(self, requests: Connection, number: int) -> None:
        super().__init__()
        self._requests = requests
        self._number = number

    @property
    def cancelled(self) -> bool:
        while not super().cancelled and self._requests.poll():
            message = self._requests.recv()  # one search at a time: only cancels come now
            if message[:2] == ("cancel", self._number):
                self.cancel()
        return super().cancelled


def serve(requests: Connection, answers: Connection, index_path: Path) -> None:
    """The child: one search per request, until its input ends."""
    from restore.search.snippets import snippets
    from restore.stores.embedded.search import ThreadSearch

    search = ThreadSearch(_IndexAt(index_path))

    def progress(done: int, total: int) -> None:
        answers.send(("progress", done, total))

    try:
        while True:
            try:
                request = requests.recv()
            except EOFError:
                return
            if request[0] != "search":
                continue  # the cancel of a search that had ended already
            _, number, query, filters, cursor, limit, budget = request
            told = _Told(requests, number)
            answer: tuple[Any, ...]
            try:
                page = search.search(
                    query,
                    filters,
                    cursor=cursor,
                    limit=limit,
                    progress=progress,
                    budget=budget,
                    cancel=told,
                )
                if page.hits:
                    pause_point("search-snippets")  # tests: a search with hits held under way
                shown, out_of_time = snippets([hit.text for hit in page.hits], query, cancel=told)
                page.hits = [
                    replace(hit, text="", shown=snippet)
                    for hit, snippet in zip(page.hits, shown, strict=True)
                ]
                page.partial = page.partial or out_of_time
                answer = ("page", page)
            except ProtocolError as exc:
                answer = ("error", str(exc.kind), exc.message, exc.details)
            except Cancelled:
                answer = ("cancelled",)
            answers.send(answer)
    finally:
        search.close()


def main() -> None:
    down, up, index_path = sys.argv[1:4]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is its server's to act on
    logging.basicConfig(level=logging.WARNING, format="sessiond-search: %(message)s")
    with contextlib.suppress(BrokenPipeError):
        serve(
            Connection(int(down), writable=False),
            Connection(int(up), readable=False),
            Path(index_path),
        )


if __name__ == "__main__":
    main()
