"""A search a client no longer waits for, told to stop wherever it is.

`$/cancelRequest` cancels the handler's task at once, but the search it waits for runs
elsewhere: on the search thread (its query in the database, its snippets in Python) or in
the embedded store's search process. A `Cancel` goes with the work: each part checks it
where it loops (`check`), and what cannot look (a query in the database, a process busy in
C) is stopped by a hook run at the cancel (`on_cancel`: the query cancelled, the process
told, then killed past a grace). No I/O here: the hooks are the backends'.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable


class Cancelled(Exception):
    """The search stopped because its client cancelled it (nobody waits for its answer)."""


class Cancel:
    """Set once by whoever the client's cancel reaches; read from any thread."""

    def __init__(self) -> None:
        self._set = threading.Event()
        self._lock = threading.Lock()
        self._hooks: list[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        return self._set.is_set()

    def check(self) -> None:
        """Cancelled: raised where the work may stop."""
        if self.cancelled:
            raise Cancelled("the client cancelled the search")

    def cancel(self) -> None:
        """Set it, and run every hook once (on the calling thread). A hook that fails (the
        query ended meanwhile) leaves the stop to the work's own checks."""
        with self._lock:
            if self._set.is_set():
                return
            self._set.set()
            hooks, self._hooks = self._hooks, []
        for hook in hooks:
            with contextlib.suppress(Exception):
                hook()

    def on_cancel(self, hook: Callable[[], None]) -> Callable[[], None]:
        """Run `hook` at the cancel (now, if it came already); returns what removes it,
        for when the part it stops has ended."""
        with self._lock:
            if not self._set.is_set():
                self._hooks.append(hook)
                return lambda: self._remove(hook)
        hook()
        return lambda: None

    def _remove(self, hook: Callable[[], None]) -> None:
        with self._lock:
            if hook in self._hooks:
                self._hooks.remove(hook)
