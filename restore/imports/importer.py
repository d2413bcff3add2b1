"""Other agents' sessions (restore/agents/) as sessiond threads: imported once, then as
they grow, into whichever store the service has (through the store interface alone).

Each source file (one agent session) becomes one thread whose id is derived from the
agent and the session id, and each item's id from its source line, so importing twice
writes nothing new, and lines appended since the last import land in the same thread.
How far a file was read is an `import_checkpoint` item in the thread (its path, offset,
line count, sha256 of the file's head and of the last line read, the parser's state);
`imports.sqlite3` caches the latest one per file. A file whose head or last imported line
no longer match, or that shrank, was rewritten rather than appended to: it is imported
again, whole, as a new revision (a new thread, `origin.revision` + 1), never mixed into
the old one. docs/import.md has the field-by-field mapping and these rules.

Reading is tolerant: a BOM, a garbage line, invalid UTF-8, a torn last line or a huge
first line never hide a session; bad lines are skipped and reported (in the summary and
in the checkpoint item), an empty file is skipped with its reason.

A transcripts folder may come from someone else (`--from DIR`), so nothing in it leads
elsewhere: a link among the sessions (to a file or a folder, or a folder on the way to a
session file) is never followed and is reported (`symlink`); only the root, which the user
named, may itself be one. A file larger than FILE_BYTES is not read (`too-large`); lines
are read within their own budget (parse.py). Either way the rest of the run goes on.

The parts: restore/agents/ (where each agent keeps its sessions, its records as items),
plan.py (what to read of a file, into which thread), parse.py (a file into items),
pool.py (parsing in worker processes), ledger.py (where each file was left), results.py;
this module runs them.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
import uuid
from collections import Counter, deque
from collections.abc import Generator, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from stat import S_ISREG
from typing import TYPE_CHECKING, Any

from protocol.errors import ErrorKind, ProtocolError
from restore.agents.api import Agent
from restore.agents.database import DatabaseSession, DatabaseStore, Snapshot
from restore.agents.files import FileStore, spawns_in
from restore.agents.identity import SAFE_ID, thread_id_for
from restore.agents.parsing import CHILD
from restore.engine.environment import ENVIRONMENT_FIELDS, canonical, probe
from restore.imports.ledger import ImportLedger, SourceCheckpoint
from restore.imports.parse import Facts, Flush, Parsed, parse
from restore.imports.plan import EMPTY_SHA, FILE_BYTES, Planned, Planner, from_start, unreadable
from restore.imports.results import FileResult, ImportSummary
from restore.service.threads import ThreadService
from restore.stores.api import Progress, SkippedLine, Writer
from restore.stores.records import Item, encode_line

if TYPE_CHECKING:
    from restore.imports.pool import ParsePool, Ticket

__all__ = ["CHUNK", "FileResult", "ImportSummary", "Importer", "Source"]

Source = Path | DatabaseSession
"""A session to import: its file, or its rows in a database store."""

CHUNK = 50  # files per batch of a long import: one index transaction, one progress report
SKIPPED_KEPT = 100  # skipped lines listed per checkpoint (all are counted)
# Worker processes (pool.py) for a batch import with this much to read: below it, forking
# them costs more than they save (measured in docs/benchmarks.md).
PARALLEL_FROM = 1 << 20
WINDOW_FILES = 8  # files planned ahead per worker
WINDOW_BYTES = 64 << 20  # source bytes being parsed ahead, at most (memory stays bounded)
WORKER_FILE_BYTES = 16 << 20  # a bigger file is streamed here, in batches, as always


@dataclass
class _Ahead:
    """A file planned ahead of its turn: its result, its plan (and parse, in a worker),
    or the error planning it raised (raised in turn)."""

    result: FileResult | None = None
    planned: Planned | None = None
    ticket: Ticket | None = None
    bytes: int = 0
    error: Exception | None = None
    session: str = ""
    """The session it was planned under, while it waits to be written."""

    def outcome(self) -> FileResult:
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result

    def parsed(self, pool: ParsePool) -> list[Flush | Parsed] | None:
        """The worker's parse; None when the file is parsed here (too big for a worker, or
        its worker died)."""
        return None if self.ticket is None else pool.result(self.ticket)

    def cancel(self) -> None:
        if self.planned is not None:
            self.planned.close()


# --- the importer ----------------------------------------------------------------------


class Importer:
    """Imports one agent's sessions into the service's data dir.

    `live` is for watching: a session that has not yet said where it runs waits for the
    line that does (instead of being filed under a guessed directory).
    """

    def __init__(
        self,
        service: ThreadService,
        agent: Agent,
        root: Path | None = None,
        *,
        live: bool = False,
        parallel_from: int | None = PARALLEL_FROM,
    ) -> None:
        """`parallel_from`: how many source bytes a batch import must have to read before
        it parses them in worker processes (None: never)."""
        self.service = service
        self.agent = agent
        self.database = agent.store if isinstance(agent.store, DatabaseStore) else None
        """A database store's (None: the agent keeps a file per session)."""
        self.files = agent.store if isinstance(agent.store, FileStore) else FileStore()
        """A file store's (a database store's importer asks only its defaults)."""
        self.root = (root or agent.default_root()).expanduser().absolute()
        self.live = live
        self.parallel_from = parallel_from
        self.parsed_by_workers = 0
        """Files the last `import_all` had parsed by worker processes."""
        self.ledger = ImportLedger(service.layout.import_ledger_path)
        self._environments: dict[str, Item] = {}
        self._spawns: dict[Path, tuple[tuple[int, int], dict[str, str]]] = {}
        """Parent transcript → (its size and mtime when read, sub-agent key → call)."""
        self._checkpoints: list[SourceCheckpoint] = []
        self._unstorable: list[str] = []  # ids of the file being read the store refused
        # Writers are opened `durable=False`: `commit` makes the batch durable (see there).
        self._store = service.store
        self.planner = Planner(agent, self.files, self.root, self.ledger, service.store)
        self._snapshot: Snapshot | None = None
        """A database store's copy, as the last `scan` took it."""

    def import_all(self, progress: Progress | None = None) -> ImportSummary:
        """Every session under the root; unchanged ones cost a stat and no read. A batch
        of CHUNK files is committed at a time; with much to read, worker processes parse
        files ahead while this process writes them in order (see `_in_order`)."""
        began = time.perf_counter()
        summary = ImportSummary(self.agent.id, str(self.root))
        sources = self.scan()
        pool = self._pool_for(sources)
        try:
            if progress:
                progress(0, len(sources))
            with contextlib.closing(self._in_order(sources, pool)) as results:
                for done, result in enumerate(results, 1):
                    summary.add(result)
                    if done % CHUNK == 0 or done == len(sources):
                        self.commit()
                        if progress:
                            progress(done, len(sources))
        finally:
            if pool is not None:
                pool.close()
        summary.seconds = time.perf_counter() - began
        return summary

    def scan(self) -> list[tuple[Source, SourceCheckpoint | None]]:
        """Every session under the root, with its ledger row (one query for all): each
        session file, or each session of a database store (read from a fresh copy)."""
        known = self.ledger.all(self.agent.id)
        if self.database is not None:
            return [(s, known.get(s.source)) for s in self._database_sessions()]
        files = self.files.session_files(self.root) if self.root.is_dir() else []
        return [(path, known.get(str(path))) for path in files]

    def import_files(
        self, sources: list[tuple[Source, SourceCheckpoint | None]]
    ) -> list[FileResult]:
        """Import a batch of `scan`'s sessions, then write their listing rows."""
        results = [self.import_source(source, known) for source, known in sources]
        self.commit()
        return results

    def import_source(self, source: Source, known: SourceCheckpoint | None) -> FileResult:
        """One session of `scan`'s (`known`: its ledger row)."""
        if isinstance(source, DatabaseSession):
            return self.import_session(source, known)
        return self.import_file(source, known, looked_up=True)

    def watches(self, path: Path) -> bool:
        """Whether a change to `path` is a change to this agent's sessions."""
        if self.database is not None:
            return self.database.touches(self.root, path)
        return self.files.is_session_file(self.root, path)

    def import_changed(self, paths: list[Path]) -> list[FileResult]:
        """What is new after `paths` changed (each a session file; for a database store,
        the database: every session it changed since), then their listing rows."""
        if self.database is not None:
            changed = [
                (s, k)
                for s, k in self.scan()
                if not (isinstance(s, DatabaseSession) and k is not None and _current(s, k))
            ]
            return self.import_files(changed)
        results = [self.import_file(path) for path in paths]
        self.commit()
        return results

    def commit(self) -> None:
        """Make what was imported since the last commit durable, then record it.

        Threads are written without a sync per file; one sync covers the batch (one
        filesystem sync; one transaction of the shared store), and only then are the ledger
        rows written (a checkpoint never gets ahead of the thread it describes) and the
        listing rows (other processes see the threads)."""
        if self._checkpoints:
            self._store.sync()
            checkpoints, self._checkpoints = self._checkpoints, []
            self.ledger.put_many(checkpoints)
        self._store.flush()

    def close(self) -> None:
        self.commit()
        self.ledger.close()
        if self._snapshot is not None:
            self._snapshot.close()

    def import_file(
        self, path: Path, known: SourceCheckpoint | None = None, *, looked_up: bool = False
    ) -> FileResult:
        """Import what is new in one source file (`known`: its ledger row, if `looked_up`)."""
        planned = self.planner.prepare(path, known, looked_up=looked_up)
        if isinstance(planned, FileResult):
            return planned
        try:
            return self._read_or_report(planned, parse(self.planner.parse_start(planned)))
        finally:
            planned.close()

    def _read_or_report(self, planned: Planned, events: Iterable[Flush | Parsed]) -> FileResult:
        """`_read`, or, when the file cannot be read (it became a link, a FIFO, or went
        since it was planned), a result saying why: the rest of the run goes on. What was
        written before the failure stays, without a checkpoint: the next import reads it
        again, and the item ids keep it from being doubled."""
        try:
            return self._read(planned, events)
        except OSError as exc:
            return unreadable(planned, exc)

    # --- in worker processes -------------------------------------------------------------

    def _pool_for(self, sources: list[tuple[Source, SourceCheckpoint | None]]) -> ParsePool | None:
        """Worker processes, when this import has at least `parallel_from` bytes to read
        (new files, and what changed files grew by: a stat each until that many are
        found); below that, starting them costs more than they save. A database store's
        sessions are read here, from its copy."""
        if self.parallel_from is None or len(sources) < 2 or self.database is not None:
            return None
        from restore.imports import pool as import_pool

        if not import_pool.available():
            return None
        to_read = 0
        for path, known in sources:
            if isinstance(path, DatabaseSession):
                continue
            try:
                stat = os.lstat(path)  # a link is not read: it is not work to share
            except OSError:
                continue
            if not S_ISREG(stat.st_mode) or stat.st_size > FILE_BYTES:
                continue
            if known is None:
                to_read += stat.st_size
            elif (known.size, known.mtimeNs) != (stat.st_size, stat.st_mtime_ns):
                to_read += max(stat.st_size - known.offset, 0)
            if to_read >= self.parallel_from:
                return import_pool.ParsePool(min(import_pool.cpus(), import_pool.MAX_WORKERS))
        return None

    def _in_order(
        self, sources: list[tuple[Source, SourceCheckpoint | None]], pool: ParsePool | None
    ) -> Generator[FileResult, None, None]:
        """Each file's result, imported in order. Without a pool, one file after the other;
        with one, files are planned ahead and parsed by its workers meanwhile (a bounded
        window: WINDOW_FILES per worker, at most WINDOW_BYTES of source in flight; a file
        over WORKER_FILE_BYTES is parsed here, streamed, as without a pool). Planning
        ahead changes nothing: a file's plan depends only on its own session's threads,
        and a file whose session is already planned waits until that one is written. A
        worker that dies (killed) leaves its files to this process."""
        self.parsed_by_workers = 0
        if pool is None:
            for source, known in sources:
                yield self.import_source(source, known)
            return
        window = WINDOW_FILES * pool.workers
        queue: deque[_Ahead] = deque()
        sessions: Counter[str] = Counter()  # planned and not yet written
        position = in_flight = 0
        try:
            while True:
                while position < len(sources) and len(queue) < window and in_flight < WINDOW_BYTES:
                    path, known = sources[position]
                    assert isinstance(path, Path), "a database store has no pool"
                    # The ledger knows the session of a file it has seen (no read for it).
                    session_id = (
                        known.sessionId if known is not None else self.files.session_id(path)
                    ) or str(path)
                    if sessions[session_id]:
                        break
                    position += 1
                    ahead = self._plan_ahead(path, known, session_id, pool)
                    if ahead.planned is not None:
                        ahead.session = session_id
                        sessions[session_id] += 1
                        in_flight += ahead.bytes
                    queue.append(ahead)
                if not queue:
                    return
                ahead = queue.popleft()
                if ahead.planned is None:
                    yield ahead.outcome()
                    continue
                sessions[ahead.session] -= 1
                in_flight -= ahead.bytes
                planned = ahead.planned
                try:
                    events: Iterable[Flush | Parsed]
                    parsed = ahead.parsed(pool)
                    if parsed is not None:
                        self.parsed_by_workers += 1
                        events = parsed
                    else:
                        events = parse(self.planner.parse_start(planned))
                    result = self._read_or_report(planned, events)
                except OSError as exc:  # the worker's parse failed as reading would
                    result = unreadable(planned, exc)
                finally:
                    planned.close()
                yield result
        finally:
            for ahead in queue:
                ahead.cancel()

    def _plan_ahead(
        self, path: Path, known: SourceCheckpoint | None, session_id: str, pool: ParsePool
    ) -> _Ahead:
        try:
            planned = self.planner.prepare(path, known, looked_up=True)
        except Exception as exc:  # raised when its turn comes, as without planning ahead
            return _Ahead(error=exc)
        if isinstance(planned, FileResult):
            return _Ahead(result=planned)
        size = planned.size - (planned.start.offset if planned.start else 0)
        if size > WORKER_FILE_BYTES:
            return _Ahead(planned=planned)
        return _Ahead(
            planned=planned, ticket=pool.submit(self.planner.parse_start(planned)), bytes=size
        )

    # --- reading and writing ---------------------------------------------------------------

    def _read(self, planned: Planned, events: Iterable[Flush | Parsed]) -> FileResult:
        """Write what the parse of one file gives (as it gives it), then its checkpoint."""
        source, start, writer = planned.source, planned.start, planned.writer
        self._unstorable = []
        revision, session_id, thread_id = planned.revision, planned.session_id, planned.thread_id
        result = FileResult(source, planned.status, thread_id, reason=planned.note)
        children = _Children(planned)
        parsed = None
        for event in events:
            if isinstance(event, Parsed):
                parsed = event
                break
            event.items = self._own(event.items, event.facts, children)
            if writer is None:
                writer, added, refused = self._create(
                    thread_id, revision, session_id, source, event.facts
                )
                result.reason = refused or result.reason
                planned.writer = writer
                result.items += added
            result.add(self._append(writer, event.items), keep=start is not None)
        assert parsed is not None, "a parse ends with its Parsed"
        result.skipped, result.repaired = parsed.skipped, parsed.repaired
        result.unmapped = parsed.unmapped
        if writer is None and parsed.records == 0:
            children.close()
            if not result.skipped:
                return FileResult(source, "empty", reason="no records, only blank lines")
            # Junk in the agent's folder (no line of it a record): reported, not a thread
            # of "(no messages yet)" to delete by hand. Read again whole if it grows.
            return FileResult(
                source,
                "empty",
                skipped=result.skipped,
                reason="not a session: no line of it could be read",
            )
        if writer is None and not parsed.items and self.files.skip_itemless:
            children.close()
            return FileResult(
                source,
                "empty",
                reason="no conversation yet",
                skipped=result.skipped,
                unmapped=result.unmapped,
            )
        if writer is None and parsed.facts.cwd is None and self.live:
            children.close()
            return FileResult(source, "deferred", reason="no line says where it runs yet")
        parsed.items = self._own(parsed.items, parsed.facts, children)
        read_nothing = parsed.offset == (start.offset if start else 0) and not parsed.items
        if writer is not None and read_nothing:
            result.status = "unchanged"  # touched, or only a torn tail: nothing to add
        checkpoint = SourceCheckpoint(
            source=source,
            agent=self.agent.id,
            sessionId=session_id,
            revision=revision,
            threadId=thread_id,
            offset=parsed.offset,
            lines=parsed.lines,
            lineStart=parsed.line_start,
            headSha=parsed.head_sha,
            size=planned.size,
            tailSha=parsed.tail_sha,
            mtimeNs=planned.mtime_ns,
            parser=self._redacted(parsed.state),
        )
        if writer is None:  # a new thread, whole: one write, one sync
            closing = self._closing(parsed.facts.title, parsed.facts, result, checkpoint)
            writer, added, refused = self._create(
                thread_id, revision, session_id, source, parsed.facts, parsed.items, closing
            )
            result.reason = refused or result.reason
            planned.writer = writer
            result.items += added
        elif result.status != "unchanged":
            # A rename (thread/setTitle) stands until the agent's own title changes: the
            # title is written again only when the source's differs from the last import's.
            told = self._told_title(start)
            kept = writer.summary.title if parsed.facts.title != told else parsed.facts.title
            closing = self._closing(kept, parsed.facts, result, checkpoint)
            result.add(self._append(writer, parsed.items, closing), keep=True)
            if self.database is not None and not result.items:
                result.status = "unchanged"  # read whole again: all of it was there
        writer.close()  # its listing row is written by the next `commit`
        self._checkpoints.append(checkpoint)
        result.summary = writer.summary
        result.children = children.close()
        if self._unstorable:
            left_out, self._unstorable = self._unstorable, []
            note = (
                f"{len(left_out)} item(s) nested deeper than a thread holds were left out "
                f"({', '.join(left_out[:5])})"
            )
            result.reason = f"{result.reason}; {note}" if result.reason else note
        return result

    def _told_title(self, start: SourceCheckpoint | None) -> str | None:
        """The title the source gave at its last import (its saved parser state); None
        when this import starts from scratch."""
        if start is None or not isinstance(start.parser.get("titles"), dict):
            return None
        return self.agent.parser(dict(start.parser)).title

    def _redacted(self, state: dict[str, Any]) -> dict[str, Any]:
        """The parser's state as the checkpoint keeps it (in the thread and the ledger):
        through the store's redactor like every record. It is made of redacted records,
        so this changes nothing unless a parser kept a part of one the walk did not see."""
        redactor = self._store.redactor
        if redactor is None:
            return state
        try:
            redacted: dict[str, Any] = redactor.value(state)
        except ProtocolError:  # too costly to look at: nothing of it is kept
            return {}
        return redacted

    def _own(self, items: list[Item], facts: Facts, children: _Children) -> list[Item]:
        """The items of the file's own session; its sub-agents' (`CHILD`) written to their
        own threads as they come, each under the parent's thread and the call that
        started it (the parser's `children`)."""
        if not any(CHILD in item for item in items):
            return items
        own: list[Item] = []
        theirs: dict[str, list[Item]] = {}
        for item in items:
            child = item.pop(CHILD, None)
            if isinstance(child, str):
                theirs.setdefault(child, []).append(item)
            else:
                own.append(item)
        for child, batch in theirs.items():
            self._write_child(children, child, batch, facts)
        return own

    def _write_child(
        self, children: _Children, child: str, items: list[Item], facts: Facts
    ) -> None:
        planned = children.planned
        if not SAFE_ID.fullmatch(child):
            self._unstorable += [str(item.get("id")) for item in items]
            return
        known = (facts.children or {}).get(child) or {}
        thread_id = thread_id_for(self.agent.id, child, planned.revision)
        result = children.results.get(child)
        writer = children.writers.get(child)
        if writer is None and self._store.exists(thread_id):
            try:
                writer = self._store.open_writer(thread_id, durable=False)
            except ProtocolError as exc:
                if exc.kind is not ErrorKind.THREAD_BUSY:
                    raise
                children.results[child] = FileResult(
                    planned.source, "busy", thread_id, reason=exc.message
                )
                return
            result = FileResult(planned.source, "updated", thread_id)
        if writer is None:
            title = known.get("title") if isinstance(known.get("title"), str) else None
            stamps = [i["ts"] for i in items if isinstance(i.get("ts"), str)]
            call = known.get("toolCallId")
            child_facts = Facts(
                facts.cwd,
                facts.branch,
                facts.commit,
                stamps[0] if stamps else facts.created,
                stamps[-1] if stamps else facts.last_ts,
                title,
                {
                    "sessionId": planned.session_id,
                    "toolCallId": call if isinstance(call, str) else None,
                },
            )
            writer, added, reason = self._create(
                thread_id, planned.revision, child, planned.source, child_facts, items
            )
            result = FileResult(planned.source, "created", thread_id, items=added, reason=reason)
        else:
            assert result is not None
            result.add(self._append(writer, items), keep=True)
        children.writers[child] = writer
        children.results[child] = result

    def _closing(
        self,
        title: str | None,
        facts: Facts,
        result: FileResult,
        checkpoint: SourceCheckpoint,
    ) -> list[Item]:
        """Bookkeeping after a file's items: a new title (the thread has `title`), then the
        checkpoint."""
        items: list[Item] = []
        stamp = {"ts": facts.last_ts} if facts.last_ts else {}
        if facts.title and facts.title != title:
            items.append(
                {
                    "type": "thread_title",
                    "id": f"title:{checkpoint.offset}",
                    "title": facts.title,
                    **stamp,
                }
            )
        marker = checkpoint.to_item()
        marker.update(
            skipped=result.skipped[:SKIPPED_KEPT],
            skippedCount=len(result.skipped),
            repairedLines=result.repaired,
            unmapped=result.unmapped,
            **stamp,
        )
        return [*items, marker]

    def _append(
        self,
        writer: Writer,
        items: list[Item],
        bookkeeping: list[Item] | None = None,
    ) -> list[Item]:
        """Append items (and bookkeeping) in one write; the items of `items` that were new."""
        bookkeeping = bookkeeping or []
        session_id = writer.summary.latestSessionId or _session_of(writer.thread_id)
        try:
            stored = writer.append(
                [*items, *bookkeeping], session_id, keep_ts=True, redacted=True
            ).stored
        except ProtocolError as exc:
            if exc.kind is not ErrorKind.INVALID_PARAMS:
                raise
            batch = [*self._storable(items), *bookkeeping]
            stored = writer.append(batch, session_id, keep_ts=True, redacted=True).stored
        marks = {item["id"] for item in bookkeeping}
        return [item for item in stored if item["id"] not in marks]

    def _create(
        self,
        thread_id: str,
        revision: int,
        session_id: str,
        source: str,
        facts: Facts,
        items: list[Item] | None = None,
        bookkeeping: list[Item] | None = None,
    ) -> tuple[Writer, int, str | None]:
        """The thread (with its first items), bound to where the session ran: its recorded
        cwd and branch (and commit, when the agent recorded one) over the repository as it
        is now. Returns the writer, how many of `items` were written, and why the recorded
        cwd was not used (it is checked as `thread/start` checks one: a relative cwd would
        be taken relative to wherever sessiond runs); the session is then bound to where
        its file says, as one that names no cwd is."""
        fallback = self.files.fallback_cwd(Path(source))
        refused = _refused_cwd(facts.cwd)
        cwd = fallback if facts.cwd is None or refused else facts.cwd
        note = f"{refused}: bound to {canonical(fallback)} instead" if refused else None
        environment = dict(self._environment(cwd))
        if facts.branch:
            if environment.get("branch") != facts.branch:
                environment["headSha"] = None  # the HEAD of that branch then is unknown
            environment["branch"] = facts.branch
        if facts.commit:
            environment["headSha"] = facts.commit
        origin = {
            "agent": self.agent.id,
            "sessionId": session_id,
            "path": source,
            "revision": revision,
        }
        link = self._parent_link(Path(source), session_id, facts.parent)
        if link is not None:
            origin.update(parentSessionId=link.session_id, parentToolCallId=link.tool_call_id)
        meta = {
            "type": "session_meta", "id": "meta", "ts": facts.created or facts.last_ts,
            "threadId": thread_id, "source": "startup", "reason": "import", "origin": origin,
            **{key: environment.get(key) for key in ENVIRONMENT_FIELDS},
            "title": facts.title, "client": {"name": self.agent.id},
            "parentThreadId": link.thread_id if link else None,
            "parentOperationId": link.tool_call_id if link else None,
        }  # fmt: skip
        forked = facts.fork.get("sessionId") if facts.fork else None
        if isinstance(forked, str) and SAFE_ID.fullmatch(forked):
            origin["forkedFromSessionId"] = forked
            meta["forkedFrom"] = {"threadId": self._newest_thread(forked), "seq": None}
        meta = {key: value for key, value in meta.items() if value is not None}
        items, bookkeeping = items or [], bookkeeping or []
        session = _session_of(thread_id)

        def create(stored: list[Item]) -> Writer:
            return self._store.create(
                thread_id,
                session,
                meta,
                items=[*stored, *bookkeeping],
                keep_ts=True,  # dated by the transcript
                redacted=True,  # its records were, as parse read them
                durable=False,  # by the batch's `commit`
            )

        try:
            try:
                writer = create(items)
            except ProtocolError as exc:
                if exc.kind is not ErrorKind.INVALID_PARAMS:
                    raise
                items = self._storable(items)
                writer = create(items)
        except ProtocolError as exc:  # another importer created it a moment ago
            if exc.kind is not ErrorKind.INVALID_ID:
                raise
            writer = self._store.open_writer(thread_id, durable=False)
            writer.loaded = None
            return writer, len(self._append(writer, items, bookkeeping)), note
        writer.loaded = None
        return writer, len(items), note

    def _storable(self, items: list[Item]) -> list[Item]:
        """The items a store can write, after a write refused one (nested past the
        encoder's limit): each one it cannot is left out and counted for the file's
        result. Checked only when a write failed: the per-line cost is nil."""
        kept = []
        for item in items:
            try:
                encode_line(item)
            except ProtocolError:
                self._unstorable.append(str(item.get("id")))
                continue
            kept.append(item)
        return kept

    def _parent_link(self, path: Path, session_id: str, parent: Item | None) -> ParentLink | None:
        """Where a sub-agent's thread belongs: the parent session's thread (its newest
        revision; revision 1's id when the parent is not imported yet, which is the id it
        will get) and the parent's tool call that started it, when known (the parser's,
        else a Claude Code 2.1 sub-agent's `.meta.json`, else found in the parent's
        transcript). The parent's session is the parser's, else the layout's (Gemini)."""
        if parent is None:
            return None
        session = parent.get("sessionId") or self.files.parent_session(path)
        if not isinstance(session, str) or not SAFE_ID.fullmatch(session):
            return None  # not a session id: no thread, no file is named after it
        thread_id = self._newest_thread(session)
        call = parent.get("toolCallId")
        if not isinstance(call, str):
            # Claude Code's sub-agent is named by its agentId, the others by their session.
            key = raw if isinstance(raw := parent.get("agentId"), str) else session_id
            call = (
                self._database_spawning_call(session, session_id)
                or self.files.spawning_call_beside(path)
                or self._spawning_call(path, session, key)
            )
        return ParentLink(session, thread_id, call if isinstance(call, str) else None)

    def _database_spawning_call(self, parent: str, child: str) -> str | None:
        snapshot = self._snapshot
        if self.database is None or snapshot is None or snapshot.db is None:
            return None
        return self.database.spawning_call(snapshot.db, parent, child)

    # --- a database store ----------------------------------------------------------------

    def _database_sessions(self) -> list[DatabaseSession]:
        """The sessions of a fresh copy of the database (none when there is none)."""
        assert self.database is not None
        if self._snapshot is None:
            self._snapshot = Snapshot(self.database.database(self.root))
        db = self._snapshot.refresh()
        return [] if db is None else self.database.sessions(db, self._snapshot.database)

    def import_session(
        self, session: DatabaseSession, known: SourceCheckpoint | None
    ) -> FileResult:
        """One session of a database store, read whole from the copy `scan` took (its
        rows are updated in place, so the read is the session as it is now); the items
        already in its thread are named as before and not written again."""
        source = session.source
        if not SAFE_ID.fullmatch(session.id):
            return FileResult(source, "unreadable", reason="its id is not a plain name; not read")
        thread_id = thread_id_for(self.agent.id, session.id, 1)
        exists = self._store.exists(thread_id)
        if exists and known is not None and _current(session, known):
            return FileResult(source, "unchanged", thread_id)
        writer = None
        if exists:
            try:
                writer = self._store.open_writer(thread_id, durable=False)
            except ProtocolError as exc:
                if exc.kind is not ErrorKind.THREAD_BUSY:
                    raise
                return FileResult(source, "busy", thread_id, reason=exc.message)
        start = (
            (known or from_start(source, self.agent.id, session.id, 1, thread_id))
            if (exists)
            else None
        )
        planned = Planned(
            source,
            session.changes,
            session.updated * 1_000_000,
            session.id,
            1,
            thread_id,
            start,
            writer,
            "updated" if exists else "created",
        )
        try:
            return self._read(planned, [self._parse_session(session)])
        finally:
            planned.close()

    def _parse_session(self, session: DatabaseSession) -> Parsed:
        assert self.database is not None and self._snapshot is not None
        db = self._snapshot.db
        assert db is not None, "scan took the copy"
        parser = self.agent.parser(None, _iso_ms(session.updated))
        redact = self._store.redactor
        items: list[Item] = []
        skipped: list[Item] = []
        records = 0
        for key, record in self.database.records(db, session):
            records += 1
            if redact is not None:
                record = redact.item(record)
            try:
                items += parser.feed(records, record, record.get("timestamp"), key=key)
            except (TypeError, ValueError, RecursionError):
                line = SkippedLine(records, 0, "mapping_failed", key[:80]).to_wire()
                skipped.append(line)
        return Parsed(
            items,
            Facts.of(parser),
            parser.state,
            records,
            skipped,
            0,
            records,
            records,
            0,
            EMPTY_SHA,
            EMPTY_SHA,
            parser.unmapped_seen,
        )

    def _newest_thread(self, session: str) -> str:
        """A session's newest revision's thread (revision 1's id when it is not imported
        yet: the id it will get)."""
        thread_id = thread_id_for(self.agent.id, session, 1)
        for revision in itertools.count(2):
            newer = thread_id_for(self.agent.id, session, revision)
            if not self._store.exists(newer):
                break
            thread_id = newer
        return thread_id

    def _spawning_call(self, path: Path, session: str, key: str) -> str | None:
        """The tool call of the parent's transcript that started the sub-agent `key`. One
        pass over each parent file per run for all its sub-agents (again once it grew)."""
        try:
            candidates = self.files.parent_files(self.root, path, session)
        except OSError:
            return None
        for parent_path in candidates:
            try:
                stat = parent_path.lstat()
            except OSError:
                continue
            if not S_ISREG(stat.st_mode):
                continue  # a link, a FIFO: never opened
            seen = (stat.st_size, stat.st_mtime_ns)
            cached = self._spawns.get(parent_path)
            if cached is None or cached[0] != seen:
                found = spawns_in(parent_path, self.agent.parser)
                cached = self._spawns[parent_path] = (seen, found)
            if key in cached[1]:
                return cached[1][key]
        return None

    def _environment(self, cwd: str) -> Item:
        """The repository at `cwd` as it is now, probed once per directory per run."""
        if cwd not in self._environments:
            self._environments[cwd] = probe(cwd)
        return self._environments[cwd]


class _Children:
    """The sub-agent threads one file's read writes (their events in the parent's file)."""

    def __init__(self, planned: Planned) -> None:
        self.planned = planned
        self.writers: dict[str, Writer] = {}
        self.results: dict[str, FileResult] = {}

    def close(self) -> list[FileResult]:
        for child, writer in self.writers.items():
            writer.close()
            self.results[child].summary = writer.summary
        return list(self.results.values())


@dataclass(frozen=True)
class ParentLink:
    """A sub-agent thread's place: the parent session (as its agent names it), the
    parent's thread, and the tool call that started the sub-agent (None: not recorded)."""

    session_id: str
    thread_id: str
    tool_call_id: str | None


def _current(session: DatabaseSession, known: SourceCheckpoint) -> bool:
    """The ledger's row is of the session as it is (it has not changed since): its change
    counter (kept as the checkpoint's `size`) and its row's `time_updated` (`mtimeNs`)."""
    return (known.size, known.mtimeNs) == (session.changes, session.updated * 1_000_000)


def _iso_ms(ms: int) -> str:
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return moment.isoformat(timespec="microseconds")[:-6] + "Z"


def _refused_cwd(cwd: str | None) -> str | None:
    """Why a transcript's cwd cannot be a thread's (None: it can)."""
    if cwd is None:
        return None
    if "\0" in cwd:
        return f"its cwd {cwd!r} contains NUL"
    if not os.path.isabs(cwd):
        return f"its cwd {cwd!r} is not an absolute path"
    return None


def _session_of(thread_id: str) -> str:
    """The sessiond session an imported thread's items are written under."""
    return str(uuid.uuid5(uuid.UUID(thread_id), "import"))
