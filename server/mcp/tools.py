"""What each MCP tool answers, as compact text a model reads, from the thread service.

The same service calls `sessiond search`, `list`, `show` and `resume` make (restore/service),
within a `Scope`: the folders the agent was started for (its working directory by default),
as a client's `workspaceFolder` narrows `thread/search` and `thread/list`. A thread outside
the scope is not found, as if it did not exist. Paging is explicit: every answer says how
many it shows and, when there are more, the cursor that gets them (never a silent cap).
Nothing is written: no session is opened, no lock taken (the resume command is the
preview `sessiond resume` shows).

Errors a model can mend (a malformed query, an unknown id, a bad cursor) are `Refused`,
one line naming the mend; server/mcp/server.py returns them as MCP tool errors.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from protocol.errors import ErrorKind, ProtocolError
from restore.engine.environment import canonical
from restore.render import styles
from restore.render.transcript import render
from restore.service import ThreadService
from restore.stores.api import ListFilters, SearchFilters
from restore.summary import ThreadSummary
from restore.usage.entries import Usage, UsageSource, UsageThread
from server.cli.options import CommandError
from server.cli.search import resume_command as search_resume_command
from server.cli.search import when

MAX_SEARCH = 50
MAX_LIST = 100
MAX_READ = 200
MESSAGE_CHARS = 4000
"""A message's text beyond this is cut (and says so): a page stays readable for a model;
read_session with a smaller `limit` or `sessiond show` has the rest."""
PAGE_BYTES = 4 * 1024 * 1024
ORDERS = ("newest", "oldest")
T = TypeVar("T")


ROOT_REFUSAL = (
    "sessiond mcp was started in / (as a desktop app starts its servers), which names no "
    "workspace: configure it with `sessiond mcp --folder DIR` (the project's folder, "
    "repeatable) or `sessiond mcp --all-folders` (every session) in the MCP settings"
)


class Refused(Exception):
    """A call the model can mend: the message says how."""


@dataclass(frozen=True)
class Scope:
    """The folders whose threads the agent sees: a thread is in one when it was recorded
    for that workspace folder or started in it or under it (the index's `workspaceFolder`
    filter). `folders` empty: every thread (`sessiond mcp --all-folders`)."""

    folders: tuple[str, ...]
    refusal: str | None = None
    """Why no call is answered: the server was started in `/` without being told its
    folders (as a desktop app starts its servers), where the working directory says
    nothing of a workspace and "under /" would be every thread."""

    @classmethod
    def of(cls, folders: list[str], everything: bool, *, told: bool = True) -> Scope:
        """`told`: the folders were given (`--folder`), not the working directory."""
        if everything:
            return cls(())
        named = dict.fromkeys(canonical(os.path.abspath(f)) for f in folders)
        # a folder inside another of the scope adds nothing (its threads would come twice)
        outer = [f for f in named if not any(_inside(f, other) for other in named if other != f)]
        scope = cls(tuple(outer))
        if not told and scope.folders == ("/",):
            return cls(("/",), ROOT_REFUSAL)
        return scope

    @property
    def everything(self) -> bool:
        return not self.folders

    def holds(self, row: ThreadSummary | UsageThread) -> bool:
        """A thread of the scope: opened on one of its folders, or run inside one."""
        if self.everything:
            return True
        return any(
            row.workspaceFolder == folder or _inside(row.cwd or "", folder)
            for folder in self.folders
        )

    def described(self) -> str:
        return "every folder" if self.everything else ", ".join(self.folders)

    def narrowed(self, folder: str | None) -> list[str | None]:
        """The folders a call pages through: the scope's, or `folder` when it lies inside
        the scope (Refused otherwise: the scope is not widened by an argument)."""
        if folder is None:
            return list(self.folders) or [None]
        if not os.path.isabs(folder):
            raise Refused(f"folder must be an absolute path, not {folder[:80]!r}")
        wanted = canonical(folder)
        inside = self.everything or any(_inside(wanted, f) for f in self.folders)
        if not inside:
            raise Refused(
                f"folder {wanted} is outside the folders this server sees ({self.described()})"
            )
        return [wanted]


def _inside(path: str, folder: str) -> bool:
    """`path` is `folder` or under it."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


class Cursor:
    """A page's position: which of the scope's folders, and the store's own cursor within
    it (`<folder index>.<cursor>`), so a scope of several folders pages through each in
    turn, none left out."""

    @staticmethod
    def encode(folder: int, inner: str | None) -> str:
        return f"{folder}.{inner or ''}"

    @staticmethod
    def decode(cursor: str | None, folders: int) -> tuple[int, str | None]:
        if cursor is None or cursor == "":
            return 0, None
        head, dot, inner = cursor.partition(".")
        if not dot or not head.isdigit() or int(head) >= folders:
            raise Refused(
                "cursor is not one this tool gave: pass the cursor of the previous answer "
                "exactly, or leave it out for the first page"
            )
        return int(head), inner or None


def _paged(
    folders: list[str | None],
    cursor: str | None,
    limit: int,
    page: Callable[[str | None, str | None, int], tuple[list[T], str | None]],
) -> tuple[list[T], str | None]:
    """Up to `limit` entries from the folders in turn, starting at `cursor`; the cursor
    of what follows (None: nothing does)."""
    at, inner = Cursor.decode(cursor, len(folders))
    found: list[T] = []
    while at < len(folders):
        got, inner = page(folders[at], inner, limit - len(found))
        found += got
        if inner is not None:
            return found, Cursor.encode(at, inner)
        at += 1
        if len(found) >= limit:
            return found, Cursor.encode(at, None) if at < len(folders) else None
    return found, None


def _limit(value: int, most: int) -> int:
    if not 1 <= value <= most:
        raise Refused(f"limit must be from 1 to {most}, not {value}")
    return value


def _label(row: ThreadSummary) -> str:
    return " ".join(str(row.title or row.preview or "(no messages yet)").split())[:120]


def _agent(row: ThreadSummary) -> str:
    origin = row.origin or {}
    return str(origin.get("agent") or "sessiond")


def _row_line(row: ThreadSummary) -> str:
    facts = [
        row.threadId,
        (row.updatedAt or row.createdAt or "")[:19] + "Z",
        _agent(row),
        f"{row.itemCount} item{'' if row.itemCount == 1 else 's'}",
    ]
    if row.branch:
        facts.append(f"branch {row.branch}")
    if row.cwd:
        facts.append(f"in {row.cwd}")
    return " · ".join(facts) + f' · "{_label(row)}"'


def _more(tool: str, cursor: str | None, what: str) -> str:
    if cursor is None:
        return f"(no more {what})"
    return f'(more {what}: call {tool} again with cursor "{cursor}")'


class Tools:
    """The tools over one thread service, within one scope. `where_flags`: the `--home` /
    `--store` this server reads, so a `sessiond resume` it suggests reads the same threads."""

    def __init__(self, service: ThreadService, scope: Scope, where_flags: str = "") -> None:
        self.service = service
        self.scope = scope
        self.where_flags = where_flags

    def answerable(self) -> None:
        """Refused, saying how to configure the server, when its scope is unknown."""
        if self.scope.refusal is not None:
            raise Refused(self.scope.refusal)

    # --- search_sessions ------------------------------------------------------------------

    def search_sessions(
        self,
        query: str,
        *,
        agent: str | None = None,
        role: str | None = None,
        since: str | None = None,
        until: str | None = None,
        folder: str | None = None,
        archived: bool = False,
        cursor: str | None = None,
        limit: int = 10,
    ) -> str:
        limit = _limit(limit, MAX_SEARCH)
        if not query.strip():
            raise Refused('query is empty: words, "a phrase", prefix*, -word')
        try:
            since_at, until_at = when(since, "since"), when(until, "until")
        except CommandError as exc:
            raise Refused(str(exc)) from None
        partial = False

        def page(where: str | None, inner: str | None, wanted: int) -> tuple[list[Any], str | None]:
            nonlocal partial
            asked = SearchFilters(
                workspace_folder=where,
                agent=agent,
                role=role,
                since=since_at,
                until=until_at,
                archived=archived,
            )
            found = self.service.search(
                query,
                asked,
                cursor=inner,
                limit=wanted,
            )
            partial = partial or found.partial
            return list(found.hits), found.next_cursor

        hits, following = _paged(self.scope.narrowed(folder), cursor, limit, page)
        where = folder or self.scope.described()
        several = folder is None and len(self.scope.folders) > 1
        order = "best first, a folder at a time" if several else "best first"
        lines = [
            f"{len(hits)} hit{'s' if len(hits) != 1 else ''} for {query!r} in {where} ({order}):"
        ]
        for number, hit in enumerate(hits, 1):
            info = hit.thread.thread_info()
            snippet = _marked(hit.snippet, hit.highlights)
            lines += [
                f"{number}. {_row_line(hit.thread)}",
                f"   {hit.role}, seq {hit.seq}, {hit.ts[:19]}Z: {snippet}",
                f"   resume: {search_resume_command(info, self.where_flags)}",
            ]
        if partial:
            lines.append("(partial: the search index is still being built; ask again for more)")
        lines.append(_more("search_sessions", following, "hits"))
        return "\n".join(lines)

    # --- list_sessions --------------------------------------------------------------------

    def list_sessions(
        self,
        *,
        text: str | None = None,
        folder: str | None = None,
        archived: bool = False,
        cursor: str | None = None,
        limit: int = 20,
    ) -> str:
        limit = _limit(limit, MAX_LIST)

        def page(
            where: str | None, inner: str | None, wanted: int
        ) -> tuple[list[ThreadSummary], str | None]:
            rows, following = self.service.list(
                ListFilters(
                    workspace_folder=where,
                    archived=archived,
                    search=text,
                    cursor=inner,
                    limit=wanted,
                )
            )
            return list(rows), following

        rows, following = _paged(self.scope.narrowed(folder), cursor, limit, page)
        kind = "archived threads" if archived else "threads"
        lines = [f"{len(rows)} {kind} in {folder or self.scope.described()} (newest first):"]
        lines += [f"- {_row_line(row)}" for row in rows]
        lines.append(_more("list_sessions", following, kind))
        return "\n".join(lines)

    # --- read_session ---------------------------------------------------------------------

    def read_session(
        self, thread: str, *, order: str = "newest", cursor: str | None = None, limit: int = 40
    ) -> str:
        limit = _limit(limit, MAX_READ)
        if order not in ORDERS:
            raise Refused(f"order must be one of {', '.join(ORDERS)}, not {order[:40]!r}")
        row = self._thread(thread)
        backward = order == "newest"
        at: int | None = None
        if cursor:
            if not cursor.isdigit():
                raise Refused("cursor is the number the previous page gave; leave it out to start")
            at = int(cursor)
        pages = self.service.pages
        if backward:
            before = at if at is not None else pages.last_seq(row.threadId) + 1
            page = pages.read(row.threadId, before=before, limit=limit, max_bytes=PAGE_BYTES)
        else:
            page = pages.read(row.threadId, after=at or 0, limit=limit, max_bytes=PAGE_BYTES)
        items = [_clipped(item) for item in page.items]
        seqs = [int(item.get("seq") or 0) for item in items]
        span = f"seq {min(seqs)}-{max(seqs)}" if seqs else "no items"
        way = "newest first: the next page is older" if backward else "oldest first"
        lines = [_row_line(row), f"page: {span} of {row.lastSeq} ({way}; shown oldest to newest)"]
        lines += list(render(items, styles.Text()))
        if page.skipped:
            lines.append(f"({len(page.skipped)} unreadable lines skipped)")
        lines.append(
            _more("read_session", None if page.next_seq is None else str(page.next_seq), "items")
        )
        return "\n".join(lines)

    # --- resume_command -------------------------------------------------------------------

    def resume_command(self, thread: str) -> str:
        """How to continue the thread, as `sessiond resume` says it: its agent's own resume
        (run in the folder it was recorded in) for an imported session, else sessiond's;
        and whether the workspace still is the one it was recorded in."""
        from server.cli.resume import summary

        row = self._thread(thread)
        try:
            report = self.service.preview(
                row.threadId, cwd=None, accept_drift=False, message_limit=1
            )
        except ProtocolError as exc:
            if exc.kind is not ErrorKind.THREAD_ARCHIVED:
                raise
            return (
                f"thread {row.threadId} is archived: `sessiond{self.where_flags} unarchive "
                f"{row.threadId}` brings it back, then it can be resumed"
            )
        command = search_resume_command(row.thread_info(), self.where_flags)
        handoff = report.get("handoff")
        if handoff:
            command = shlex.join(handoff["command"])
            if handoff.get("cwd"):
                command = f"cd {shlex.quote(handoff['cwd'])} && {command}"
        return "\n".join([f"command: {command}", *summary(report, row.threadId)])

    # --- the thread a call names ----------------------------------------------------------

    def _thread(self, text: str) -> ThreadSummary:
        """The one thread in scope an id or unique prefix names (not found otherwise, as
        if the others did not exist)."""
        try:
            thread_id = self.service.thread_id_of(text)
        except ProtocolError as exc:
            if exc.kind is ErrorKind.INVALID_ID and "candidates" in exc.details:
                ours = [c for c in exc.details["candidates"] if self._row(c) is not None]
                if len(ours) == 1:
                    thread_id = ours[0]
                elif not ours:
                    raise Refused(
                        f"no thread in {self.scope.described()} has an id starting "
                        f"with {text.strip()[:40]}"
                    ) from None
                else:
                    raise Refused(
                        f"{text.strip()[:40]} is the start of {len(ours)} thread "
                        f"ids: {', '.join(ours)}; give more of it"
                    ) from None
            else:
                raise
        row = self._row(thread_id)
        if row is None:
            raise Refused(
                f"no thread {thread_id} in {self.scope.described()}: search_sessions or "
                "list_sessions give the ids"
            )
        return row

    # --- usage ----------------------------------------------------------------------------

    def usage(
        self,
        report: str = "daily",
        *,
        by: str | None = None,
        since: str | None = None,
        until: str | None = None,
        timezone: str | None = None,
    ) -> str:
        """Tokens and cost of the scope's sessions (restore/usage, as `sessiond usage`
        reports them), as the table the command prints."""
        from restore.usage.request import usage_report
        from server.cli.usage import table

        index = self.service.store.index
        index.ensure_ready()
        source = index if self.scope.everything else _ScopedUsage(index, self.scope)
        found = usage_report(source, report, by=by, since=since, until=until, timezone=timezone)
        return f"usage of {self.scope.described()}:\n" + table(found)

    def _row(self, thread_id: str) -> ThreadSummary | None:
        index = self.service.store.index
        index.ensure_ready()
        row = index.get(thread_id)
        return row if row is not None and self.scope.holds(row) else None


class _ScopedUsage:
    """The store's summed model calls of the scope's threads only (the threads `search` and
    `list` would show), so a report names no other folder's sessions."""

    def __init__(self, index: UsageSource, scope: Scope) -> None:
        self._index, self._scope = index, scope

    def usage(
        self, since_ms: int | None, until_ms: int | None, grain_ms: int, *, threads: bool
    ) -> Usage:
        entries, rows = self._index.usage(since_ms, until_ms, grain_ms, threads=True)
        ours = {thread_id: row for thread_id, row in rows.items() if self._scope.holds(row)}
        return [entry for entry in entries if entry.threadId in ours], ours


def _marked(snippet: str, highlights: list[list[int]]) -> str:
    """The snippet on one line, each match between `[` and `]`."""
    out, at = [], 0
    for a, b in highlights:
        out += [snippet[at:a], "[", snippet[a:b], "]"]
        at = b
    out.append(snippet[at:])
    return " ".join("".join(out).split())


def _clipped(item: dict[str, Any]) -> dict[str, Any]:
    """A message whose text is longer than MESSAGE_CHARS, cut there and saying how much
    more there is."""
    content = item.get("content")
    if item.get("type") != "message" or content is None:
        return item
    text = "".join(_texts(content))
    if len(text) <= MESSAGE_CHARS:
        return item
    cut = f"{text[:MESSAGE_CHARS]} … ({len(text) - MESSAGE_CHARS} more characters)"
    return {**item, "content": cut}


def _texts(content: Any) -> Iterator[str]:
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                yield part["text"]
