"""Snapshots: a derived, deletable checkpoint of every subsystem's state at some seq.

Resume reads the newest snapshot plus the tail of the file after it, so its cost does not
grow with the thread. A snapshot that is missing, unreadable, of another version, or that
no longer matches the file (the store verifies its checkpoint) is ignored in favour of a
full replay, which gives the same state (property-tested).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import orjson

from restore.engine.subsystems import ThreadState
from restore.home.files import private_dirs, read_regular, write_atomically
from restore.home.layout import Layout
from restore.stores.embedded.files import Checkpoint

SNAPSHOT_VERSION = 2  # 2: messages keep no bodies (resume reads the newest from the file)
EVERY_ITEMS = 1000
"""A snapshot is written after this many items since the last one, and on close."""


@dataclass
class Snapshot:
    checkpoint: Checkpoint
    state: ThreadState
    skipped: list[dict[str, Any]]
    bom: bool
    closed_session_id: str | None
    """Set when the snapshot was taken by a clean close of that session."""


def load(layout: Layout, thread_id: str) -> tuple[Snapshot | None, str | None]:
    """The thread's snapshot, or None and why not ("missing", "corrupt: ...")."""
    try:
        data = read_regular(layout.snapshot_path(thread_id))
    except FileNotFoundError:
        return None, "missing"
    except OSError as exc:
        return None, f"corrupt: {type(exc).__name__}"
    return decode(thread_id, data)


def decode(thread_id: str, data: bytes) -> tuple[Snapshot | None, str | None]:
    """A snapshot from its stored bytes (a file, or a row of the PostgreSQL store)."""
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


def encode(thread_id: str, snapshot: Snapshot) -> bytes:
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


def save(layout: Layout, thread_id: str, snapshot: Snapshot) -> None:
    path = layout.snapshot_path(thread_id)
    private_dirs(path.parent)
    write_atomically(path, encode(thread_id, snapshot))


def discard(layout: Layout, thread_id: str) -> None:
    layout.snapshot_path(thread_id).unlink(missing_ok=True)
