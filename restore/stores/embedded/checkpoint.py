"""The index's WAL copied back into its file on a thread of its own, not by a commit.

SQLite checkpoints by itself in the commit that takes the WAL past 1,000 pages: that
commit copies ~4 MB into the index file and syncs it, 5-15 ms on the store thread, once
every few hundred index writes; it was most of `thread/continue`'s p99 (a reset writes
two rows: 11.7 ms p99 against 5.7 ms without it, the same run). The store's connection
does not checkpoint (`wal_autocheckpoint = 0`); every `WRITES` of its write transactions
(about SQLite's 1,000 pages: a transaction of the store thread writes a few rows), and
after an open (whose reconcile may write many), a PASSIVE checkpoint runs on a connection
of its own, which waits for no writer and no reader: what it cannot copy yet, the next
one does. Once a checkpoint has copied everything, the next write starts the WAL from its
beginning again, so it stays a few MB long, as SQLite's own would. (The WAL file's size
says nothing here: a restarted WAL keeps its length and is written over from the start.)
Other processes' connections to the index keep SQLite's own checkpoints.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

logger = logging.getLogger(__name__)

WRITES = 200


class Checkpointer:
    """Checkpoints of one index file, one at a time, each on a short-lived thread."""

    def __init__(self, path: Path, *, active: bool = True) -> None:
        self._path = path
        self._active = active  # False: an index in memory (a read-only data directory)
        self._writes = 0
        self._running: threading.Thread | None = None
        self.done = 0  # checkpoints run (tests, sessiond/debug)

    def wrote(self, transactions: int = 1) -> None:
        """After a write: a checkpoint begun every `WRITES` of them (`WRITES` at once: now)."""
        self._writes += transactions
        if self._writes < WRITES or not self._active:
            return
        if self._running is not None and self._running.is_alive():
            return  # counted on: the next write begins the next one
        self._writes = 0
        self._running = threading.Thread(
            target=self._checkpoint, name="sessiond-checkpoint", daemon=True
        )
        self._running.start()

    def _checkpoint(self) -> None:
        import sqlite3

        try:
            # mode=rw: an index set aside meanwhile is not made again, empty, by this
            conn = sqlite3.connect(f"{self._path.as_uri()}?mode=rw", uri=True)
            try:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            finally:
                conn.close()
            self.done += 1
        except (sqlite3.Error, OSError) as exc:  # the next write tries again
            logger.info("index checkpoint: %s", exc)

    def wait(self) -> None:
        """The checkpoint under way, finished (close, tests)."""
        running = self._running
        if running is not None:
            running.join()
