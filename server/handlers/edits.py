"""Edits a session makes to its workspace: `fs/applyEdit` (recorded with the file's
before and after) and `thread/rewind` (files and conversation back to a turn)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from server.handlers.context import Context

if TYPE_CHECKING:
    from protocol.methods import ApplyEditParams, ThreadRewindParams


async def _in_session(
    ctx: Context,
    params: ApplyEditParams | ThreadRewindParams,
    work: Callable[..., dict[str, Any]],
    **kwargs: Any,
) -> dict[str, Any]:
    """Run `work(service, session, **kwargs)` on the worker for the session params name."""

    def run() -> dict[str, Any]:
        session = ctx.service.session_for(params.threadId, params.sessionId, ctx.connection.owner)
        return work(ctx.service, session, **kwargs)

    return await ctx.server.run_in_worker(run)


async def fs_apply_edit(ctx: Context, params: ApplyEditParams) -> dict[str, Any]:
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


async def thread_rewind(ctx: Context, params: ThreadRewindParams) -> dict[str, Any]:
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
