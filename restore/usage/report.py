"""Tokens and cost per day, week, month, session or 5-hour billing block, as ccusage counts
them, from the calls a store keeps per model call (no record is read again).

The definitions are ccusage's (its `daily`, `weekly`, `monthly`, `session` and `blocks`):
- a call's day is its time's date in the report's time zone (`--timezone`, else the
  machine's); a week starts on its Monday (ccusage 20 has no other; `start_of_week`
  moves it), a month on its first day;
  `since`/`until` are dates in that zone, both inclusive;
- a session is a top-level thread, its sub-agents' calls included (Claude Code writes a
  sub-agent's calls under its parent's session id, and ccusage counts them there);
- a block starts at the UTC hour of the first call after the previous block, lasts five
  hours, and ends early when more than five hours pass with no call; it is active while
  its last call is under five hours old and its five hours are not over.
Tokens are ccusage's four: fresh input (no cache), output, cache reads, cache writes;
`totalTokens` is their sum. USD is genai-prices' (restore/agents/pricing.py, priced when
the call was imported or recorded); a call whose model the price list does not know adds
its tokens and `unpricedCalls`, never a price: a row of only such calls has `usd` null.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any, Literal

from restore.usage.entries import UsageEntry, UsageThread

Report = Literal["daily", "weekly", "monthly", "session", "blocks"]
By = Literal["model", "agent", "project"]
REPORTS: tuple[Report, ...] = ("daily", "weekly", "monthly", "session", "blocks")
BYS: tuple[By, ...] = ("model", "agent", "project")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
BLOCK_MS = 5 * 3600 * 1000
GRAIN_MS = 15 * 60 * 1000
"""What a period report asks the store to sum calls over: every time zone's offset is a
multiple of 15 minutes, so the calls of one quarter hour share a day in any zone."""


@dataclass
class Totals:
    """Summed calls: ccusage's four token counts, the USD of the priced ones, and how many
    were not priced."""

    inputTokens: int = 0
    outputTokens: int = 0
    cacheReadTokens: int = 0
    cacheWriteTokens: int = 0
    usd: float = 0.0
    calls: int = 0
    unpricedCalls: int = 0

    def add(self, entry: UsageEntry) -> None:
        self.inputTokens += entry.inputTokens
        self.outputTokens += entry.outputTokens
        self.cacheReadTokens += entry.cacheReadTokens
        self.cacheWriteTokens += entry.cacheWriteTokens
        self.usd += entry.usd
        self.calls += entry.calls
        self.unpricedCalls += entry.unpriced

    def wire(self) -> dict[str, Any]:
        return {
            "inputTokens": self.inputTokens,
            "outputTokens": self.outputTokens,
            "cacheReadTokens": self.cacheReadTokens,
            "cacheWriteTokens": self.cacheWriteTokens,
            "totalTokens": self.inputTokens
            + self.outputTokens
            + self.cacheReadTokens
            + self.cacheWriteTokens,
            "usd": None if self.calls and self.unpricedCalls == self.calls else round(self.usd, 10),
            "calls": self.calls,
            "unpricedCalls": self.unpricedCalls,
        }


@dataclass
class Row:
    key: str
    totals: Totals = field(default_factory=Totals)
    parts: dict[str, Totals] = field(default_factory=dict)
    models: set[str] = field(default_factory=set)
    extra: dict[str, Any] = field(default_factory=dict)
    first_ms: int = 0
    last_ms: int = 0

    def add(self, entry: UsageEntry, part: str | None) -> None:
        if not self.totals.calls:
            self.first_ms, self.last_ms = entry.firstMs, entry.lastMs
        self.first_ms = min(self.first_ms, entry.firstMs)
        self.last_ms = max(self.last_ms, entry.lastMs)
        self.totals.add(entry)
        self.models.add(entry.model)
        if part is not None:
            self.parts.setdefault(part, Totals()).add(entry)

    def wire(self) -> dict[str, Any]:
        found = {"key": self.key, **self.extra, **self.totals.wire(),
                 "models": sorted(self.models),
                 "firstAt": _iso(self.first_ms), "lastAt": _iso(self.last_ms)}  # fmt: skip
        if self.parts:
            found["breakdown"] = [
                {"name": name, **totals.wire()} for name, totals in sorted(self.parts.items())
            ]
        return found


def window(since: date | None, until: date | None, zone: tzinfo) -> tuple[int | None, int | None]:
    """The [since, until] dates in `zone` as epoch milliseconds [start, end)."""

    def ms(day: date) -> int:
        return int(datetime(day.year, day.month, day.day, tzinfo=zone).timestamp() * 1000)

    return (
        None if since is None else ms(since),
        None if until is None else ms(until + timedelta(days=1)),
    )


def report(
    kind: Report,
    entries: list[UsageEntry],
    threads: dict[str, UsageThread],
    *,
    zone: tzinfo,
    zone_name: str,
    by: By | None = None,
    start_of_week: str = "monday",
    now_ms: int | None = None,
) -> dict[str, Any]:
    """The report: its rows (oldest first), each with its totals and, with `by`, a
    breakdown; and the totals of them all."""
    part = _part_of(by, threads)
    if kind == "blocks":
        rows = _blocks(entries, part, now_ms if now_ms is not None else _now_ms())
    elif kind == "session":
        rows = _sessions(entries, threads, part)
    else:
        rows = _periods(kind, entries, part, zone, WEEKDAYS.index(start_of_week))
    total = Totals()
    for entry in entries:
        total.add(entry)
    return {
        "report": kind,
        "timezone": zone_name,
        "by": by,
        "rows": [row.wire() for row in rows],
        "totals": total.wire(),
    }


def _part_of(by: By | None, threads: dict[str, UsageThread]) -> Any:
    def part(entry: UsageEntry) -> str | None:
        if by is None:
            return None
        if by == "model":
            return entry.model
        thread = threads.get(entry.threadId)
        if thread is None:
            return "unknown"
        if by == "agent":
            return thread.agent
        return thread.project or "unknown"

    return part


def _periods(
    kind: Report, entries: Iterable[UsageEntry], part: Any, zone: tzinfo, week_start: int
) -> list[Row]:
    rows: dict[str, Row] = {}
    for entry in entries:
        day = datetime.fromtimestamp(entry.firstMs / 1000, zone).date()
        if kind == "weekly":
            day -= timedelta(days=(day.weekday() - week_start) % 7)
        key = day.strftime("%Y-%m") if kind == "monthly" else day.isoformat()
        rows.setdefault(key, Row(key)).add(entry, part(entry))
    return [rows[key] for key in sorted(rows)]


def _sessions(
    entries: Iterable[UsageEntry], threads: dict[str, UsageThread], part: Any
) -> list[Row]:
    rows: dict[str, Row] = {}
    for entry in entries:
        root = _root(entry.threadId, threads)
        row = rows.get(root)
        if row is None:
            thread = threads.get(root)
            row = rows[root] = Row(
                root,
                extra={
                    "threadId": root,
                    "title": thread.title if thread else None,
                    "project": thread.project if thread else None,
                    "agent": thread.agent if thread else None,
                },
            )
        row.add(entry, part(entry))
    return sorted(rows.values(), key=lambda row: (row.last_ms, row.key))


def _root(thread_id: str, threads: dict[str, UsageThread]) -> str:
    """The top-level thread a sub-agent's calls count under (a parent with no calls of its
    own is still the root, named by its id)."""
    seen = {thread_id}
    thread = threads.get(thread_id)
    while thread is not None and thread.parentThreadId and thread.parentThreadId not in seen:
        seen.add(thread_id := thread.parentThreadId)
        thread = threads.get(thread_id)
    return thread_id


def _blocks(entries: list[UsageEntry], part: Any, now_ms: int) -> list[Row]:
    blocks: list[Row] = []
    current: Row | None = None
    start = 0
    for entry in sorted(entries, key=lambda e: (e.firstMs, e.threadId, e.model)):
        at = entry.firstMs
        if current is None or at - start > BLOCK_MS or at - current.last_ms > BLOCK_MS:
            start = at - at % 3_600_000  # the UTC hour (no zone has a fraction-of-hour
            # offset from UTC that ccusage honours: it floors in UTC)
            current = Row(_iso(start))
            blocks.append(current)
            current.extra["startAt"] = _iso(start)
            current.extra["endAt"] = _iso(start + BLOCK_MS)
        current.add(entry, part(entry))
    for block in blocks:
        end = _ms(block.extra["endAt"])
        block.extra["active"] = now_ms - block.last_ms < BLOCK_MS and now_ms < end
    return blocks


def _iso(ms: int) -> str:
    return (
        datetime.fromtimestamp(ms / 1000, UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def _ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp() * 1000)


def _now_ms() -> int:
    return int(datetime.now(UTC).timestamp() * 1000)
