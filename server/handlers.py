"""Request handlers: unpack params, call the thread service on the worker, shape the answer.

Params are validated with the pydantic models of `protocol.methods`, imported by the first
request that needs them: `initialize` is answered before pydantic or SQLite is loaded, or
git run (sessiond promises no warmup).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from protocol import PROTOCOL_VERSION
from protocol.errors import ErrorKind, ProtocolError
from restore.engine.subsystems import SUBSYSTEM_NAMES
from server import __version__
from server.framing import Framing
from server.readahead import PageKey, ReadAhead

if TYPE_CHECKING:
    from restore.service import ThreadService
    from restore.stores.api import AppendResult, Page
    from restore.summary import ThreadSummary
    from server.app import SessiondServer
    from server.rpc import SessiondProtocol

SERVER_NAME = "sessiond"
SERVER_VERSION = __version__
LIFECYCLE_SOURCES = ("startup", "resume", "clear", "compact")


@dataclass
class Context:
    connection: SessiondProtocol
    server: SessiondServer
    read_ahead: ReadAhead = field(default_factory=ReadAhead)

    @property
    def service(self) -> ThreadService:
        return self.server.service

    def workspace_folder_of(self, cwd: str) -> str | None:
        """The innermost workspace folder the client opened that holds `cwd` (resolved:
        `A/../B` is not in A). Does file I/O (realpath): call it on the worker."""
        from restore.access import folder_of

        return folder_of(cwd, self.folder_paths())

    def folder_paths(self) -> list[str]:
        """Every workspace folder the client opened, as it named them."""
        return [str(folder.get("path", "")) for folder in self.connection.workspace_folders]

    def trusted_folders(self) -> list[str]:
        """The folders the client marked trusted: only there may git run the repository's
        own programs (fsmonitor, hooks, filters) and workspace hooks run."""
        return [
            str(folder.get("path", ""))
            for folder in self.connection.workspace_folders
            if folder.get("trusted") is True
        ]

    def progress(self, title: str) -> Callable[[int, int], None]:
        """A `$/progress` reporter for this client, callable from the worker thread."""
        from server.progress import reporter

        loop = self.server.loop
        assert loop is not None, "progress is only reported while serving"
        return reporter(loop, self.connection.notify, title, "thread", "indexed")


Handler = Callable[[Context, Any], Any]  # a result, or an awaitable of one
HANDLERS: dict[str, Handler] = {}


def handles(method: str) -> Callable[[Handler], Handler]:
    def decorator(handler: Handler) -> Handler:
        HANDLERS[method] = handler
        return handler

    return decorator


def _validate(method: str, params: dict[str, Any]) -> Any:
    from protocol.quick_params import QUICK, plainly_valid

    # A window's first requests: pydantic only when their params need judging.
    if method in QUICK and (quick := plainly_valid(method, params)) is not None:
        return quick
    from protocol.methods import METHODS

    model = METHODS[method][0]
    assert model is not None
    return model.model_validate(params)


def register(connection: SessiondProtocol, server: SessiondServer) -> None:
    """Register every handler (and the notifications sessiond reads) on a connection."""
    ctx = Context(connection, server)
    for method, handler in HANDLERS.items():
        connection.methods[method] = _bind(method, handler, ctx)
    connection.methods["initialized"] = lambda params: None
    connection.methods["workspace/didChangeWorkspaceFolders"] = lambda params: _change_folders(
        ctx, params
    )


def _bind(method: str, handler: Handler, ctx: Context) -> Callable[[Any], Any]:
    """The handler with its params validated; invalid params raise before any work."""
    if method in ("initialize", "shutdown"):
        return lambda params: handler(ctx, params)
    return lambda params: handler(ctx, _validate(method, params))


# --- handshake -------------------------------------------------------------------------


def _folders(raw: Any) -> list[dict[str, Any]]:
    if not isinstance(raw, list):
        raise ProtocolError(ErrorKind.INVALID_PARAMS, "workspaceFolders must be a list")
    folders = []
    for entry in raw:
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            raise ProtocolError(ErrorKind.INVALID_PARAMS, "each workspace folder needs a path")
        folders.append(
            {
                "path": entry["path"],
                "name": entry.get("name"),
                "trusted": entry.get("trusted") is True,
            }
        )
    return folders


@handles("initialize")
def initialize(ctx: Context, params: dict[str, Any]) -> dict[str, Any]:
    """Answered from memory: no file, index, git or hook config is touched here.

    Plain, not a coroutine: it takes effect before the next message is read, so a client
    (a script piping requests) may send its first requests right behind it."""
    if ctx.connection.initialized:
        raise ProtocolError(ErrorKind.INVALID_REQUEST, "initialize was already called")
    ctx.connection.workspace_folders = _folders(params.get("workspaceFolders") or [])
    client = params.get("clientInfo")
    ctx.connection.client_info = client if isinstance(client, dict) else None
    ctx.connection.initialized = True
    ctx.server.workspace_changed()
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "serverInfo": {"name": SERVER_NAME, "version": SERVER_VERSION},
        "capabilities": {
            "subsystems": list(SUBSYSTEM_NAMES),
            "lifecycleSources": list(LIFECYCLE_SOURCES),
            "framing": [str(framing) for framing in Framing],
            "durability": ctx.server.config.durability,
            "maxFrameBytes": ctx.server.config.max_frame,
            "maxItemsPerRecord": 1000,
        },
    }


def _change_folders(ctx: Context, params: dict[str, Any]) -> None:
    removed = {folder["path"] for folder in _folders(params.get("removed") or [])}
    kept = [f for f in ctx.connection.workspace_folders if f["path"] not in removed]
    ctx.connection.workspace_folders = kept + _folders(params.get("added") or [])
    ctx.server.workspace_changed()


@handles("shutdown")
async def shutdown(ctx: Context, params: Any) -> None:
    ctx.connection.shutdown_requested = True
    await ctx.server.hooks.connection_shutdown(ctx)  # SessionEnd(shutdown), after the answer
    return None


# --- threads ---------------------------------------------------------------------------


def _absolute(cwd: str) -> str:
    """A cwd a client names: absolute and without NUL (InvalidParams otherwise)."""
    from restore.access import checked_text

    if not os.path.isabs(checked_text(cwd, "cwd")):
        raise ProtocolError(
            ErrorKind.INVALID_PARAMS, f"cwd must be an absolute path: {cwd!r}", field="cwd"
        )
    return cwd


@handles("thread/start")
async def thread_start(ctx: Context, params: Any) -> dict[str, Any]:
    from restore.access import existing_directory

    trusted = ctx.trusted_folders()
    started = await ctx.server.run_in_worker(
        lambda: ctx.service.start(
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
        )
    )
    info = started.summary.thread_info()
    ctx.server.schedule_index_flush()  # its row, for other processes' listings
    await ctx.server.name_holder(info["threadId"], ctx.connection)
    # Counted in the notification (none yet: it is new), not in the answer (a snapshot a
    # client may keep); a sub-agent's parent follows with its new count.
    await ctx.server.announce_threads([("thread/started", {"thread": {**info, "childCount": 0}})],
                                      parents=[info["parentThreadId"]])  # fmt: skip
    ctx.server.hooks.session_started(
        ctx,
        thread_id=info["threadId"],
        session_id=started.session_id,
        source="startup",
        cwd=params.cwd,
    )
    return {"thread": info, "sessionId": started.session_id}


@handles("thread/record")
def thread_record(ctx: Context, params: Any) -> asyncio.Future[dict[str, Any]]:
    """Not a coroutine: this is the hot path, answered from the worker's batch directly
    (no task per record). Group commit: the batch's sync comes before the answer."""
    from protocol.items import ITEM_DEPTH_MAX, RECORDABLE_ITEM_ADAPTER, nests_deeper

    for index, item in enumerate(params.items):
        if nests_deeper(item):
            raise ProtocolError(
                ErrorKind.INVALID_PARAMS,
                f"items[{index}] nests deeper than {ITEM_DEPTH_MAX} levels",
                field=f"items[{index}]",
            )
    items = [
        RECORDABLE_ITEM_ADAPTER.validate_python(item).model_dump(mode="json", exclude_none=True)
        for item in params.items
    ]
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

    return ctx.server.worker.submit(
        lambda: ctx.service.record(
            params.threadId, params.sessionId, items, ctx.connection.owner, defer_sync=group
        ),
        durable=group,
        then=recorded,
        next_turn=True,
    )


@handles("thread/list")
async def thread_list(ctx: Context, params: Any) -> dict[str, Any]:
    began = time.time()
    progress = ctx.progress("Indexing threads")

    def page() -> tuple[list[dict[str, Any]], str | None]:
        summaries, cursor = ctx.service.list(
            cwd=params.cwd,
            workspace_folder=params.workspaceFolder,
            archived=params.archived,
            search=params.search,
            cursor=params.cursor,
            limit=params.limit,
            progress=progress,
            parent_thread_id=params.parentThreadId,
        )
        return [_filed(ctx, summary.thread_info()) for summary in summaries], cursor

    threads, cursor = await ctx.server.run_in_worker(page)
    ctx.server.watch_after_answer(began)  # a client looks at threads: keep them live
    return {"threads": threads, "nextCursor": cursor}


@handles("thread/search")
async def thread_search(ctx: Context, params: Any) -> dict[str, Any]:
    began = time.time()
    indexing, searching = ctx.progress("Indexing threads"), ctx.progress("Indexing for search")

    def search() -> dict[str, Any]:
        found = ctx.service.search(
            params.query,
            cwd=params.cwd,
            workspace_folder=params.workspaceFolder,
            agent=params.agent,
            role=params.role,
            since=params.since,
            until=params.until,
            archived=params.archived,
            cursor=params.cursor,
            limit=params.limit,
            progress=searching,
            index_progress=indexing,
        )
        hits = [
            {"threadId": hit.thread.threadId, "seq": hit.seq, "role": hit.role, "ts": hit.ts,
             "snippet": hit.snippet, "highlights": hit.highlights,
             "thread": _filed(ctx, hit.thread.thread_info())}
            for hit in found.hits
        ]  # fmt: skip
        return {"hits": hits, "nextCursor": found.next_cursor, "partial": found.partial}

    result = await ctx.server.run_in_worker(search)
    ctx.server.watch_after_answer(began)  # other processes' records: findable as they land
    return result


def _filed(ctx: Context, info: dict[str, Any]) -> dict[str, Any]:
    """A thread recorded with no client around (an import) was filed under no folder: it
    goes under this client's innermost folder holding its cwd, as thread/start files a
    new thread. Does file I/O (realpath): on the worker."""
    if info["workspaceFolder"] is None and info["origin"] is not None and info["cwd"]:
        info["workspaceFolder"] = ctx.workspace_folder_of(info["cwd"])
    return info


@handles("thread/read")
async def thread_read(ctx: Context, params: Any) -> dict[str, Any]:
    """Off the store thread: a long read never holds another client's record. The next
    page in the same direction is read ahead while the client takes in this one."""
    pages, max_frame = ctx.server.pages, ctx.server.config.max_frame
    backward = params.beforeSeq is not None

    def read(key: PageKey) -> Page:
        return pages.read(key.thread_id, after=key.after, before=key.before, limit=key.limit,
                          max_bytes=max_frame)  # fmt: skip

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


@handles("thread/readBlob")
async def thread_read_blob(ctx: Context, params: Any) -> dict[str, Any]:
    """Only through the edit that names the blob (restore/service/edit_blobs.py)."""
    from restore.service.edit_blobs import read_edit_blob

    max_frame = ctx.server.config.max_frame
    return await ctx.server.run_in_worker(
        lambda: read_edit_blob(
            ctx.service.store, params.threadId, params.seq, params.sha, max_bytes=max_frame
        )
    )


@handles("thread/resume")
async def thread_resume(ctx: Context, params: Any) -> dict[str, Any]:
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
        ctx.server.schedule_index_flush()  # its row, for other processes' listings
        await ctx.server.name_holder(report["thread"]["threadId"], ctx.connection)
        notice = {"thread": dict(report["thread"])}  # counted there, not in the answer
        await ctx.server.announce_threads([("thread/updated", notice)])
        ctx.server.hooks.session_started(
            ctx,
            thread_id=report["thread"]["threadId"],
            session_id=report["session"]["sessionId"],
            source="resume",
            cwd=report["environment"]["current"].get("cwd"),
            previous_session_id=report["session"]["resumedFrom"],
        )
    return report


@handles("thread/fork")
async def thread_fork(ctx: Context, params: Any) -> dict[str, Any]:
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
    ctx.server.schedule_index_flush()  # its row, for other processes' listings
    await ctx.server.name_holder(info["threadId"], ctx.connection)
    # A fork has no sub-agents: counted in the notification, not in the answer.
    ctx.server.broadcast("thread/started", {"thread": {**info, "childCount": 0}})
    ctx.server.hooks.session_started(  # a fork is a startup with forkedFrom
        ctx,
        thread_id=info["threadId"],
        session_id=started.session_id,
        source="startup",
        cwd=info.get("cwd"),
        forked_from=info.get("forkedFrom"),
    )
    return {"thread": info, "sessionId": started.session_id}


async def _set_archived(ctx: Context, thread_id: str, archived: bool) -> dict[str, Any]:
    summary = await ctx.server.run_in_worker(
        ctx.service.archive, thread_id, archived, ctx.connection.owner
    )
    await ctx.server.announce_threads([("thread/updated", {"thread": summary.thread_info()})],
                                      parents=[summary.parentThreadId])  # fmt: skip
    return {}


@handles("thread/archive")
async def thread_archive(ctx: Context, params: Any) -> dict[str, Any]:
    return await _set_archived(ctx, params.threadId, True)


@handles("thread/unarchive")
async def thread_unarchive(ctx: Context, params: Any) -> dict[str, Any]:
    return await _set_archived(ctx, params.threadId, False)


@handles("thread/delete")
async def thread_delete(ctx: Context, params: Any) -> dict[str, Any]:
    def delete() -> str | None:
        parent = ctx.service.listed_parent(params.threadId)
        ctx.service.delete(params.threadId, ctx.connection.owner)
        return parent

    parent = await ctx.server.run_in_worker(delete)
    gone = {"thread": {"threadId": params.threadId}, "deleted": True}
    await ctx.server.announce_threads([("thread/updated", gone)], parents=[parent])
    return {}


@handles("thread/setTitle")
async def thread_set_title(ctx: Context, params: Any) -> dict[str, Any]:
    summary = await ctx.server.run_in_worker(ctx.service.set_title, params.threadId, params.title)
    info = summary.thread_info()
    await ctx.server.announce_threads([("thread/updated", {"thread": dict(info)})])
    return {"thread": info}


@handles("thread/close")
async def thread_close(ctx: Context, params: Any) -> dict[str, Any]:
    await ctx.server.run_in_worker(
        ctx.service.close, params.threadId, params.sessionId, ctx.connection.owner
    )
    ctx.server.hooks.session_ended(
        ctx, thread_id=params.threadId, session_id=params.sessionId, reason="close"
    )
    return {}


@handles("thread/clear")
async def thread_clear(ctx: Context, params: Any) -> dict[str, Any]:
    trusted = ctx.trusted_folders()
    result = await ctx.server.run_in_worker(
        lambda: ctx.service.clear(
            params.threadId, params.sessionId, ctx.connection.owner, trusted_folders=trusted
        )
    )
    hooks = ctx.server.hooks
    hooks.session_ended(ctx, thread_id=params.threadId, session_id=params.sessionId, reason="clear")
    hooks.session_started(
        ctx,
        thread_id=params.threadId,
        session_id=result["sessionId"],
        source="clear",
        cwd=None,
        previous_session_id=params.sessionId,
    )
    return result


@handles("thread/compact")
async def thread_compact(ctx: Context, params: Any) -> dict[str, Any]:
    result = await ctx.server.run_in_worker(
        ctx.service.compact, params.threadId, params.sessionId, params.summary, ctx.connection.owner
    )
    ctx.server.hooks.session_started(
        ctx, thread_id=params.threadId, session_id=params.sessionId, source="compact", cwd=None
    )
    return result


async def _in_session(ctx: Context, params: Any, work: Callable[..., Any], **kwargs: Any) -> Any:
    """Run `work(service, session, **kwargs)` on the worker for the session params name."""

    def run() -> Any:
        session = ctx.service.session_for(params.threadId, params.sessionId, ctx.connection.owner)
        return work(ctx.service, session, **kwargs)

    return await ctx.server.run_in_worker(run)


@handles("fs/applyEdit")
async def fs_apply_edit(ctx: Context, params: Any) -> dict[str, Any]:
    from restore.service.edits import apply_edit

    return await _in_session(
        ctx,
        params,
        apply_edit,
        operation_id=params.operationId,
        path=params.path,
        content=params.content,
        expected_sha=params.expectedSha,
        folders=ctx.folder_paths(),
    )


@handles("thread/rewind")
async def thread_rewind(ctx: Context, params: Any) -> dict[str, Any]:
    from restore.service.edits import rewind

    return await _in_session(
        ctx,
        params,
        rewind,
        to_turn_id=params.toTurnId,
        files=params.files,
        conversation=params.conversation,
        force=params.force,
        folders=ctx.folder_paths(),
    )
