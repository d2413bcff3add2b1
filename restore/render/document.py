"""A thread written as a document — Markdown, JSON or HTML — page by page from the store.

`write(service, thread_id, fmt, out)` is what `sessiond export`, `sessiond export --all`
and `thread/export` call. Every pass over the thread reads it in pages
(`Store.pages`), so memory holds one page, whatever the thread's length: a first pass
finds where the thread last ran (for the restore's drift banner, judged against the
workspace as it is now), the second writes it. Sub-agents' threads are written under the
call that started them, read the same way. JSON is the protocol's items as stored
(lossless: `sessiond import sessiond FILE` takes it back, restore/render/json_import.py).
Redaction ran before anything was stored; every document says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any, Literal

import orjson

from protocol.errors import ErrorKind, ProtocolError
from restore.render import styles
from restore.render.text import safe
from restore.render.transcript import Nested, Style, Tally, footer, render
from restore.service import ThreadService
from restore.stores.api import ListFilters
from restore.summary import ThreadSummary

Format = Literal["md", "json", "html"]
FORMATS: tuple[Format, ...] = ("md", "json", "html")
EXPORT_VERSION = 1
PAGE_ITEMS = 500
PAGE_BYTES = 32 * 1024 * 1024
"""A page of the store's: 500 items, cut at 32 MiB (an item is at most the frame limit)."""
MAX_DEPTH = 4  # levels of sub-agents written under a thread
DIFF_BYTES = 1024 * 1024
"""Edits whose before or after is larger than this are named, not diffed."""
REDACTED = (
    "Redaction has already run: secrets were replaced before anything was stored, so this "
    "export holds only what sessiond kept."
)


@dataclass
class Exported:
    """What a write produced: the thread and how many items of it (sub-agents' too)."""

    thread_id: str
    items: int = 0


def raw_items(
    service: ThreadService, thread_id: str, skipped: list[dict[str, Any]] | None = None
) -> Iterator[bytes]:
    """The thread's items as stored, in seq order, one page in memory at a time; lines
    that could not be read added to `skipped` (kept in the file, never hidden)."""
    after = 0
    while True:
        page = service.store.pages.read(
            thread_id, after=after, limit=PAGE_ITEMS, max_bytes=PAGE_BYTES
        )
        if skipped is not None:
            skipped += page.skipped
        yield from page.raw
        if page.next_seq is None:
            return
        after = page.next_seq


def items(
    service: ThreadService, thread_id: str, skipped: list[dict[str, Any]] | None = None
) -> Iterator[dict[str, Any]]:
    for raw in raw_items(service, thread_id, skipped):
        yield orjson.loads(raw)


def summary_of(service: ThreadService, thread_id: str) -> ThreadSummary:
    """The thread's listing row; folded from its pages where the index has none."""
    index = service.store.index
    index.ensure_ready()
    row = index.get(thread_id)
    if row is not None:
        return row
    if not service.store.exists(thread_id):
        raise ProtocolError(ErrorKind.THREAD_NOT_FOUND, "no such thread", threadId=thread_id)
    summary = ThreadSummary(threadId=thread_id)
    for item in items(service, thread_id):
        summary.apply(item)
    return summary


def children(service: ThreadService, thread_id: str) -> list[ThreadSummary]:
    """Every (unarchived) sub-agent thread of a thread, newest first."""
    found: list[ThreadSummary] = []
    cursor = None
    while True:
        page, cursor = service.list(
            ListFilters(cursor=cursor, limit=200, parent_thread_id=thread_id)
        )
        found += page
        if cursor is None:
            return found


def label(info: ThreadSummary) -> str:
    return info.title or info.preview or "(no messages yet)"


def drift(service: ThreadService, thread_id: str) -> list[dict[str, Any]]:
    """The restore's drift: where the thread last ran against that place now (the
    worktree subsystem folded page by page; the same rules as a resume)."""
    from restore.engine.environment import detect_drift, probe
    from restore.engine.subsystems import worktree

    recorded: dict[str, Any] = worktree.initial()
    for item in items(service, thread_id):
        recorded = worktree.reduce(recorded, item)
    if not recorded.get("cwd"):
        return []
    return detect_drift(recorded, probe(str(recorded["cwd"])))


def drift_banner(entries: list[dict[str, Any]]) -> str | None:
    if not entries:
        return None
    blocked = any(entry.get("severity") == "block" for entry in entries)
    changes = "; ".join(
        f"{entry.get('field')}: {entry.get('recorded') or '(none)'} → "
        f"{entry.get('current') or '(none)'}"
        for entry in entries
    )
    verdict = "a resume needs review" if blocked else "a resume would warn"
    return f"The workspace changed since this thread ran ({verdict}): {changes}"


def edit_diff(service: ThreadService) -> Callable[[dict[str, Any]], str | None]:
    """An edit's unified diff from the blob store (None: contents not recorded, binary,
    or too large to be worth a page)."""
    import difflib

    store = service.store

    def text(sha: Any) -> str | None:
        if not isinstance(sha, str):
            return ""  # the file did not exist (before) or was removed (after)
        size = store.blob_size(sha)
        if size is None or size > DIFF_BYTES:
            return None
        data = store.get_blob(sha)
        if data is None or b"\0" in data:
            return None
        return data.decode("utf-8", "replace")

    def diff(item: dict[str, Any]) -> str | None:
        if item.get("contentKnown") is False:
            return None
        before, after = text(item.get("beforeSha")), text(item.get("afterSha"))
        if before is None or after is None:
            return None
        path = str(item.get("path") or "file").lstrip("/")
        lines = difflib.unified_diff(
            before.splitlines(), after.splitlines(), f"a/{path}", f"b/{path}", lineterm=""
        )
        return "\n".join(lines) or None

    return diff


def transcript(
    service: ThreadService,
    thread_id: str,
    style: Style,
    tally: Tally,
    *,
    everything: bool = False,
    diff: Callable[[dict[str, Any]], str | None] | None = None,
    depth: int = 0,
    skipped: list[dict[str, Any]] | None = None,
) -> Iterator[str]:
    """The thread's transcript, its sub-agents' under the calls that started them (theirs
    in turn), each read page by page when its place comes."""
    nested: dict[str, Nested] = {}
    if depth < MAX_DEPTH:
        for child in reversed(children(service, thread_id)):  # oldest first
            key = child.parentOperationId or child.threadId
            thunk = _sub_agent(service, child, style, tally, everything, diff, depth)
            if key in nested:  # two sub-agents of one call: one after the other
                first = nested[key]
                nested[key] = lambda first=first, then=thunk: _chain(first, then)  # type: ignore[misc]
            else:
                nested[key] = thunk
    yield from render(
        items(service, thread_id, skipped),
        style,
        nested,
        everything=everything,
        diff=diff,
        tally=tally,
    )


def _chain(first: Nested, then: Nested) -> Iterator[str]:
    yield from first()
    yield from then()


def _sub_agent(
    service: ThreadService,
    child: ThreadSummary,
    style: Style,
    tally: Tally,
    everything: bool,
    diff: Callable[[dict[str, Any]], str | None] | None,
    depth: int,
) -> Nested:
    def draw() -> Iterator[str]:
        opening, closing = style.sub_agent(f"sub-agent thread {child.threadId}: {label(child)}")
        yield opening
        own = Tally()
        yield from transcript(
            service, child.threadId, style, own, everything=everything, diff=diff, depth=depth + 1
        )
        tally.absorb(own)
        if closing is not None:
            yield closing

    return draw


def write(
    service: ThreadService,
    thread_id: str,
    fmt: Format,
    out: IO[bytes],
    *,
    passphrase: bytes | None = None,
) -> Exported:
    """The thread as a document in `fmt`, written to `out` as it is read."""
    summary = summary_of(service, thread_id)
    if fmt == "json":
        if passphrase is not None:
            raise ProtocolError(
                ErrorKind.INVALID_PARAMS, "a passphrase encrypts HTML only", field="passphrase"
            )
        return write_json(service, summary, out)
    banner = drift_banner(drift(service, thread_id))
    tally = Tally()
    heading = f"{label(summary)}"
    facts = [f"thread {summary.threadId}"]
    if summary.archived:
        facts.append("archived")
    for name, value in (
        ("in", summary.cwd),
        ("branch", summary.branch),
        ("from", summary.createdAt),
        ("to", summary.updatedAt),
    ):
        if value:
            facts.append(f"{name} {value}")
    if summary.parentThreadId:
        facts.append(f"sub-agent of thread {summary.parentThreadId}")
    style: Style = styles.Markdown() if fmt == "md" else styles.Html()
    body = transcript(service, thread_id, style, tally, diff=edit_diff(service))
    if fmt == "md":
        _write_markdown(out, heading, facts, banner, body)
        out.write(f"\n---\n\n{_md(footer(tally, summary.itemCount))}\n".encode())
    else:
        from restore.render import page

        page.write(
            out,
            heading,
            facts,
            banner,
            REDACTED,
            body,
            lambda: footer(tally, summary.itemCount),
            passphrase,
        )
    return Exported(thread_id, summary.itemCount)


def _md(text: str) -> str:
    return styles._md_inline(text)


def _write_markdown(
    out: IO[bytes], heading: str, facts: list[str], banner: str | None, body: Iterator[str]
) -> None:
    out.write(f"# {_md(heading)}\n\n{_md(' · '.join(facts))}\n\n> {_md(REDACTED)}\n".encode())
    if banner:
        out.write(f"\n> **⚠ {_md(banner)}**\n".encode())
    for chunk in body:
        out.write(chunk.encode())


def write_json(service: ThreadService, summary: ThreadSummary, out: IO[bytes]) -> Exported:
    """`{"sessiondExport": 1, "redacted": …, "thread": ThreadInfo, "items": [...],
    "subAgents": [{"thread", "items", "subAgents"}, ...]}`: the items byte for byte as
    stored, each sub-agent's thread whole under its parent."""
    out.write(b'{"sessiondExport":%d,"redacted":' % EXPORT_VERSION)
    out.write(orjson.dumps(REDACTED))
    out.write(b",")
    exported = Exported(summary.threadId)
    _json_thread(service, summary, out, exported, 0)
    out.write(b"}\n")
    return exported


def _json_thread(
    service: ThreadService, summary: ThreadSummary, out: IO[bytes], exported: Exported, depth: int
) -> None:
    out.write(b'"thread":' + orjson.dumps(summary.thread_info()) + b',"items":[')
    first = True
    for raw in raw_items(service, summary.threadId):
        out.write(raw if first else b"," + raw)
        first = False
        exported.items += 1
    out.write(b'],"subAgents":[')
    if depth < MAX_DEPTH:
        for n, child in enumerate(reversed(children(service, summary.threadId))):
            out.write(b"{" if n == 0 else b",{")
            _json_thread(service, child, out, exported, depth + 1)
            out.write(b"}")
    out.write(b"]")


def safe_name(text: str) -> str:
    """A file name from recorded text: letters, digits, `-`, `_`, `.`; never empty."""
    import re

    name = re.sub(r"[^A-Za-z0-9._-]+", "-", safe(text, one_line=True)).strip("-.")
    return name[:80] or "thread"
