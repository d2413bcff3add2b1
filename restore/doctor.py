"""`sessiond doctor`: check every thread file, repair the index, report what was skipped.

It reads and reports only: no thread file is changed or deleted (a writer repairs a torn
tail itself, after copying it aside, the next time it opens the thread).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from restore.index import ThreadIndex
from restore.jsonl import SkippedLine, read_thread_file
from restore.paths import Layout
from restore.store import ThreadStore

Progress = Callable[[str, int, int], None]


@dataclass
class FileFinding:
    path: Path
    skipped: list[SkippedLine] = field(default_factory=list)
    bom: bool = False
    error: str | None = None


@dataclass
class DoctorReport:
    files: int = 0
    items: int = 0
    findings: list[FileFinding] = field(default_factory=list)
    index_action: str = ""
    indexed: int = 0

    @property
    def clean(self) -> bool:
        return not any(f.skipped or f.error for f in self.findings)


def run_doctor(layout: Layout, progress: Progress | None = None) -> DoctorReport:
    report = DoctorReport()
    files = layout.iter_thread_files()
    report.files = len(files)
    for done, (path, _archived) in enumerate(files, start=1):
        try:
            contents = read_thread_file(path)
        except OSError as exc:
            report.findings.append(FileFinding(path, error=exc.strerror or str(exc)))
            continue
        report.items += len(contents.items)
        if contents.skipped or contents.bom:
            report.findings.append(FileFinding(path, contents.skipped, contents.bom))
        if progress is not None and (done % 100 == 0 or done == len(files)):
            progress("Checking thread files", done, len(files))
    index = ThreadIndex(layout, ThreadStore(layout).read_summary)
    try:
        report.index_action = index.ensure_ready(
            None if progress is None else lambda d, t: progress("Repairing index", d, t)
        )
        report.indexed = index.count()
    finally:
        index.close()
    return report
