"""`thread/*`: unpack params, call the thread service on the worker (pages: on a reader),
shape the answer, tell the other clients."""

from __future__ import annotations

import asyncio
import os
import time
from typing import TYPE_CHECKING, Any

from protocol.errors import ErrorKind, ProtocolError, invalid_params
from restore.faults import pause_point
from server.handlers.context import Context
from server.handlers.readahead import PageKey, ReadAhead
from server.host import thread_notice
from server.worker import log_failure

if TYPE_CHECKING:
    from collections.abc import Callable

    from protocol.methods import (
        SessionParams,
        ThreadClearParams,
        ThreadCompactParams,
        ThreadContinueParams,
        ThreadForkParams,
        ThreadIdParams,
        ThreadListParams,
        ThreadReadBlobParams,
        ThreadReadParams,
        ThreadRecordParams,
        ThreadResolveParams,
        ThreadResumeParams,
        ThreadSearchParams,
        ThreadSetTitleParams,
        ThreadStartParams,
    )
    from protocol.quick_params import ListParams, ReadParams, ResumeParams
    from restore.service.search import Asked
    from restore.service.threads import StartedThread
    from restore.stores.api import AppendResult, Page, Progress
    from restore.stores.records import Staged
    from restore.summary import ThreadSummary


def _absolute(cwd: str) -> str:
    """A cwd a client names: absolute and without NUL (InvalidParams otherwise)."""
    from restore.access import checked_text

    if not os.path.isabs(checked_text(cwd, "cwd")):
        raise ProtocolError(
            ErrorKind.INVALID_PARAMS, f"cwd must be an absolute path: {cwd!r}", field="cwd"
        )
    return cwd


async def _session_opened(
    ctx: Context,
    info: dict[str, Any],
    session_id: str,
    notice: tuple[str, dict[str, Any]],
    parents: list[str | None],
    **hook: Any,
) -> None:
    """A session opened on a thread (start, resume, fork; its client was named as the
    holder when it opened: restore/service/sessions.py): its row soon in the index (for
    other processes' listings), the other clients told, then its SessionStart hooks (run
    once the answer is sent). The notice carries the child count (a snapshot the answer
    does not: a client may keep it)."""
    ctx.server.schedule_index_flush()
    await ctx.server.announce_threads([notice], parents=parents)
    ctx.server.hooks.session_started(
        ctx.connection, thread_id=info["threadId"], session_id=session_id, **hook
    )


async def thread_start(ctx: Context, params: ThreadStartParams) -> dict[str, Any]:
    from restore.access import existing_directory

    trusted = ctx.trusted_folders()
    items = _recordable(params.items or [])  # refused before anything is started

    def start() -> tuple[StartedThread, ThreadSummary]:
        started = ctx.service.start(
            cwd=existing_directory(params.cwd),
            workspace_folder=ctx.workspace_folder_of(params.cwd),
            trusted_folders=trusted,
            title=params.title,
            model=params.model,
            permissions=params.permissions.model_dump(exclude_none=True)
            if params.permissions
            else None,
            client=ctx.connection.client_info,
            owner=ctx.connection.owner,
            parent_thread_id=params.parentThreadId,
            parent_operation_id=params.parentOperationId,
            session_key=params.sessionKey,
        )
        summary = started.summary
        if items:
            thread_id = summary.threadId
            _, summary = ctx.service.record(
                thread_id, started.session_id, items, ctx.connection.owner
            )
        return started, summary

    started, summary = await ctx.server.run_in_worker(start)
    info = summary.thread_info()
    # New: no sub-agents yet; a sub-agent's parent follows with its new count. The answer
    # says null (not counted): a client may keep it, and a kept 0 would hide sub-agents
    # started later (the extension lists a thread's children unless a listing said 0).
    notice = thread_notice({**info, "childCount": 0}, started=True)
    await _session_opened(
        ctx,
        info,
        started.session_id,
        notice,
        [info["parentThreadId"]],
        source="startup",
        cwd=params.cwd,
    )
    return {"thread": info, "sessionId": started.session_id}


def _recordable(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Items a client sent, each checked as a RecordableItem (InvalidParams naming its
    place, `items[3].id`, otherwise), as they are stored."""
    from protocol.items import ITEM_DEPTH_MAX, RECORDABLE_ITEM_ADAPTER, nests_deeper

    for index, item in enumerate(raw):
        if nests_deeper(item):
            raise ProtocolError(
                ErrorKind.INVALID_PARAMS,
                f"items[{index}] nests deeper than {ITEM_DEPTH_MAX} levels",
                field=f"items[{index}]",
            )
    if not raw:
        return []
    from pydantic import ValidationError

    items = []
    for index, item in enumerate(raw):
        try:
            valid = RECORDABLE_ITEM_ADAPTER.validate_python(item)
        except ValidationError as exc:  # named by its place in the batch: items[3].id
            # (each error's first place is the item type's tag: left out)
            errors = [{**e, "loc": e["loc"][1:]} for e in exc.errors()]
            raise invalid_params(errors, [f"items[{index}]"]) from None
        items.append(valid.model_dump(mode="json", exclude_none=True))
    return items


def thread_record(ctx: Context, params: ThreadRecordParams) -> asyncio.Future[dict[str, Any]]:
    """Not a coroutine: this is the hot path, answered from the worker's batch directly
    (no task per record). Group commit: the batch's sync comes before the answer."""
    items = _recordable(params.items)
    group = ctx.server.config.durability == "group"

    def recorded(outcome: tuple[AppendResult, ThreadSummary]) -> dict[str, Any]:
        result, summary = outcome
        if result.stored:
            ctx.server.schedule_index_flush()
            ctx.server.subscriptions.recorded(summary.threadId, result.stored)
            ctx.server.announce_update(summary)
        return {
            "firstSeq": result.first_seq,
            "lastSeq": result.last_seq,
            "duplicates": result.duplicates,
        }

    redacting, redacted = _redaction(ctx, items)
    staging = _staging(ctx, params, items, redacting, redacted)

    def record() -> tuple[AppendResult, ThreadSummary]:
        ready, staged = (
            staging.result()
            if staging is not None
            else (items if redacting is None else redacting.result(), None)
        )
        return ctx.service.record(
            params.threadId,
            params.sessionId,
            ready,
            ctx.connection.owner,
            defer_sync=group,
            redacted=redacted,
            staged=staged,
        )

    return ctx.server.worker.submit(
        record,
        durable=group,
        then=recorded,
        next_turn=True,
        after=staging or redacting,
    )


def _staging(
    ctx: Context,
    params: ThreadRecordParams,
    items: list[dict[str, Any]],
    redacting: asyncio.Future[list[Any]] | None,
    redacted: bool,
) -> asyncio.Future[tuple[list[Any], Staged | None]] | None:
    """A record past `STAGE_BYTES`, once redacted, written ahead by the store where that
    spares the store thread its bytes (the PostgreSQL store: `Writer.stage`), on the large
    records' redaction thread: after its redaction there, which it waits for in order."""
    from restore.stores.records import STAGE_BYTES

    service = ctx.server.opened_service()
    if service is None or (service.store.redactor is not None and not redacted):
        return None  # no store open yet: the record opens it, on the store thread
    if not _larger_than(items, STAGE_BYTES):
        return None

    def stage() -> tuple[list[Any], Staged | None]:
        ready = items if redacting is None else redacting.result()
        staged = service.stage(
            params.threadId, params.sessionId, ready, ctx.connection.owner, redacted=redacted
        )
        return ready, staged

    return ctx.server.run_redaction(stage, large=True)


INLINE_BYTES = 64 << 10
"""A record up to this size is looked at by the redactor's whole-item pass on the event
loop (Hyperscan: ~1 µs for most records); past it, or when the pass finds something to
look at, the redaction runs on a redaction thread."""


def _redaction(
    ctx: Context, items: list[dict[str, Any]]
) -> tuple[asyncio.Future[list[Any]] | None, bool]:
    """A record's redaction, off the store thread, and whether the store may take the
    items as redacted. (None, True): nothing to redact (most records: the pass finds no
    rule possible). (None, False): the store redacts as it stamps (no store open yet, or
    the pass not loaded yet: the first small record loads it there, as before). Else the
    future of the redacted items, run on a redaction thread (a record's secrets never hold
    another client's work: docs/security.md); one too costly to look at (TooCostly) is
    refused, the item named."""
    import orjson

    redactor = ctx.server.redactor()
    if redactor is None:
        return None, False
    large = _larger_than(items, INLINE_BYTES)
    if not large and not redactor.ready:
        return None, False
    raws = [] if large else [orjson.dumps(item) for item in items]
    if not large and not any(map(redactor.possible_item, raws)):
        return None, True

    def redact() -> list[Any]:
        from restore.redaction.engine import TooCostly

        pause_point("redaction")  # on a redaction thread (tests/security/test_redaction_cost.py)
        encoded = raws or [orjson.dumps(item) for item in items]  # a large one: here
        out = []
        for index, (item, raw) in enumerate(zip(items, encoded, strict=True)):
            try:
                out.append(redactor.item(item, raw))
            except TooCostly as exc:
                raise ProtocolError(exc.kind, exc.message, field=f"items[{index}]") from None
        return out

    return ctx.server.run_redaction(redact, large=large), True


def _larger_than(value: Any, limit: int) -> bool:
    """Whether the text of `value` (its strings and keys) passes `limit` characters: a
    walk of its nodes, not an encoding of its bytes (16 MiB encoded on the event loop
    held every client for 10-30 ms)."""
    left = limit
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            left -= len(node)
        elif isinstance(node, dict):
            for key, inner in node.items():
                left -= len(key)
                stack.append(inner)
        elif isinstance(node, list):
            stack.extend(node)
        else:
            left -= 8
        if left < 0:
            return True
    return False


async def thread_list(ctx: Context, params: ThreadListParams | ListParams) -> dict[str, Any]:
    began = time.time()
    progress = ctx.progress("Indexing threads")

    def page() -> tuple[list[dict[str, Any]], str | None]:
        from restore.stores.api import ListFilters

        filters = ListFilters(
            cwd=params.cwd,
            workspace_folder=params.workspaceFolder,
            archived=params.archived,
            search=params.search,
            cursor=params.cursor,
            limit=params.limit,
            parent_thread_id=params.parentThreadId,
            session_key=params.sessionKey,
        )
        summaries, cursor = ctx.service.list(filters, progress)
        filed = _filer(ctx)
        return [filed(summary.thread_info()) for summary in summaries], cursor

    threads, cursor = await ctx.server.run_in_worker(page)
    ctx.server.watch_after_answer(began)  # a client looks at threads: keep them live
    return {"threads": threads, "nextCursor": cursor}


async def thread_search(ctx: Context, params: ThreadSearchParams) -> dict[str, Any]:
    """Checked, and this process's latest rows written, on the store thread (in order
    after the records before it: they are found); then found on the search thread when
    the store's search can run beside the store (the embedded store's), so its catch-up
    and query never hold another client's record."""
    from restore.stores.api import SearchFilters

    began = time.time()
    indexing, searching = ctx.progress("Indexing threads"), ctx.progress("Indexing for search")
    filters = SearchFilters(
        cwd=params.cwd,
        workspace_folder=params.workspaceFolder,
        agent=params.agent,
        role=params.role,
        since=params.since,
        until=params.until,
        archived=params.archived,
    )
    for attempt in (1, 2):
        asked = await ctx.server.run_in_worker(
            lambda: ctx.service.ask(params.query, filters, index_progress=indexing)
        )
        try:
            result = await _found(ctx, params, asked, searching)
            break
        except ProtocolError as exc:  # the index set aside: asked again, on its rebuild
            from restore.service.search import asked_again

            if attempt == 2 or not asked_again(exc):
                raise
    ctx.server.watch_after_answer(began)  # other processes' records: findable as they land
    return result


async def _found(
    ctx: Context, params: ThreadSearchParams, asked: Asked, searching: Progress
) -> dict[str, Any]:
    """The page `asked` finds: on the search thread when the store's search can run beside
    the store (the embedded store's), so its catch-up and query never hold another
    client's record."""
    from restore.search.cancel import Cancel

    cancel = Cancel()

    def find() -> dict[str, Any]:
        found = ctx.service.find(
            asked, cursor=params.cursor, limit=params.limit, progress=searching, cancel=cancel
        )
        filed = _filer(ctx)
        hits = [
            {
                "threadId": hit.thread.threadId,
                "seq": hit.seq,
                "role": hit.role,
                "ts": hit.ts,
                "snippet": hit.snippet,
                "highlights": hit.highlights,
                "thread": filed(hit.thread.thread_info()),
            }
            for hit in found.hits
        ]
        return {"hits": hits, "nextCursor": found.next_cursor, "partial": found.partial}

    try:
        if asked.beside_store:
            return await ctx.server.run_search(find)
        return await ctx.server.run_in_worker(find)
    except asyncio.CancelledError:  # $/cancelRequest, or the client left: the work stops too
        # Off the loop: stopping a query in the database is a round trip of its own.
        asyncio.get_running_loop().run_in_executor(None, cancel.cancel)
        raise


def _filer(ctx: Context) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Files a page of threads: one recorded with no client around (an import) was filed
    under no folder, and goes under this client's innermost folder holding its cwd, as
    thread/start files a new thread. Does file I/O (realpath): off the loop. The client's
    folders are resolved once (when a thread needs them), and each cwd once: a page of 50
    imported threads and 20 folders took 1,050 realpaths (docs/benchmarks.md, issue 40)."""
    from restore.access import folder_among, resolved_folders

    folders: list[tuple[str, str]] | None = None
    seen: dict[str, str | None] = {}

    def filed(info: dict[str, Any]) -> dict[str, Any]:
        nonlocal folders
        if info["workspaceFolder"] is None and info["origin"] is not None and info["cwd"]:
            cwd = info["cwd"]
            if cwd not in seen:
                if folders is None:
                    folders = resolved_folders(ctx.folder_paths())
                seen[cwd] = folder_among(cwd, folders)
            info["workspaceFolder"] = seen[cwd]
        return info

    return filed


async def thread_read(ctx: Context, params: ThreadReadParams | ReadParams) -> dict[str, Any]:
    """Off the store thread: a long read never holds another client's record. The next
    page in the same direction is read ahead while the client takes in this one."""
    pages, max_frame = ctx.server.pages, ctx.server.config.max_frame
    backward = params.beforeSeq is not None

    def read(key: PageKey) -> Page:
        pause_point("thread-read")  # on a reader thread (tests/test_read_fairness.py)
        return pages.read(
            key.thread_id, after=key.after, before=key.before, limit=key.limit, max_bytes=max_frame
        )

    def still_or_again(key: PageKey, ahead: Page | None) -> Page:
        return (
            ahead
            if ahead is not None and pages.holds(key.thread_id, ahead, backward)
            else read(key)
        )

    key = PageKey(params.threadId, params.afterSeq, params.beforeSeq, params.limit)
    ahead = ctx.read_ahead.take(key)
    try:
        earlier = await ahead if ahead is not None else None
    except Exception:  # read again below: the request gets its own error
        earlier = None
    page = await ctx.server.run_reader(lambda: still_or_again(key, earlier))
    if (following := ReadAhead.next_key(key, page)) is not None:
        ctx.read_ahead.start(following, lambda: ctx.server.run_reader(lambda: read(following)))
    import orjson

    cursor = "nextBeforeSeq" if backward else "nextAfterSeq"
    # The items go out as the file has them: embedded, not decoded and encoded again.
    items = [orjson.Fragment(raw) for raw in page.raw]
    return {"items": items, cursor: page.next_seq, "skippedLines": page.skipped}


async def thread_read_blob(ctx: Context, params: ThreadReadBlobParams) -> dict[str, Any]:
    """Only through the edit that names the blob (restore/service/edit_blobs.py)."""
    from restore.service.edit_blobs import read_edit_blob

    max_frame = ctx.server.config.max_frame
    return await ctx.server.run_in_worker(
        lambda: read_edit_blob(
            ctx.service.store, params.threadId, params.seq, params.sha, max_bytes=max_frame
        )
    )


async def thread_resume(ctx: Context, params: ThreadResumeParams | ResumeParams) -> dict[str, Any]:
    if params.cwd is not None:
        _absolute(params.cwd)
    trusted = ctx.trusted_folders()
    report = await ctx.server.run_in_worker(
        lambda: ctx.service.resume(
            params.threadId,
            cwd=params.cwd,
            trusted_folders=trusted,
            accept_drift=params.acceptDrift,
            message_limit=params.messageLimit,
            available_models=params.availableModels,
            owner=ctx.connection.owner,
            max_bytes=ctx.server.config.max_frame // 2,  # the rest of the report fits beside
        )
    )
    if report["session"]["sessionId"]:  # ready: needs_review opens no session, runs no hook
        info = report["thread"]
        await _session_opened(
            ctx,
            info,
            report["session"]["sessionId"],
            thread_notice(dict(info)),  # counted there, not in the answer
            [],
            source="resume",
            cwd=report["environment"]["current"].get("cwd"),
            previous_session_id=report["session"]["resumedFrom"],
        )
    return report


async def thread_continue(ctx: Context, params: ThreadContinueParams) -> dict[str, Any]:
    """A message for a session key: its thread continues, or a new one replaces it
    (restore/service/continuation.py). Then, as for start and resume: the rows told to the
    other clients, the replaced session's SessionEnd (`reset`) and the opened one's
    SessionStart (`startup`, `resume`, `reset` with its reason) hooks, after the answer."""
    from restore.access import existing_directory
    from restore.service.continuation import ContinueAsk

    trusted = ctx.trusted_folders()

    def ask() -> ContinueAsk:
        return ContinueAsk(
            key=params.sessionKey,
            cwd=existing_directory(params.cwd),
            workspace_folder=ctx.workspace_folder_of(params.cwd),
            policy=params.policy.model_dump(exclude_none=True) if params.policy else None,
            title=params.title,
            model=params.model,
            permissions=params.permissions.model_dump(exclude_none=True)
            if params.permissions
            else None,
            accept_drift=params.acceptDrift,
            message_limit=params.messageLimit,
            available_models=params.availableModels,
            client=ctx.connection.client_info,
            owner=ctx.connection.owner,
            trusted_folders=trusted,
            max_bytes=ctx.server.config.max_frame // 2,  # the rest of the answer fits beside
        )

    done = await ctx.server.run_in_worker(lambda: ctx.service.continue_key(ask(), link_after=True))
    if done.changed:  # replaced threads now naming their successor
        notices = [thread_notice(row.thread_info()) for row in done.changed]
        await ctx.server.announce_threads(notices)
    info = done.thread.thread_info()
    hooks = ctx.server.hooks
    if done.ended_session_id is not None:
        hooks.session_ended(
            ctx.connection,
            thread_id=done.previous_thread_id or "",
            session_id=done.ended_session_id,
            reason="reset",
            reset_reason=done.reset_reason,
        )
    if done.session_opened and done.session_id is not None:
        if done.reason == "resume":
            report = done.report or {}
            await _session_opened(
                ctx,
                info,
                done.session_id,
                thread_notice(dict(info)),
                [],
                source="resume",
                cwd=report.get("environment", {}).get("current", {}).get("cwd"),
                previous_session_id=report.get("session", {}).get("resumedFrom"),
            )
        else:  # a new thread: no sub-agents yet
            notice = thread_notice({**info, "childCount": 0}, started=True)
            await _session_opened(
                ctx,
                info,
                done.session_id,
                notice,
                [],
                source=done.reason,
                cwd=params.cwd,
                reset_reason=done.reset_reason,
                previous_thread_id=done.previous_thread_id,
            )
    if done.unlinked is not None:  # last: nothing else this handler awaits may follow it
        _link_after_answer(ctx, done.unlinked, done.thread)
    return done.answer()


def _link_after_answer(ctx: Context, old_id: str, new: ThreadSummary) -> None:
    """The replaced thread's successor item, on the store thread once the reset's answer
    has left (its flush is two loop turns on: server/transport/pipes.py), then its row to
    every client. Nothing waits for it: a failure is logged, and the key's next
    `thread/continue` writes the item (restore/service/continuation.py)."""
    loop = asyncio.get_running_loop()

    def announce(row: ThreadSummary | None) -> None:
        if row is not None:
            ctx.server.announce_threads([thread_notice(row.thread_info())])

    def link() -> None:
        job = ctx.server.worker.submit(ctx.service.link_replaced, old_id, new, then=announce)
        job.add_done_callback(log_failure("a reset's successor item was not written"))

    loop.call_soon(loop.call_soon, loop.call_soon, link)


async def thread_fork(ctx: Context, params: ThreadForkParams) -> dict[str, Any]:
    started = await ctx.server.run_in_worker(
        lambda: ctx.service.fork(
            params.threadId,
            at_turn_id=params.atTurnId,
            at_seq=params.atSeq,
            owner=ctx.connection.owner,
            trusted_folders=ctx.trusted_folders(),
        )
    )
    info = started.summary.thread_info()
    notice = thread_notice({**info, "childCount": 0}, started=True)  # it has no sub-agents
    await _session_opened(
        ctx,
        info,
        started.session_id,
        notice,
        [],  # a startup with forkedFrom
        source="startup",
        cwd=info.get("cwd"),
        forked_from=info.get("forkedFrom"),
    )
    return {"thread": info, "sessionId": started.session_id}


async def _set_archived(ctx: Context, thread_id: str, archived: bool) -> dict[str, Any]:
    summary = await ctx.server.run_in_worker(
        ctx.service.archive, thread_id, archived, ctx.connection.owner
    )
    await ctx.server.announce_threads(
        [thread_notice(summary.thread_info())], parents=[summary.parentThreadId]
    )
    return {}


async def thread_archive(ctx: Context, params: ThreadIdParams) -> dict[str, Any]:
    return await _set_archived(ctx, params.threadId, True)


async def thread_unarchive(ctx: Context, params: ThreadIdParams) -> dict[str, Any]:
    return await _set_archived(ctx, params.threadId, False)


async def thread_delete(ctx: Context, params: ThreadIdParams) -> dict[str, Any]:
    def delete() -> str | None:
        parent = ctx.service.listed_parent(params.threadId)
        ctx.service.delete(params.threadId, ctx.connection.owner)
        return parent

    parent = await ctx.server.run_in_worker(delete)
    gone = thread_notice({"threadId": params.threadId}, deleted=True)
    await ctx.server.announce_threads([gone], parents=[parent])
    return {}


async def thread_set_title(ctx: Context, params: ThreadSetTitleParams) -> dict[str, Any]:
    summary = await ctx.server.run_in_worker(ctx.service.set_title, params.threadId, params.title)
    info = summary.thread_info()
    await ctx.server.announce_threads([thread_notice(dict(info))])
    return {"thread": info}


async def thread_resolve(ctx: Context, params: ThreadResolveParams) -> dict[str, Any]:
    from restore.service.listing import CANDIDATES

    def resolve() -> dict[str, Any]:
        found = ctx.service.with_prefix(params.prefix, CANDIDATES + 1)
        filed = _filer(ctx)
        threads = [filed(summary.thread_info()) for summary in found[:CANDIDATES]]
        return {"threads": threads, "more": len(found) > CANDIDATES}

    return await ctx.server.run_in_worker(resolve)


async def thread_close(ctx: Context, params: SessionParams) -> dict[str, Any]:
    await ctx.server.run_in_worker(
        ctx.service.close, params.threadId, params.sessionId, ctx.connection.owner
    )
    ctx.server.hooks.session_ended(
        ctx.connection, thread_id=params.threadId, session_id=params.sessionId, reason="close"
    )
    return {}


async def thread_clear(ctx: Context, params: ThreadClearParams) -> dict[str, Any]:
    trusted = ctx.trusted_folders()
    result = await ctx.server.run_in_worker(
        lambda: ctx.service.clear(
            params.threadId, params.sessionId, ctx.connection.owner, trusted_folders=trusted
        )
    )
    hooks = ctx.server.hooks
    hooks.session_ended(
        ctx.connection, thread_id=params.threadId, session_id=params.sessionId, reason="clear"
    )
    hooks.session_started(
        ctx.connection,
        thread_id=params.threadId,
        session_id=result["sessionId"],
        source="clear",
        cwd=None,
        previous_session_id=params.sessionId,
    )
    return result


async def thread_compact(ctx: Context, params: ThreadCompactParams) -> dict[str, Any]:
    result = await ctx.server.run_in_worker(
        ctx.service.compact, params.threadId, params.sessionId, params.summary, ctx.connection.owner
    )
    ctx.server.hooks.session_started(
        ctx.connection,
        thread_id=params.threadId,
        session_id=params.sessionId,
        source="compact",
        cwd=None,
    )
    return result
