"""Claude Code, Codex and Gemini CLI sessions as sessiond threads: imported once, then as
they grow.

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
are read within their own budget (restore/import_parse.py). Either way the rest of the run
goes on.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import re
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from glob import escape as glob_escape
from pathlib import Path
from stat import S_ISDIR, S_ISLNK, S_ISREG
from typing import TYPE_CHECKING, Any

import orjson

from protocol.errors import ErrorKind, ProtocolError
from restore.atomic import sync_filesystem
from restore.environment import ENVIRONMENT_FIELDS, canonical, probe
from restore.import_ledger import ImportLedger, SourceCheckpoint
from restore.import_parse import (
    HEAD_BYTES,
    LINE_BYTES,
    Facts,
    Flush,
    Parsed,
    ParseStart,
    open_source,
    parse,
    range_sha,
    sha,
)
from restore.jsonl import LineMark, encode_line, parse_bytes
from restore.sources import claude_code, codex, gemini
from restore.sources.common import SourceParser
from restore.sources.handoff import SAFE_ID, thread_id_for
from restore.store import Durability, ThreadStore, ThreadWriter, read_thread_file
from restore.summary import ThreadSummary
from restore.threads import ThreadService

if TYPE_CHECKING:
    from restore.import_pool import ParsePool, Ticket

Progress = Callable[[int, int], None]
CHUNK = 50  # files per batch of a long import: one index transaction, one progress report
SKIPPED_KEPT = 100  # skipped lines listed per checkpoint (all are counted)
EMPTY_SHA = sha(b"")
# Worker processes (restore/import_pool.py) for a batch import with this much to read:
# below it, forking them costs more than they save (measured in docs/benchmarks.md).
PARALLEL_FROM = 1 << 20
WINDOW_FILES = 8  # files planned ahead per worker
WINDOW_BYTES = 64 << 20  # source bytes being parsed ahead, at most (memory stays bounded)
WORKER_FILE_BYTES = 16 << 20  # a bigger file is streamed here, in batches, as always
FILE_BYTES = 1 << 30
"""The largest source file imported (a long real session is tens of MB): a bigger one, a
sparse 2 GB file say, is reported `too-large` and not read."""


# --- the agents' stores ----------------------------------------------------------------


@dataclass(frozen=True)
class SourceKind:
    """One agent's session store: where it is, which files are sessions, how to parse them."""

    name: str
    agent: str
    parser: type[SourceParser]
    skip_itemless: bool = False
    """A file whose records give no item is not a session (yet): Gemini CLI writes its
    metadata and primed context before the first prompt, and leaves such a file beside
    the session a headless `--resume` continues; it lists neither."""

    def default_root(self) -> Path:
        """`$CLAUDE_CONFIG_DIR/projects` else `~/.claude/projects`; `$CODEX_HOME/sessions`
        else `~/.codex/sessions`; `$GEMINI_CLI_HOME/.gemini/tmp` else `~/.gemini/tmp`
        (Gemini CLI's `homedir()` is `$GEMINI_CLI_HOME` when set)."""
        if self.agent == claude_code.AGENT:
            base = os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude"
            return Path(base) / "projects"
        if self.agent == gemini.AGENT:
            return Path(os.environ.get("GEMINI_CLI_HOME") or Path.home()) / ".gemini" / "tmp"
        return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex") / "sessions"

    def is_session_file(self, root: Path, path: Path) -> bool:
        """Claude Code: `<root>/<encoded-cwd>/<id>.jsonl`, and sub-agents' transcripts
        (`<root>/<encoded-cwd>/<id>/subagents/agent-<agentId>.jsonl`; ≤ 2.0 `agent-*.jsonl`
        beside the sessions), which become child threads; Codex: `rollout-*.jsonl`
        anywhere under the root; Gemini CLI: `<root>/<project>/chats/session-*.jsonl`, or
        `.json` (up to 0.38), and sub-agents' sessions, `chats/<parent id>/<id>.jsonl`,
        which become child threads."""
        if self.agent == gemini.AGENT:
            if _gemini_subagent(root, path):
                return True
            named = path.name.startswith("session-") and path.suffix in (".jsonl", ".json")
            return named and path.parent.name == "chats" and path.parent.parent.parent == root
        if path.suffix != ".jsonl":
            return False
        if self.agent == claude_code.AGENT:
            if path.name.startswith("agent-acompact"):
                return False  # Claude Code's own compaction run: the conversation again
            return path.parent.parent == root or _project_of(path).parent == root
        return path.name.startswith("rollout-") and root in path.parents

    def could_hold_sessions(self, root: Path, directory: Path) -> bool:
        """Claude Code: a project folder (directly under the root); Codex and Gemini CLI
        (`<project>/chats/`): any folder."""
        return directory.parent == root if self.agent == claude_code.AGENT else True

    def session_files(self, root: Path) -> list[Path]:
        """Every session file under the root, and every link where one could be (a link
        to a file, or to a folder, which `os.walk` does not enter): the importer reports
        those (`symlink`) instead of reading them."""
        found = []
        for directory, folders, names in os.walk(root):
            for name in folders:
                path = Path(directory, name)
                if path.is_symlink() and self.could_hold_sessions(root, path):
                    found.append(path)
            for name in names:
                path = Path(directory, name)
                if self.is_session_file(root, path):
                    found.append(path)
        return sorted(found)

    def session_id(self, path: Path) -> str | None:
        """The id the agent resumes by: Claude Code's file name, Codex's trailing uuid,
        Gemini CLI's `sessionId` from the file's first line (its name has only 8
        characters of it); None while that line is not written whole."""
        stem = path.stem
        if self.agent == gemini.AGENT:
            return _gemini_session_id(path)
        if self.agent == codex.AGENT and len(stem) > 36:
            try:
                return str(uuid.UUID(stem[-36:]))
            except ValueError:
                pass
        return stem

    def fallback_cwd(self, path: Path) -> str:
        """Where a session ran when none of its lines says: Claude Code's folder name
        decoded (lossy: it spells `/` and `.` as `-`); Gemini CLI's project root as its
        store records it; else the file's folder."""
        folder = _project_of(path)
        if self.agent == claude_code.AGENT and folder.name.startswith("-"):
            return folder.name.replace("-", "/")
        if self.agent == gemini.AGENT:
            chats = path.parent.parent if path.parent.name != "chats" else path.parent
            return _gemini_project_root(chats.parent) or str(path.parent)
        return str(path.parent)

    def parent_session(self, path: Path) -> str | None:
        """The parent's session id where only the layout says it: a Gemini CLI sub-agent's
        folder, `chats/<parent sessionId>/`."""
        if self.agent == gemini.AGENT and path.parent.parent.name == "chats":
            return path.parent.name
        return None

    def parent_files(self, root: Path, path: Path, session: str) -> list[Path]:
        """Where the transcript of the parent session `session` (a plain name) of the
        sub-agent at `path` can be: Claude Code's `<id>.jsonl` beside the sub-agent (≤ 2.0)
        or above its `subagents/`; Codex's `rollout-*-<id>.jsonl`, beside the child (the
        same day's folder) else anywhere under the root; Gemini CLI's session files in the
        `chats/` above, named by the id's first 8 characters, whose first line has it."""
        if self.agent == claude_code.AGENT:
            return [_project_of(path) / f"{session}.jsonl"]
        if self.agent == codex.AGENT:
            name = re.compile(rf"rollout-.*-{re.escape(session)}\.jsonl")
            beside = [p for p in path.parent.iterdir() if name.fullmatch(p.name)]
            if beside or root not in path.parents:
                return sorted(beside)
            return sorted(
                Path(folder, file)
                for folder, _, files in os.walk(root)  # links to folders are not entered
                for file in files
                if name.fullmatch(file)
            )
        chats = path.parent.parent
        found = chats.glob(f"session-*-{glob_escape(session[:8])}.jsonl")
        return sorted(p for p in found if _gemini_session_id(p) == session)


SOURCES = {
    "claude": SourceKind("claude", claude_code.AGENT, claude_code.ClaudeCodeParser),
    "codex": SourceKind("codex", codex.AGENT, codex.CodexParser),
    "gemini": SourceKind("gemini", gemini.AGENT, gemini.GeminiParser, skip_itemless=True),
}
_GEMINI_SESSION_ID = re.compile(rb'"sessionId"\s*:\s*"([A-Za-z0-9][A-Za-z0-9._-]{0,127})"')
GEMINI_REGISTRY_BYTES = 4 << 20  # projects.json: one line per project Gemini CLI has seen


def _gemini_subagent(root: Path, path: Path) -> bool:
    """`<root>/<project>/chats/<parent sessionId>/<its sessionId>.jsonl`: a sub-agent's
    session (Gemini CLI's invoke_agent)."""
    return (path.suffix == ".jsonl" and path.parent.parent.name == "chats"
            and len(path.parents) > 3 and path.parents[3] == root)  # fmt: skip


def _gemini_session_id(path: Path) -> str | None:
    """`sessionId` of a Gemini session file: its first line's (JSONL), or near the top of
    the document (`.json`, where JSON.stringify puts it first)."""
    try:
        with open_source(str(path)) as handle:  # a link is not read, not even for its id
            head = handle.read(HEAD_BYTES)
    except OSError:
        return None
    if path.suffix == ".jsonl":
        line, newline, _ = head.partition(b"\n")
        if not newline:
            return None
        head = line
    found = _GEMINI_SESSION_ID.search(head)
    return found.group(1).decode() if found else None


def _gemini_project_root(project: Path) -> str | None:
    """The directory a Gemini CLI project folder (`tmp/<slug>`) is for: its `.project_root`
    marker, else `projects.json` (path → slug). A folder named by the path's sha256 (before
    February 2026, and migrated by any later run in that project) says nothing."""
    with contextlib.suppress(OSError, UnicodeDecodeError):
        with open_source(str(project / ".project_root")) as handle:  # never through a link
            marked = handle.read(HEAD_BYTES).decode("utf-8").strip()
        if marked.startswith("/") or (len(marked) > 2 and marked[1] == ":"):
            return marked
    try:
        with open_source(str(project.parent.parent / "projects.json")) as handle:
            registry = orjson.loads(handle.read(GEMINI_REGISTRY_BYTES))
    except (OSError, orjson.JSONDecodeError):
        return None
    projects = registry.get("projects") if isinstance(registry, dict) else None
    for root, slug in projects.items() if isinstance(projects, dict) else []:
        if slug == project.name:
            return root
    return None


def _iso(seconds: float) -> str:
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.isoformat(timespec="microseconds")[:-6] + "Z"


# --- results ---------------------------------------------------------------------------


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
        self.sessions += 1
        counter = {"revision": "revisions"}.get(result.status, result.status)
        if hasattr(self, counter) and counter not in ("items", "sessions"):
            setattr(self, counter, getattr(self, counter) + 1)
        self.items += result.items
        self.skippedLines += len(result.skipped)
        self.repairedLines += result.repaired
        merge_unmapped(self.unmapped, result.path, result.unmapped)
        if result.reason or result.skipped or result.repaired:
            self.problems.append({
                "path": result.path, "status": result.status, "reason": result.reason,
                "skipped": result.skipped, "repaired": result.repaired,
            })  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def merge_unmapped(into: dict[str, dict[str, Any]], path: str, found: dict[str, list[int]]) -> None:
    """Add one file's unmapped counts; the first file seen gives the example."""
    for key, (count, line) in found.items():
        entry = into.setdefault(key, {"count": 0, "example": f"{path}:{line}"})
        entry["count"] += count


@dataclass
class _Planned:
    """A source file to read, as planned: where from, into which thread (its writer open
    when it exists), and the status if anything is written."""

    path: Path
    stat: os.stat_result
    session_id: str
    revision: int
    thread_id: str
    start: SourceCheckpoint | None
    writer: ThreadWriter | None
    status: str

    def close(self) -> None:
        if self.writer is not None and not self.writer.closed:
            self.writer.close()


@dataclass
class _Ahead:
    """A file planned ahead of its turn: its result, its plan (and parse, in a worker),
    or the error planning it raised (raised in turn)."""

    result: FileResult | None = None
    planned: _Planned | None = None
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
        kind: SourceKind,
        root: Path | None = None,
        *,
        live: bool = False,
        on_write: Callable[[ThreadWriter], None] | None = None,
        parallel_from: int | None = PARALLEL_FROM,
    ) -> None:
        """`on_write` hears of every thread written (default: the service notes its size,
        so the watcher does not report this process's own writes as another's).
        `parallel_from`: how many source bytes a batch import must have to read before
        it parses them in worker processes (None: never)."""
        self.service = service
        self.kind = kind
        self.root = (root or kind.default_root()).expanduser().absolute()
        self.live = live
        self.parallel_from = parallel_from
        self.parsed_by_workers = 0
        """Files the last `import_all` had parsed by worker processes."""
        self.ledger = ImportLedger(service.layout.import_ledger_path)
        self._on_write = on_write or service.note_written
        self._environments: dict[str, dict[str, Any]] = {}
        self._spawns: dict[Path, tuple[tuple[int, int], dict[str, str]]] = {}
        """Parent transcript → (its size and mtime when read, sub-agent key → call)."""
        self._rows: list[tuple[ThreadSummary, Path, LineMark | None]] = []
        self._checkpoints: list[SourceCheckpoint] = []
        self._unstorable: list[str] = []  # ids of the file being read the store refused
        # Writes go to the OS only; `commit` syncs the batch (see there).
        self._store = ThreadStore(service.layout, Durability.NONE)

    def import_all(self, progress: Progress | None = None) -> ImportSummary:
        """Every session under the root; unchanged ones cost a stat and no read. A batch
        of CHUNK files is committed at a time; with much to read, worker processes parse
        files ahead while this process writes them in order (see `_in_order`)."""
        began = time.perf_counter()
        summary = ImportSummary(self.kind.agent, str(self.root))
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

    def scan(self) -> list[tuple[Path, SourceCheckpoint | None]]:
        """Every session file under the root, with its ledger row (one query for all)."""
        files = self.kind.session_files(self.root) if self.root.is_dir() else []
        known = self.ledger.all(self.kind.agent)
        return [(path, known.get(str(path))) for path in files]

    def import_files(self, sources: list[tuple[Path, SourceCheckpoint | None]]) -> list[FileResult]:
        """Import a batch of `scan`'s files, then write their listing rows."""
        results = [self.import_file(path, known, looked_up=True) for path, known in sources]
        self.commit()
        return results

    def commit(self) -> None:
        """Make what was imported since the last commit durable, then record it.

        Threads are written without a sync per file; one filesystem sync covers the batch,
        and only then are the ledger rows written (a checkpoint never gets ahead of the
        thread it describes) and the listing rows (other processes see the threads)."""
        if self._checkpoints:
            sync_filesystem(self.service.layout.home)
            checkpoints, self._checkpoints = self._checkpoints, []
            self.ledger.put_many(checkpoints)
        if self._rows:
            rows, self._rows = self._rows, []
            self.service.index.upsert_many(rows)

    def close(self) -> None:
        self.commit()
        self.ledger.close()

    def import_file(
        self, path: Path, known: SourceCheckpoint | None = None, *, looked_up: bool = False
    ) -> FileResult:
        """Import what is new in one source file (`known`: its ledger row, if `looked_up`)."""
        planned = self._prepare(path, known, looked_up=looked_up)
        if isinstance(planned, FileResult):
            return planned
        try:
            return self._read_or_report(planned, parse(self._parse_start(planned)))
        finally:
            planned.close()

    def _read_or_report(self, planned: _Planned, events: Iterable[Flush | Parsed]) -> FileResult:
        """`_read`, or, when the file cannot be read (it became a link, a FIFO, or went
        since it was planned), a result saying why: the rest of the run goes on. What was
        written before the failure stays, without a checkpoint: the next import reads it
        again, and the item ids keep it from being doubled."""
        try:
            return self._read(planned, events)
        except OSError as exc:
            return _unreadable(planned, exc)

    # --- in worker processes -------------------------------------------------------------

    def _pool_for(self, sources: list[tuple[Path, SourceCheckpoint | None]]) -> ParsePool | None:
        """Worker processes, when this import has at least `parallel_from` bytes to read
        (new files, and what changed files grew by: a stat each until that many are
        found); below that, starting them costs more than they save."""
        if self.parallel_from is None or len(sources) < 2:
            return None
        from restore import import_pool

        if not import_pool.available():
            return None
        to_read = 0
        for path, known in sources:
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
        self, sources: list[tuple[Path, SourceCheckpoint | None]], pool: ParsePool | None
    ) -> Iterator[FileResult]:
        """Each file's result, imported in order. Without a pool, one file after the other;
        with one, files are planned ahead and parsed by its workers meanwhile (a bounded
        window: WINDOW_FILES per worker, at most WINDOW_BYTES of source in flight; a file
        over WORKER_FILE_BYTES is parsed here, streamed, as without a pool). Planning
        ahead changes nothing: a file's plan depends only on its own session's threads,
        and a file whose session is already planned waits until that one is written. A
        worker that dies (killed) leaves its files to this process."""
        self.parsed_by_workers = 0
        if pool is None:
            for path, known in sources:
                yield self.import_file(path, known, looked_up=True)
            return
        window = WINDOW_FILES * pool.workers
        queue: deque[_Ahead] = deque()
        sessions: Counter[str] = Counter()  # planned and not yet written
        position = in_flight = 0
        try:
            while True:
                while position < len(sources) and len(queue) < window and in_flight < WINDOW_BYTES:
                    path, known = sources[position]
                    # The ledger knows the session of a file it has seen (no read for it).
                    session_id = (known.sessionId if known is not None else
                                  self.kind.session_id(path)) or str(path)  # fmt: skip
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
                    events = ahead.parsed(pool)
                    if events is not None:
                        self.parsed_by_workers += 1
                    else:
                        events = parse(self._parse_start(planned))
                    result = self._read_or_report(planned, events)
                except OSError as exc:  # the worker's parse failed as reading would
                    result = _unreadable(planned, exc)
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
            planned = self._prepare(path, known, looked_up=True)
        except Exception as exc:  # raised when its turn comes, as without planning ahead
            return _Ahead(error=exc)
        if isinstance(planned, FileResult):
            return _Ahead(result=planned)
        size = planned.stat.st_size - (planned.start.offset if planned.start else 0)
        if size > WORKER_FILE_BYTES:
            return _Ahead(planned=planned)
        return _Ahead(planned=planned, ticket=pool.submit(self._parse_start(planned)), bytes=size)

    # --- before reading --------------------------------------------------------------------

    def _prepare(
        self, path: Path, known: SourceCheckpoint | None, *, looked_up: bool
    ) -> FileResult | _Planned:
        """What to read of one source file and where to write it (the thread's writer is
        open when it exists), or the result when there is nothing to read."""
        source = str(path)
        try:
            link = self._link_on_the_way(path)
            stat = os.lstat(path)
        except FileNotFoundError:
            return FileResult(source, "missing", reason="the file is gone")
        if link is not None or S_ISLNK(stat.st_mode):
            where = "" if link is None else f" ({link} is one)"
            why = f"a symbolic link{where}: not followed, nothing behind it read"
            return FileResult(source, "symlink", reason=why)
        if not S_ISREG(stat.st_mode):  # a FIFO would block the import (and the watcher) forever
            return FileResult(source, "not-a-file", reason="not a regular file; not read")
        entry = known if looked_up else self.ledger.get(source)
        if entry is not None and (entry.size, entry.mtimeNs) == (stat.st_size, stat.st_mtime_ns):
            return FileResult(source, "unchanged", entry.threadId)
        if stat.st_size == 0:
            return FileResult(source, "empty", reason="empty file")
        if stat.st_size > FILE_BYTES:
            size, limit = stat.st_size / (1 << 30), FILE_BYTES >> 30
            why = f"{size:.1f} GiB, over the {limit} GiB a session file may be; not read"
            return FileResult(source, "too-large", reason=why)
        session_id = self.kind.session_id(path)
        if session_id is None:
            return FileResult(source, "empty", reason="no session id (a plain name) in it yet")
        free = 1
        if entry is None:
            entry, free = self._recover(session_id, source)
        start, revision, status = self._plan(path, stat, session_id, entry, free)
        thread_id = thread_id_for(self.kind.agent, session_id, revision)
        writer = None
        if start is not None:
            try:
                writer = self._store.open_writer(thread_id)
            except ProtocolError as exc:
                if exc.kind is not ErrorKind.THREAD_BUSY:
                    raise
                return FileResult(source, "busy", thread_id, reason=exc.message)
        return _Planned(path, stat, session_id, revision, thread_id, start, writer, status)

    def _link_on_the_way(self, path: Path) -> Path | None:
        """The first folder between the root and `path` that is a link (a watcher may
        report a file through one), else None. The root itself is the user's choice."""
        if self.root not in path.parents:
            return None
        for folder in reversed(path.parents[: path.parents.index(self.root)]):
            mode = os.lstat(folder).st_mode
            if S_ISLNK(mode):
                return folder
            if not S_ISDIR(mode):
                return None  # then the file is not there: lstat says so
        return None

    def _parse_start(self, planned: _Planned) -> ParseStart:
        start = planned.start
        return ParseStart(
            path=str(planned.path), parser=self.kind.parser,
            offset=start.offset if start else 0, lines=start.lines if start else 0,
            line_start=start.lineStart if start else 0,
            tail_sha=start.tailSha if start else EMPTY_SHA,
            state=start.parser if start and start.parser else None,
            fallback_ts=_iso(planned.stat.st_mtime), writing=planned.writer is not None,
        )  # fmt: skip

    # --- planning ------------------------------------------------------------------------

    def _plan(
        self,
        path: Path,
        stat: os.stat_result,
        session_id: str,
        entry: SourceCheckpoint | None,
        free: int = 1,
    ) -> tuple[SourceCheckpoint | None, int, str]:
        """Where to start: (checkpoint to continue from, revision, status if written).
        Without an entry, `_recover` found none and `free`, the first free revision."""
        if entry is None:
            return None, free, "created"
        if self.service.layout.locate(entry.threadId) is None:
            return None, entry.revision, "created"  # deleted by the user: back in full
        if self._appended(path, stat, entry):
            return entry, entry.revision, "updated"
        return None, self._free_revision(session_id, entry.revision + 1), "revision"

    def _appended(self, path: Path, stat: os.stat_result, entry: SourceCheckpoint) -> bool:
        """The file still starts with what was read: only appended to since."""
        if stat.st_size < entry.offset:
            return False
        with open_source(str(path)) as handle:
            if sha(handle.read(min(entry.offset, HEAD_BYTES))) != entry.headSha:
                return False
            return range_sha(handle, entry.lineStart, entry.offset) == entry.tailSha

    def _free_revision(self, session_id: str, first: int) -> int:
        for revision in itertools.count(first):
            thread_id = thread_id_for(self.kind.agent, session_id, revision)
            if self.service.layout.locate(thread_id) is None:
                return revision
        raise AssertionError("unreachable")

    def _recover(self, session_id: str, source: str) -> tuple[SourceCheckpoint | None, int]:
        """The latest checkpoint of this file in its threads (the ledger lost it), and the
        session's first revision without a thread. A thread of this file without one (cut
        before its first checkpoint was written) is read into again from the start: the
        item ids keep what it has from being doubled."""
        found = None
        for revision in itertools.count(1):
            thread_id = thread_id_for(self.kind.agent, session_id, revision)
            located = self.service.layout.locate(thread_id)
            if located is None:
                return found, revision
            items = parse_bytes(read_thread_file(located[0], thread_id)).items
            origin = items[0].get("origin") if items else None
            if not isinstance(origin, dict) or origin.get("path") != source:
                continue
            found = _from_start(source, self.kind.agent, session_id, revision, thread_id)
            for item in items:
                if item.get("type") == "import_checkpoint" and item.get("source") == source:
                    found = SourceCheckpoint.from_item(item) or found
        raise AssertionError("unreachable")

    # --- reading and writing ---------------------------------------------------------------

    def _read(self, planned: _Planned, events: Iterable[Flush | Parsed]) -> FileResult:
        """Write what the parse of one file gives (as it gives it), then its checkpoint."""
        source, start, writer = str(planned.path), planned.start, planned.writer
        self._unstorable = []
        revision, session_id, thread_id = planned.revision, planned.session_id, planned.thread_id
        result = FileResult(source, planned.status, thread_id)
        parsed = None
        for event in events:
            if isinstance(event, Parsed):
                parsed = event
                break
            if writer is None:
                writer, added, result.reason = self._create(
                    thread_id, revision, session_id, source, event.facts
                )
                planned.writer = writer
                result.items += added
            result.add(self._append(writer, event.items), keep=start is not None)
        assert parsed is not None, "a parse ends with its Parsed"
        result.skipped, result.repaired = parsed.skipped, parsed.repaired
        result.unmapped = parsed.unmapped
        if writer is None and parsed.records == 0 and not result.skipped:
            return FileResult(source, "empty", reason="no records, only blank lines")
        if writer is None and not parsed.items and self.kind.skip_itemless:
            return FileResult(source, "empty", reason="no conversation yet",
                              skipped=result.skipped, unmapped=result.unmapped)  # fmt: skip
        if writer is None and parsed.facts.cwd is None and self.live:
            return FileResult(source, "deferred", reason="no line says where it runs yet")
        read_nothing = parsed.offset == (start.offset if start else 0) and not parsed.items
        if writer is not None and read_nothing:
            result.status = "unchanged"  # touched, or only a torn tail: nothing to add
        stat = planned.stat
        checkpoint = SourceCheckpoint(
            source=source, agent=self.kind.agent, sessionId=session_id, revision=revision,
            threadId=thread_id, offset=parsed.offset, lines=parsed.lines,
            lineStart=parsed.line_start, headSha=parsed.head_sha, size=stat.st_size,
            tailSha=parsed.tail_sha, mtimeNs=stat.st_mtime_ns, parser=parsed.state,
        )  # fmt: skip
        if writer is None:  # a new thread, whole: one write, one sync
            closing = self._closing(parsed.facts.title, parsed.facts, result, checkpoint)
            writer, added, result.reason = self._create(
                thread_id, revision, session_id, source, parsed.facts, parsed.items, closing
            )
            planned.writer = writer
            result.items += added
        elif result.status != "unchanged":
            closing = self._closing(writer.summary.title, parsed.facts, result, checkpoint)
            result.add(self._append(writer, parsed.items, closing), keep=True)
        mark = writer.mark()  # the row's last line, so the index reads only what follows
        writer.close()
        self._checkpoints.append(checkpoint)
        result.summary = writer.summary
        self._rows.append((writer.summary, writer.path, mark))
        if self._unstorable:
            left_out, self._unstorable = self._unstorable, []
            note = (f"{len(left_out)} item(s) nested deeper than a thread holds were left out "
                    f"({', '.join(left_out[:5])})")  # fmt: skip
            result.reason = f"{result.reason}; {note}" if result.reason else note
        return result

    def _closing(
        self,
        title: str | None,
        facts: Facts,
        result: FileResult,
        checkpoint: SourceCheckpoint,
    ) -> list[dict[str, Any]]:
        """Bookkeeping after a file's items: a new title (the thread has `title`), then the
        checkpoint."""
        items: list[dict[str, Any]] = []
        stamp = {"ts": facts.last_ts} if facts.last_ts else {}
        if facts.title and facts.title != title:
            items.append({"type": "thread_title", "id": f"title:{checkpoint.offset}",
                          "title": facts.title, **stamp})  # fmt: skip
        marker = checkpoint.to_item()
        marker.update(skipped=result.skipped[:SKIPPED_KEPT], skippedCount=len(result.skipped),
                      repairedLines=result.repaired, unmapped=result.unmapped,
                      **stamp)  # fmt: skip
        return [*items, marker]

    def _append(
        self,
        writer: ThreadWriter,
        items: list[dict[str, Any]],
        bookkeeping: list[dict[str, Any]] | None = None,
    ) -> list[dict[str, Any]]:
        """Append items (and bookkeeping) in one write; the items of `items` that were new."""
        bookkeeping = bookkeeping or []
        session_id = writer.summary.latestSessionId or _session_of(writer.thread_id)
        try:
            stored = writer.append([*items, *bookkeeping], session_id, keep_ts=True).stored
        except ProtocolError as exc:
            if exc.kind is not ErrorKind.INVALID_PARAMS:
                raise
            batch = [*self._storable(items), *bookkeeping]
            stored = writer.append(batch, session_id, keep_ts=True).stored
        if stored:
            self._on_write(writer)
        marks = {item["id"] for item in bookkeeping}
        return [item for item in stored if item["id"] not in marks]

    def _create(
        self,
        thread_id: str,
        revision: int,
        session_id: str,
        source: str,
        facts: Facts,
        items: list[dict[str, Any]] | None = None,
        bookkeeping: list[dict[str, Any]] | None = None,
    ) -> tuple[ThreadWriter, int, str | None]:
        """The thread (with its first items), bound to where the session ran: its recorded
        cwd and branch (and commit, when the agent recorded one) over the repository as it
        is now. Returns the writer, how many of `items` were written, and why the recorded
        cwd was not used (it is checked as `thread/start` checks one: a relative cwd would
        be taken relative to wherever sessiond runs); the session is then bound to where
        its file says, as one that names no cwd is."""
        fallback = self.kind.fallback_cwd(Path(source))
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
        origin = {"agent": self.kind.agent, "sessionId": session_id, "path": source,
                  "revision": revision}  # fmt: skip
        link = self._parent_link(Path(source), session_id, facts.parent)
        if link is not None:
            origin.update(parentSessionId=link.session_id, parentToolCallId=link.tool_call_id)
        meta = {
            "type": "session_meta", "id": "meta", "ts": facts.created or facts.last_ts,
            "threadId": thread_id, "source": "startup", "reason": "import", "origin": origin,
            **{key: environment.get(key) for key in ENVIRONMENT_FIELDS},
            "title": facts.title, "client": {"name": self.kind.agent},
            "parentThreadId": link.thread_id if link else None,
            "parentOperationId": link.tool_call_id if link else None,
        }  # fmt: skip
        meta = {key: value for key, value in meta.items() if value is not None}
        items, bookkeeping = items or [], bookkeeping or []
        session = _session_of(thread_id)
        try:
            try:
                writer = self._store.create(
                    thread_id, session, meta, keep_ts=True, items=[*items, *bookkeeping]
                )
            except ProtocolError as exc:
                if exc.kind is not ErrorKind.INVALID_PARAMS:
                    raise
                items = self._storable(items)
                writer = self._store.create(
                    thread_id, session, meta, keep_ts=True, items=[*items, *bookkeeping]
                )
        except ProtocolError as exc:  # another importer created it a moment ago
            if exc.kind is not ErrorKind.INVALID_ID:
                raise
            writer = self._store.open_writer(thread_id)
            writer.loaded = None
            return writer, len(self._append(writer, items, bookkeeping)), note
        writer.loaded = None
        self._on_write(writer)
        return writer, len(items), note

    def _storable(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
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

    def _parent_link(
        self, path: Path, session_id: str, parent: dict[str, Any] | None
    ) -> ParentLink | None:
        """Where a sub-agent's thread belongs: the parent session's thread (its newest
        revision; revision 1's id when the parent is not imported yet, which is the id it
        will get) and the parent's tool call that started it, when known (the parser's,
        else a Claude Code 2.1 sub-agent's `.meta.json`, else found in the parent's
        transcript). The parent's session is the parser's, else the layout's (Gemini)."""
        if parent is None:
            return None
        session = parent.get("sessionId") or self.kind.parent_session(path)
        if not isinstance(session, str) or not SAFE_ID.fullmatch(session):
            return None  # not a session id: no thread, no file is named after it
        thread_id = thread_id_for(self.kind.agent, session, 1)
        for revision in itertools.count(2):
            newer = thread_id_for(self.kind.agent, session, revision)
            if self.service.layout.locate(newer) is None:
                break
            thread_id = newer
        call = parent.get("toolCallId")
        if not isinstance(call, str):
            # Claude Code's sub-agent is named by its agentId, the others by their session.
            key = parent.get("agentId") if isinstance(parent.get("agentId"), str) else session_id
            call = (_sidecar_call(path) if self.kind.agent == claude_code.AGENT else None) or (
                self._spawning_call(path, session, key)
            )
        return ParentLink(session, thread_id, call if isinstance(call, str) else None)

    def _spawning_call(self, path: Path, session: str, key: str) -> str | None:
        """The tool call of the parent's transcript that started the sub-agent `key`. One
        pass over each parent file per run for all its sub-agents (again once it grew)."""
        try:
            candidates = self.kind.parent_files(self.root, path, session)
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
                cached = self._spawns[parent_path] = (seen, _spawns_in(parent_path, self.kind))
            if key in cached[1]:
                return cached[1][key]
        return None

    def _environment(self, cwd: str) -> dict[str, Any]:
        """The repository at `cwd` as it is now, probed once per directory per run."""
        if cwd not in self._environments:
            self._environments[cwd] = probe(cwd)
        return self._environments[cwd]


@dataclass(frozen=True)
class ParentLink:
    """A sub-agent thread's place: the parent session (as its agent names it), the
    parent's thread, and the tool call that started the sub-agent (None: not recorded)."""

    session_id: str
    thread_id: str
    tool_call_id: str | None


SIDECAR_BYTES = 64 << 10


def _project_of(path: Path) -> Path:
    """The Claude Code project folder a transcript is in: its own folder, or for a 2.1
    sub-agent's (`<project>/<sessionId>/subagents/agent-<id>.jsonl`) the one above."""
    nested = path.parent.name == "subagents" and path.name.startswith("agent-")
    return path.parents[2] if nested and len(path.parents) > 2 else path.parent


def _sidecar_call(path: Path) -> str | None:
    """`toolUseId` from a Claude Code 2.1 sub-agent's `agent-<id>.meta.json` (a small
    regular file beside its transcript), if there is one."""
    sidecar = path.with_suffix(".meta.json")
    try:
        stat = sidecar.lstat()
        if not S_ISREG(stat.st_mode) or stat.st_size > SIDECAR_BYTES:
            return None
        data = orjson.loads(sidecar.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    call = data.get("toolUseId") if isinstance(data, dict) else None
    return call if isinstance(call, str) and call else None


def _spawns_in(parent: Path, kind: SourceKind) -> dict[str, str]:
    """Sub-agent key → the tool call that started it, from a parent transcript (the
    agent parser's `spawns`). Only lines holding the parser's SPAWN_MARKERS are decoded;
    a line over LINE_BYTES is read past, never held; the file is opened without
    following a link."""
    found: dict[str, str] = {}
    markers = kind.parser.SPAWN_MARKERS
    if not markers:
        return found
    try:
        handle = open_source(str(parent))
    except OSError:
        return found
    with handle:
        while line := handle.readline(LINE_BYTES + 1):
            if len(line) > LINE_BYTES and not line.endswith(b"\n"):
                while (rest := handle.readline(1 << 20)) and not rest.endswith(b"\n"):
                    pass
                continue
            if not all(marker in line for marker in markers):
                continue
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(record, dict):
                for key, call in kind.parser.spawns(record):
                    found.setdefault(key, call)
    return found


def _from_start(
    source: str, agent: str, session_id: str, revision: int, thread_id: str
) -> SourceCheckpoint:
    """A checkpoint before the first byte: continuing from it reads the whole file."""
    return SourceCheckpoint(source, agent, session_id, revision, thread_id, 0, 0, 0, EMPTY_SHA,
                            EMPTY_SHA, -1, -1, {})  # fmt: skip


def _unreadable(planned: _Planned, exc: OSError) -> FileResult:
    why = "a symbolic link: not followed" if exc.errno == errno.ELOOP else exc.strerror
    return FileResult(str(planned.path), "unreadable", planned.thread_id,
                      reason=f"not read: {why or exc}")  # fmt: skip


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
