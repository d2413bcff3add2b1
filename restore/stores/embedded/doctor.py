"""`sessiond doctor`: check every thread file, repair the index, report what was skipped.

By default it reads and reports only. With `repair`, the two kinds of damage a crash can
cause are fixed: a torn tail the way a writer fixes it (copied to `recovered/`, then cut
off, under the thread's lock), and an empty file (a `thread/start` killed before its first
line) moved to `recovered/`. Other bad lines are never touched: they are reported and kept.
"""

from __future__ import annotations

import fcntl
import os
from typing import Any

from protocol.errors import ProtocolError
from restore.home.files import fsync_dir, private_dirs
from restore.home.layout import Layout
from restore.stores.api import DoctorReport, FileFinding, StepProgress
from restore.stores.embedded.files import ThreadStore, read_thread_file
from restore.stores.embedded.index import ThreadIndex
from restore.stores.embedded.jsonl import parse_bytes


def _count_unmapped(
    into: dict[str, dict[str, dict[str, Any]]], items: list[dict[str, Any]]
) -> None:
    for item in items:
        if item.get("type") == "import_checkpoint" and item.get("unmapped"):
            per_agent = into.setdefault(str(item.get("agent")), {})
            for key, (count, line) in item["unmapped"].items():
                entry = per_agent.setdefault(
                    key, {"count": 0, "example": f"{item.get('source')}:{line}"}
                )
                entry["count"] += count


def _repair_torn_tail(store: ThreadStore, finding: FileFinding) -> None:
    """Let the store's writer path do the repair; a thread in use is left to its writer."""
    try:
        store.open_writer(finding.path.stem).close()
    except ProtocolError as exc:
        finding.error = f"not repaired: {exc.message}"
        return
    finding.repaired = True
    finding.skipped = [line for line in finding.skipped if line.reason != "torn_tail"]


def _move_empty_aside(layout: Layout, finding: FileFinding) -> None:
    """Under the thread's lock, and only if still empty: there is nothing in it to lose."""
    fd = os.open(finding.path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            finding.error = "not repaired: the thread is being written"
            return
        if os.fstat(fd).st_size == 0:
            private_dirs(layout.recovered_dir)
            os.replace(finding.path, layout.recovered_dir / f"{finding.path.stem}.empty")
            fsync_dir(finding.path.parent)
    finally:
        os.close(fd)
    finding.empty = False
    finding.repaired = True


def run_doctor(
    layout: Layout,
    progress: StepProgress | None = None,
    *,
    repair: bool = False,
    read_only: bool = False,
    rebuild_index: bool = False,
) -> DoctorReport:
    """`read_only`: a home that cannot be written is checked all the same, with its index
    rebuilt in memory (index.py) instead of repaired on disk. `rebuild_index`: the index
    built again from the thread files whatever its state (index.py `rebuild`)."""
    report = DoctorReport()
    store = ThreadStore(layout, read_only=read_only)
    files = layout.iter_thread_files()
    report.files = len(files)
    for done, (path, _archived) in enumerate(files, start=1):
        try:
            contents = parse_bytes(read_thread_file(path, path.stem))
        except ProtocolError as exc:  # unreadable, a symlink (never followed), not a file
            report.findings.append(FileFinding(path, error=exc.message))
            continue
        report.items += len(contents.items)
        _count_unmapped(report.unmapped, contents.items)
        if contents.size == 0:
            finding = FileFinding(path, empty=True)
            if repair:
                _move_empty_aside(layout, finding)
            report.findings.append(finding)
        elif contents.skipped or contents.bom:
            finding = FileFinding(path, contents.skipped, contents.bom)
            if repair and contents.torn_tail_offset is not None:
                _repair_torn_tail(store, finding)
                if finding.repaired and contents.torn_tail_offset == 0:
                    # A torn first line (only a power cut tears a single write): cut off,
                    # it leaves an empty file, repaired as one in the same run.
                    _move_empty_aside(layout, finding)
            report.findings.append(finding)
        if progress is not None and (done % 100 == 0 or done == len(files)):
            progress("Checking thread files", done, len(files))
    index = ThreadIndex(layout, store.read_summary, in_memory=read_only)
    try:
        report.index_action = (index.rebuild if rebuild_index else index.ensure_ready)(
            None if progress is None else lambda d, t: progress("Repairing index", d, t)
        )
        report.indexed = index.count()
    finally:
        index.close()
    return report
