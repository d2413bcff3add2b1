"""Snapshots: a derived, deletable checkpoint of every subsystem's state at some seq, and
the codec both stores keep them in (a file, or a row). Resume reads one plus the items
after it; a missing, unreadable or stale one costs a full replay, which gives the same
state (property-tested).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import orjson

from restore.engine.subsystems import ThreadState


@dataclass(frozen=True)
class Checkpoint:
    """A verified position in a thread: everything before `offset` is covered.

    The last line before it is identified by its start and sha256, so a snapshot taken
    from a thread that was later rewritten or truncated is detected as stale. (PostgreSQL
    counts in seqs: `offset`, `lines` and `line_start` are the last seq there.)
    """

    offset: int
    seq: int
    lines: int
    line_start: int
    line_sha: str
    summary: dict[str, Any]


SNAPSHOT_VERSION = 2  # 2: messages keep no bodies (resume reads the newest from the store)
EVERY_ITEMS = 1000
"""A snapshot is written after this many items since the last one, and on close."""


@dataclass
class Snapshot:
    """A derived, deletable checkpoint of every subsystem's state at some seq: resume reads
    it plus the items after it. A missing, unreadable or stale one costs a full replay,
    which gives the same state (property-tested)."""

    checkpoint: Checkpoint
    state: ThreadState
    skipped: list[dict[str, Any]]
    bom: bool
    closed_session_id: str | None
    """Set when the snapshot was taken by a clean close of that session."""


def encode_snapshot(thread_id: str, snapshot: Snapshot) -> bytes:
    return orjson.dumps(
        {
            "v": SNAPSHOT_VERSION,
            "threadId": thread_id,
            "checkpoint": asdict(snapshot.checkpoint),
            "state": snapshot.state.to_json(),
            "skipped": snapshot.skipped,
            "bom": snapshot.bom,
            "closedSessionId": snapshot.closed_session_id,
        }
    )


def decode_snapshot(thread_id: str, data: bytes) -> tuple[Snapshot | None, str | None]:
    """A snapshot from its stored bytes (a file, or a row), or None and why not."""
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        return None, f"corrupt: {type(exc).__name__}"
    try:
        if body["v"] != SNAPSHOT_VERSION or body["threadId"] != thread_id:
            return None, "corrupt: other version or thread"
        snapshot = Snapshot(
            checkpoint=Checkpoint(**body["checkpoint"]),
            state=ThreadState.from_json(body["state"]),
            skipped=list(body["skipped"]),
            bom=bool(body["bom"]),
            closed_session_id=body.get("closedSessionId"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        return None, f"corrupt: {type(exc).__name__}: {exc}"
    return snapshot, None
