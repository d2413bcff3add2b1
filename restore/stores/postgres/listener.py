"""LISTEN/NOTIFY: threads other sessiond processes start, change or delete in the same
database, announced to this one's clients (on a background thread). It listens on the
team channel and on its role's own (channels.py: under `private` only the role's own
hears of its threads). Reconnects with backoff; what it may have missed while away is
caught up from `updated_at`, as this role sees the rows."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import orjson
import psycopg

from protocol.errors import ProtocolError
from restore.ids import validate_thread_id
from restore.stores.api import Announce
from restore.stores.cursors import summary_of
from restore.stores.postgres import channels
from restore.stores.postgres.connection import BACKOFF_FIRST, BACKOFF_MAX
from restore.stores.postgres.rows import ROW_COLUMNS

if TYPE_CHECKING:
    from restore.stores.postgres.host import StoreHost

logger = logging.getLogger("sessiond.postgres")
LISTEN_WAIT = 0.5  # seconds a listener waits for a notification before checking for stop
LISTEN_GATHER = 0.02  # seconds a burst of notifications is gathered into one delivery
CATCH_UP_MARGIN = 60.0  # seconds: other machines' clocks stamp `updated_at`


class Listener(threading.Thread):
    """LISTEN on the store's channel; reconnect with backoff when the connection drops."""

    def __init__(self, store: StoreHost, announce: Announce) -> None:
        super().__init__(name="sessiond-listen", daemon=True)
        self._store = store
        self._announce = announce
        self._stopping = threading.Event()
        self._conn: psycopg.Connection | None = None

    def stop(self) -> None:
        self._stopping.set()
        self.join(timeout=5)

    def run(self) -> None:
        backoff = BACKOFF_FIRST
        missed_since: str | None = None  # while not listening, from when (writers' clocks)
        while not self._stopping.is_set():
            try:
                with psycopg.connect(
                    self._store.db.url, autocommit=True, **self._store.db.params()
                ) as conn:
                    self._store.db.ensure_schema(conn)  # the role's channel is a row
                    channels.listen(conn, channels.own_channel(conn))
                    backoff = BACKOFF_FIRST
                    if missed_since is not None:
                        self._catch_up(conn, missed_since)
                        missed_since = None
                    # From here on no change is missed: whoever keeps its own position in
                    # threads (server/live/relay.py) reads what it may have missed until now.
                    self._announce("listening", "", None)
                    self._listen(conn)
            except Exception as exc:  # down or restarting: try again later
                logger.info("%s", self._store.db.redact(f"listen: {exc}"))
                if missed_since is None:
                    missed_since = _ts_ago(CATCH_UP_MARGIN)
            else:
                continue
            self._stopping.wait(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX)

    def _catch_up(self, conn: psycopg.Connection, since: str) -> None:
        """Notifications sent while this listener was away are lost: announce every thread
        changed since then instead (a few too many is harmless: updates are coalesced)."""
        rows = conn.execute(
            f"SELECT {ROW_COLUMNS} FROM sessiond_threads WHERE updated_at >= %s", (since,)
        ).fetchall()
        for row in rows:
            summary = summary_of(row)
            started = (summary.createdAt or "") >= since
            self._announce("started" if started else "updated", summary.threadId, summary)

    def _listen(self, conn: psycopg.Connection) -> None:
        """Wait for a first notification (the stop flag is looked at between waits), then
        gather the burst it begins for `LISTEN_GATHER` seconds: one delivery (one query)
        per burst, within tens of milliseconds of the commit, not at the end of the wait."""
        while not self._stopping.is_set():
            changes: dict[str, str] = {}
            for note in conn.notifies(timeout=LISTEN_WAIT, stop_after=1):
                self._note(changes, note)
            if not changes:
                continue  # nothing, or only this process's own changes
            for note in conn.notifies(timeout=LISTEN_GATHER):
                self._note(changes, note)
            self._deliver(changes)

    def _note(self, changes: dict[str, str], note: psycopg.Notify) -> None:
        try:
            body = orjson.loads(note.payload)
        except orjson.JSONDecodeError:
            return
        if not isinstance(body, dict) or body.get("o") == self._store.token:
            return  # not sessiond's; or this process's own change: its clients were told
        try:  # anyone may NOTIFY: a payload naming no thread must not fail the burst's read
            thread_id = validate_thread_id(body.get("t"))
        except ProtocolError:
            return
        event = str(body.get("e"))
        if changes.get(thread_id) != "started":  # started stays started
            changes[thread_id] = event

    def _deliver(self, changes: dict[str, str]) -> None:
        """Each change announced as the rows say, never as a payload alone: anyone with a
        login may NOTIFY the team channel, so a thread said to be deleted is announced
        deleted only when its row is gone (a forged `deleted` would take a thread off
        every client's list), and one said to be changed only with the row read."""
        try:
            rows = {s.threadId: s for s in self._store.summaries(list(changes))}
        except ProtocolError as exc:
            logger.info("listen: %s", exc.message)
            return
        for thread_id, event in changes.items():
            summary = rows.get(thread_id)
            if event == "deleted" and summary is None:
                self._announce(event, thread_id, None)
            elif event != "deleted" and summary is not None:
                self._announce(event, thread_id, summary)


def _ts_ago(seconds: float) -> str:
    """A timestamp in the records' format (restore/stores/api.py now_ts), `seconds` ago."""
    moment = datetime.now(UTC) - timedelta(seconds=seconds)
    return moment.isoformat(timespec="microseconds")[:-6] + "Z"
