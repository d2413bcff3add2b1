"""A thread's listing row (title, preview, cwd, counts), derived from its items.

Derived, never stored as truth: the index holds these rows, and they are rebuilt from the
JSONL files whenever the index is missing or stale. `ThreadSummary.apply` is incremental so
a writer keeps its row current without rereading the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any

from protocol.names import SERVER_ITEM_TYPES

PREVIEW_CHARS = 160
_DATA_URL = re.compile(r"data:[\w.+-]+/[\w.+-]+;base64,[A-Za-z0-9+/=\s]+")
_LONG_BASE64 = re.compile(r"[A-Za-z0-9+/=]{200,}")
_WHITESPACE = re.compile(r"\s+")
_BREAKS = re.compile(r"[\t\n\v\f\r]+")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
"""What a one-line listing field shows escaped (`\\x00`), never raw: a NUL (PostgreSQL's
text columns refuse it, failing the record that carried it) or a terminal control
character (an escape sequence). Line breaks and tabs are whitespace: one space."""

BOOKKEEPING_TYPES = frozenset(SERVER_ITEM_TYPES)
"""What `itemCount` leaves out: the server's bookkeeping (sessions, lifecycle, titles,
boundaries, import checkpoints, ACP updates). It counts the rest, the conversation: what
was said and done. One definition for `list`, `show`, ThreadInfo and the extension;
changing it would bump the embedded index's SCHEMA_VERSION and recount the PostgreSQL
rows, so no stored row keeps another count."""
_QUIET_TYPES = frozenset({"lifecycle", "import_checkpoint", "thread_successor"})


def make_preview(content: Any, limit: int = PREVIEW_CHARS) -> str:
    """A short one-line preview of message content: text only, images and base64 dropped.

    Only the first few KB of text are looked at, so a 200 KB message costs the same as a
    short one (and is never lost from listings, unlike Claude Code's picker).
    """
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        texts: list[str] = []
        for part in content:
            if isinstance(part, dict):
                if isinstance(part.get("text"), str):
                    texts.append(part["text"])
                elif part.get("type") == "image":
                    texts.append("[image]")
            elif isinstance(part, str):
                texts.append(part)
        text = " ".join(texts)
    else:
        return ""
    head = text[: limit * 32]
    head = _DATA_URL.sub("[image]", head)
    head = _LONG_BASE64.sub("[data]", head)
    head = one_line(_WHITESPACE.sub(" ", head).strip())
    if len(head) > limit:
        head = head[: limit - 1].rstrip() + "…"
    return head


def one_line(text: str) -> str:
    """`text` as a listing row holds it: line breaks and tabs one space, control characters
    escaped (`\\x1b`): nothing a store cannot hold or a terminal would act on."""
    if _CONTROL.search(text):
        text = _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", text)
    return _BREAKS.sub(" ", text).strip() if _BREAKS.search(text) else text


@dataclass
class ThreadSummary:
    """One row of `thread/list`: the wire ThreadInfo plus where the file is."""

    threadId: str
    title: str | None = None
    preview: str = ""
    cwd: str | None = None
    workspaceFolder: str | None = None
    branch: str | None = None
    headSha: str | None = None
    createdAt: str | None = None
    updatedAt: str | None = None
    itemCount: int = 0
    archived: bool = False
    forkedFrom: dict[str, Any] | None = None
    costUsd: float = 0.0
    origin: dict[str, Any] | None = None
    parentThreadId: str | None = None
    """The thread whose tool call started this one (a sub-agent's), from its first session."""
    parentOperationId: str | None = None
    """That tool call (the parent's operationId), when recorded."""
    childCount: int | None = None
    """Sub-agent threads under this one: counted by a listing, None where not counted."""
    sessionKey: str | None = None
    """The session key, from the first session (thread/start, thread/continue)."""
    previousThreadId: str | None = None
    """The thread a reset replaced with this one, from the first session."""
    nextThreadId: str | None = None
    """The thread that replaced this one (its `thread_successor` item)."""
    resetReason: str | None = None
    lastSeq: int = 0
    latestSessionId: str | None = None

    def __post_init__(self) -> None:
        # Not fields: neither a listing row, nor a snapshot's summary, nor the wire keeps them.
        self.usage_rows: list[UsageRow] = []
        """The cost items folded in since the index last took them (`take_usage`)."""

    def take_usage(self) -> list[UsageRow]:
        """The usage rows to write; then none."""
        found, self.usage_rows = self.usage_rows, []
        return found

    def apply(self, item: dict[str, Any]) -> None:
        """Fold one stored item into the row (items must come in seq order)."""
        ts = item.get("ts")
        if isinstance(ts, str):
            if self.createdAt is None:
                self.createdAt = ts
            # Hook runs, session ends and import checkpoints are bookkeeping: they must
            # not reorder the list.
            if item.get("type") not in _QUIET_TYPES or self.updatedAt is None:
                self.updatedAt = ts
        seq = item.get("seq")
        if isinstance(seq, int) and seq > self.lastSeq:
            self.lastSeq = seq
        kind = item.get("type")
        if kind == "session_meta":
            first = self.latestSessionId is None
            self.latestSessionId = item.get("sessionId") or self.latestSessionId
            for key in ("cwd", "workspaceFolder", "branch", "headSha"):
                setattr(self, key, item.get(key))
            if self.forkedFrom is None and isinstance(item.get("forkedFrom"), dict):
                self.forkedFrom = item["forkedFrom"]
            if self.origin is None and isinstance(item.get("origin"), dict):
                self.origin = item["origin"]
            if self.parentThreadId is None and isinstance(item.get("parentThreadId"), str):
                self.parentThreadId = item["parentThreadId"]
                operation = item.get("parentOperationId")
                self.parentOperationId = operation if isinstance(operation, str) else None
            if self.title is None and isinstance(item.get("title"), str):
                self.title = one_line(item["title"])
            if first and isinstance(item.get("sessionKey"), str):
                self._first_session(item)
        elif kind == "thread_successor":
            if isinstance(item.get("nextThreadId"), str):
                self.nextThreadId = item["nextThreadId"]
        elif kind == "thread_title":
            if isinstance(item.get("title"), str):
                self.title = one_line(item["title"])
        elif kind == "message" and not self.preview and item.get("role") == "user":
            self.preview = make_preview(item.get("content"))
        elif counted_cost(item):
            self.costUsd = round(self.costUsd + float(item["usd"]), 10)
            row = usage_row(item)
            if row is not None:
                self.usage_rows.append(row)
        if kind not in BOOKKEEPING_TYPES:
            self.itemCount += 1

    def _first_session(self, item: dict[str, Any]) -> None:
        """The key and the link a thread is born with (its first `session_meta` only: a
        fork's or a later session's never change them)."""
        if self.sessionKey is None:
            self.sessionKey = item["sessionKey"]
            previous, why = item.get("previousThreadId"), item.get("resetReason")
            self.previousThreadId = previous if isinstance(previous, str) else None
            self.resetReason = why if why in ("daily", "idle") else None

    def thread_info(self) -> dict[str, Any]:
        """The wire `ThreadInfo` (Appendix A). Built by hand, not with `asdict`: it is sent
        with every `thread/updated`, and `asdict` deep-copies (160 µs a call)."""
        return {name: getattr(self, name) for name in THREAD_INFO_FIELDS}


THREAD_INFO_FIELDS = tuple(
    f.name for f in fields(ThreadSummary) if f.name not in ("lastSeq", "latestSessionId")
)


UsageRow = tuple[int, int, str, int, int, int, int, float, bool]
"""One model call as the usage report counts it (restore/usage): seq, epoch milliseconds,
model, fresh input tokens (neither read from nor written to a cache), output tokens, cache
reads, cache writes, USD, priced."""


def counted_cost(item: dict[str, Any]) -> bool:
    """A `cost` item whose `usd` is a number: what a thread's cost and usage count."""
    return item.get("type") == "cost" and isinstance(item.get("usd"), int | float)


def usage_row(item: dict[str, Any]) -> UsageRow | None:
    """A `cost` item as a usage row; None when it has no seq or time to place it by."""
    seq, ts = item.get("seq"), item.get("ts")
    if not isinstance(seq, int) or not isinstance(ts, str):
        return None
    try:
        at = datetime.fromisoformat(ts)
    except ValueError:
        return None
    if at.tzinfo is None:  # the envelope's ts is UTC (restore/clock.py)
        at = at.replace(tzinfo=UTC)
    read, write = _count(item, "cacheReadTokens"), _count(item, "cacheWriteTokens")
    priced = item.get("priced") is not False
    return (
        seq,
        int(at.timestamp() * 1000),
        str(item.get("model") or "unknown"),
        max(0, _count(item, "inputTokens") - read - write),
        _count(item, "outputTokens"),
        read,
        write,
        float(item.get("usd") or 0.0) if priced else 0.0,
        priced,
    )


def _count(item: dict[str, Any], key: str) -> int:
    value = item.get(key)
    return value if isinstance(value, int) and value > 0 else 0


def summarize(
    thread_id: str, items: list[dict[str, Any]], *, archived: bool = False
) -> ThreadSummary:
    summary = ThreadSummary(threadId=thread_id, archived=archived)
    for item in items:
        summary.apply(item)
    return summary
