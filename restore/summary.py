"""A thread's listing row (title, preview, cwd, counts), derived from its items.

Derived, never stored as truth: the index holds these rows, and they are rebuilt from the
JSONL files whenever the index is missing or stale. `ThreadSummary.apply` is incremental so
a writer keeps its row current without rereading the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
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
_QUIET_TYPES = frozenset({"lifecycle", "import_checkpoint"})


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
    lastSeq: int = 0
    latestSessionId: str | None = None

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
        elif kind == "thread_title":
            if isinstance(item.get("title"), str):
                self.title = one_line(item["title"])
        elif kind == "message" and not self.preview and item.get("role") == "user":
            self.preview = make_preview(item.get("content"))
        elif kind == "cost" and isinstance(item.get("usd"), int | float):
            self.costUsd = round(self.costUsd + float(item["usd"]), 10)
        if kind not in BOOKKEEPING_TYPES:
            self.itemCount += 1

    def thread_info(self) -> dict[str, Any]:
        """The wire `ThreadInfo` (Appendix A). Built by hand, not with `asdict`: it is sent
        with every `thread/updated`, and `asdict` deep-copies (160 µs a call)."""
        return {name: getattr(self, name) for name in THREAD_INFO_FIELDS}


THREAD_INFO_FIELDS = tuple(
    f.name for f in fields(ThreadSummary) if f.name not in ("lastSeq", "latestSessionId")
)


def summarize(
    thread_id: str, items: list[dict[str, Any]], *, archived: bool = False
) -> ThreadSummary:
    summary = ThreadSummary(threadId=thread_id, archived=archived)
    for item in items:
        summary.apply(item)
    return summary
