"""The record envelope both stores write: what a stored line is (`v, seq, ts, type,
sessionId, id`, then the item's own fields), its timestamp format, how items are stamped
for an append (`stamp`) and encoded (`encode_line`), and what a copy of a thread lacks.
Nothing here does I/O; restore/stores/api.py is the interface that uses it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson

from protocol.errors import ErrorKind, ProtocolError
from restore import clock

if TYPE_CHECKING:
    from restore.redaction.engine import Redactor

Item = dict[str, Any]
"""One record: a JSON object with at least `type` and `id` (stored: `v, seq, ts, ...`)."""

FORMAT_VERSION = 1


def now_ts() -> str:
    """Fixed-width UTC timestamp with microseconds, so timestamps sort as text."""
    # isoformat is about twice as fast as strftime, and this runs for every append.
    now = datetime.now(UTC) if clock.TEST_CLOCK is None else clock.now()
    return now.isoformat(timespec="microseconds")[:-6] + "Z"


def ts_at(seconds: float) -> str:
    """`now_ts`'s format for a `time.time()` value."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="microseconds")[:-6] + "Z"


def encode_line(item: Item) -> bytes:
    """An item as its stored line. What the encoder refuses (nested past its 255 levels,
    say, from a path that did not check) is InvalidParams naming the item, not a crash."""
    try:
        return orjson.dumps(item) + b"\n"
    except orjson.JSONEncodeError as exc:
        raise ProtocolError(
            ErrorKind.INVALID_PARAMS,
            f"item {item.get('id')!r} cannot be stored: {exc}",
            id=item.get("id"),
        ) from None


@dataclass(frozen=True)
class Stamped:
    """Items stamped for appending: the new lines, every item's seq, how many repeated."""

    stored: list[Item]
    seqs: list[int]
    new_ids: dict[str, int]
    duplicates: int
    last_seq: int


STAGE_BYTES = 256 << 10
"""A record whose lines pass this many characters is written ahead (`Writer.stage`)."""


@dataclass(frozen=True, slots=True)
class Staged:
    """Lines written ahead of their append (`Writer.stage`), stamped after `base_seq`:
    the append places them only if the thread still ends there."""

    base_seq: int
    stamped: Stamped
    lines: list[str]
    rows: list[str]
    """Where the store holds each line meanwhile (PostgreSQL: `sessiond_staged` ids)."""

    def fits(self, last_seq: int, items: list[Item], known: dict[str, int]) -> bool:
        """Whether these are still the lines `items` would be stamped as now."""
        stored = self.stamped.stored
        return (
            self.base_seq == last_seq
            and len(items) == len(stored)
            and all(str(a["id"]) == str(b["id"]) for a, b in zip(items, stored, strict=True))
            and not any(str(item["id"]) in known for item in stored)
        )


def stamp(
    items: Iterable[Item],
    session_id: str,
    last_seq: int,
    known_ids: dict[str, int],
    *,
    keep_ts: bool = False,
    redactor: Redactor | None = None,
) -> Stamped:
    """The store envelope (`v, seq, ts, type, sessionId, id`, in that order) on every item
    whose id is new; a repeated id (also within `items`) keeps its original seq. Both
    stores stamp here. With `keep_ts` an item's own `ts` is kept (an import dates its
    items by the source transcript, not by now). With a `redactor` every new line's
    secrets are replaced before anything else sees it: what is stored, indexed, answered
    and snapshotted from here on is the redacted line (restore/redaction)."""
    seqs: list[int] = []
    stored: list[Item] = []
    new_ids: dict[str, int] = {}
    duplicates = 0
    ts = now_ts()
    for item in items:
        item_id = str(item["id"])
        known = known_ids.get(item_id) or new_ids.get(item_id)
        if known is not None:
            duplicates += 1
            seqs.append(known)
            continue
        last_seq += 1
        line = {
            "v": FORMAT_VERSION,
            "seq": last_seq,
            "ts": item["ts"] if keep_ts and isinstance(item.get("ts"), str) else ts,
            "type": item["type"],
            "sessionId": session_id,
            "id": item_id,
        }
        for key, value in item.items():  # a loop, not update(genexpr): 1.5x faster here
            if key not in line:
                line[key] = value
        if redactor is not None:
            line = redactor.item(line)
        new_ids[item_id] = last_seq
        seqs.append(last_seq)
        stored.append(line)
    return Stamped(stored, seqs, new_ids, duplicates, last_seq)


def missing_records(thread_id: str, items: list[Item], present: dict[str, int]) -> list[Item]:
    """What a copy of a thread lacks of `items` (`Store.import_thread`), by item id
    (`present`: the copy's item ids and their seqs). The copies diverged, InvalidParams,
    when a record it lacks would land at or before its last seq: nothing is written."""
    last = max(present.values(), default=0)
    new = [item for item in items if str(item["id"]) not in present]
    if any(item["seq"] <= last for item in new):
        raise ProtocolError(
            ErrorKind.INVALID_PARAMS,
            "the copies diverged: other records at the same seqs",
            threadId=thread_id,
        )
    return new
