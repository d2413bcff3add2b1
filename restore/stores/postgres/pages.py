"""Pages of a thread from its rows, both ways, in O(page) by the primary key, cut by bytes
like the embedded store's: the database sums the lines' sizes, so only the lines that fit
in the answer leave it. Safe on any thread (pooled reads)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import orjson

from protocol.errors import ProtocolError
from restore.ids import validate_thread_id
from restore.stores.api import ANSWER_OVERHEAD, Page, too_large
from restore.stores.postgres.rows import is_archived
from restore.stores.records import Item

if TYPE_CHECKING:
    from restore.stores.postgres.host import StoreHost

_PAGE = (
    "SELECT seq, size, CASE WHEN running <= %s THEN line END FROM ("
    " SELECT seq, line, octet_length(line) AS size,"
    " sum(octet_length(line) + 1) OVER (ORDER BY seq {order}) AS running FROM ("
    "  SELECT seq, line FROM sessiond_items WHERE thread_id = %s AND {where}"
    "  ORDER BY seq {order} LIMIT %s) AS page) AS sized ORDER BY seq {order}"
)


class SharedPages:
    """Rows have no bad lines to report: `skippedLines` is always empty."""

    def __init__(self, store: StoreHost) -> None:
        self._store = store

    def read(
        self,
        thread_id: str,
        *,
        after: int | None = None,
        before: int | None = None,
        limit: int,
        max_bytes: int,
    ) -> Page:
        """Forward (the first `limit` items with seq > after) or back (the last `limit`
        with seq < before); items ascending either way, `next_seq` None at the end."""
        thread_id = validate_thread_id(thread_id)
        back = before is not None
        start = before if before is not None else after or 0
        chosen, more = self._rows(thread_id, start, back, limit, max_bytes, known=False)
        next_seq = chosen[-1][0] if more else None  # the last one taken, either way
        if back:
            chosen.reverse()
        return Page(next_seq, [], [line for _, line in chosen])

    def after(
        self, thread_id: str, after: int, *, limit: int, max_bytes: int
    ) -> tuple[list[tuple[int, bytes]], bool]:
        """The items after seq `after`, ascending, each with its seq, cut like a forward
        page (count and bytes); True when more follow. For followers of a thread another
        machine writes (server/live/relay.py): a thread that is gone has nothing after."""
        return self._rows(validate_thread_id(thread_id), after, False, limit, max_bytes, known=True)

    def last_seq(self, thread_id: str) -> int:
        """The seq of the thread's last item (0 when it has none); ThreadNotFound if none
        such (for a subscribe: followers get what comes after it)."""
        with self._store.db.read() as conn:
            is_archived(conn, validate_thread_id(thread_id))
            row = conn.execute(
                "SELECT max(seq) FROM sessiond_items WHERE thread_id = %s", (thread_id,)
            ).fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def _rows(
        self, thread_id: str, start: int, back: bool, limit: int, max_bytes: int, *, known: bool
    ) -> tuple[list[tuple[int, bytes]], bool]:
        """(seq, line) from `start` on (exclusive), in the query's order, and whether more
        follow; `known`: the caller does not need ThreadNotFound for a missing thread."""
        budget = max_bytes - ANSWER_OVERHEAD
        order, where = ("DESC", "seq < %s") if back else ("ASC", "seq > %s")
        sql = _PAGE.format(order=order, where=where)
        with self._store.db.read() as conn:
            if not known:
                is_archived(conn, thread_id)  # ThreadNotFound for a missing thread
            params = (budget, thread_id, start, limit + 1)
            rows = conn.execute(sql, params).fetchall()
        chosen: list[tuple[int, bytes]] = []
        for seq, size, line in rows:
            if len(chosen) == limit or line is None:
                if not chosen:
                    raise too_large(seq, size, budget)
                return chosen, True
            chosen.append((seq, line.encode()))
        return chosen, False

    def holds(self, thread_id: str, page: Page, backward: bool) -> bool:
        """Whether a page read ahead is still what a read now would answer: rows before a
        seq never change, so a backward page holds while its thread is there; a forward
        one may end at the thread's end, so it is read again."""
        if not backward:
            return False
        try:
            return self._store.exists(thread_id)
        except ProtocolError:
            return False

    def pick(self, thread_id: str, seqs: Sequence[int], max_bytes: int) -> tuple[list[Item], bool]:
        """The items with these seqs (ascending), newest first within `max_bytes`; True when
        older ones were left out for the budget."""
        if not seqs:
            return [], False
        sql = _PAGE.format(order="DESC", where="seq = ANY(%s)")
        with self._store.db.read() as conn:
            rows = conn.execute(
                sql, (max_bytes - ANSWER_OVERHEAD, thread_id, list(seqs), len(seqs))
            ).fetchall()
        kept = [orjson.loads(line) for _, _, line in reversed(rows) if line is not None]
        return kept, len(kept) < len(rows)
