"""Snapshot files: `snapshots/<id[:2]>/<id>.json`, one per thread, replaced atomically.

A snapshot is derived (restore/stores/api.py has the codec both stores share): a missing,
unreadable or stale one costs a full replay, never a resume.
"""

from __future__ import annotations

from restore.home.files import private_dirs, read_regular, write_atomically
from restore.home.layout import Layout
from restore.stores.snapshots import Snapshot, decode_snapshot, encode_snapshot


def load(layout: Layout, thread_id: str) -> tuple[Snapshot | None, str | None]:
    """The thread's snapshot, or None and why not ("missing", "corrupt: ...")."""
    try:
        data = read_regular(layout.snapshot_path(thread_id))
    except FileNotFoundError:
        return None, "missing"
    except OSError as exc:
        return None, f"corrupt: {type(exc).__name__}"
    return decode_snapshot(thread_id, data)


def save(layout: Layout, thread_id: str, snapshot: Snapshot) -> None:
    path = layout.snapshot_path(thread_id)
    private_dirs(path.parent)
    write_atomically(path, encode_snapshot(thread_id, snapshot))


def discard(layout: Layout, thread_id: str) -> None:
    layout.snapshot_path(thread_id).unlink(missing_ok=True)
