"""What an import did: per source file (`FileResult`) and per run (`ImportSummary`), as
`sessiond import` prints them and the watcher announces them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from restore.summary import ThreadSummary


@dataclass
class FileResult:
    """What importing one source file did: created, updated, revision (rewritten: a new
    thread), unchanged, empty, deferred (no cwd yet, while watching), busy, missing,
    not-a-file (a FIFO or device where a session file was expected: never opened),
    symlink (a link, or a folder on its way is one: never followed), too-large (over
    FILE_BYTES: not read), unreadable (it could not be read: why, in `reason`)."""

    path: str
    status: str
    threadId: str | None = None
    items: int = 0
    skipped: list[dict[str, Any]] = field(default_factory=list)
    repaired: int = 0
    reason: str | None = None
    summary: ThreadSummary | None = None
    appended: list[dict[str, Any]] = field(default_factory=list)
    """The stored lines an update added (for subscribers; a new thread's are not kept)."""
    unmapped: dict[str, list[int]] = field(default_factory=dict)
    """Record types and tools read and not mapped: `record:<type>` → [count, first line]."""
    children: list[FileResult] = field(default_factory=list)
    """The sub-agent threads whose events the file holds (Copilot CLI's), as written."""

    def add(self, stored: list[dict[str, Any]], *, keep: bool) -> None:
        self.items += len(stored)
        if keep:
            self.appended += stored

    @property
    def changed(self) -> bool:
        return self.status in ("created", "updated", "revision")

    @property
    def not_read(self) -> bool:
        """The file was refused as it is (a link, a FIFO, too large) or could not be read."""
        return self.status in ("symlink", "not-a-file", "too-large", "unreadable")


@dataclass
class ImportSummary:
    """An import run: sessions seen and what happened to each, items, skipped lines, time."""

    agent: str
    root: str
    sessions: int = 0
    created: int = 0
    updated: int = 0
    revisions: int = 0
    unchanged: int = 0
    empty: int = 0
    deferred: int = 0
    busy: int = 0
    items: int = 0
    skippedLines: int = 0
    repairedLines: int = 0
    seconds: float = 0.0
    problems: list[dict[str, Any]] = field(default_factory=list)
    unmapped: dict[str, dict[str, Any]] = field(default_factory=dict)
    """`record:<type>` / `tool:<name>` → {count, example: "path:line"}: what the mapping
    does not know, so a new agent version's records are seen, never dropped silently."""

    def add(self, result: FileResult) -> None:
        for child in result.children:  # a sub-agent in its parent's file is a session too
            self.add(child)
        self.sessions += 1
        counter = {"revision": "revisions"}.get(result.status, result.status)
        if hasattr(self, counter) and counter not in ("items", "sessions"):
            setattr(self, counter, getattr(self, counter) + 1)
        self.items += result.items
        self.skippedLines += len(result.skipped)
        self.repairedLines += result.repaired
        merge_unmapped(self.unmapped, result.path, result.unmapped)
        if result.reason or result.skipped or result.repaired:
            self.problems.append(
                {
                    "path": result.path,
                    "status": result.status,
                    "reason": result.reason,
                    "skipped": result.skipped,
                    "repaired": result.repaired,
                }
            )

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def merge_unmapped(into: dict[str, dict[str, Any]], path: str, found: dict[str, list[int]]) -> None:
    """Add one file's unmapped counts; the first file seen gives the example."""
    for key, (count, line) in found.items():
        entry = into.setdefault(key, {"count": 0, "example": f"{path}:{line}"})
        entry["count"] += count
