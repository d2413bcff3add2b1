"""Every method sessiond answers, listed once in `HANDLERS`, and how a connection gets them.

An explicit table, not decorators filling a dict on import: a method exists because it is
listed here (tests/test_server_protocol.py checks it against protocol/methods.py), never
because some module happened to be imported first. Params are validated with the pydantic
models of `protocol.methods`, imported by the first request that needs them (no warmup:
docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from server.handlers import edits, export, handshake, subscriptions, threads, usage
from server.handlers.context import Context, Handler, Serving

if TYPE_CHECKING:
    from server.rpc.dispatch import SessiondProtocol

HANDLERS: dict[str, Handler] = {
    "initialize": handshake.initialize,
    "shutdown": handshake.shutdown,
    "thread/start": threads.thread_start,
    "thread/record": threads.thread_record,
    "thread/list": threads.thread_list,
    "thread/read": threads.thread_read,
    "thread/search": threads.thread_search,
    "usage/report": usage.usage_report,
    "thread/readBlob": threads.thread_read_blob,
    "thread/export": export.thread_export,
    "thread/resume": threads.thread_resume,
    "thread/continue": threads.thread_continue,
    "thread/fork": threads.thread_fork,
    "thread/archive": threads.thread_archive,
    "thread/unarchive": threads.thread_unarchive,
    "thread/delete": threads.thread_delete,
    "thread/setTitle": threads.thread_set_title,
    "thread/resolve": threads.thread_resolve,
    "thread/close": threads.thread_close,
    "thread/clear": threads.thread_clear,
    "thread/compact": threads.thread_compact,
    "thread/subscribe": subscriptions.thread_subscribe,
    "thread/unsubscribe": subscriptions.thread_unsubscribe,
    "fs/applyEdit": edits.fs_apply_edit,
    "thread/rewind": edits.thread_rewind,
}
"""Requests, by method. `initialize` and `shutdown` take their params as sent."""

UNVALIDATED = frozenset({"initialize", "shutdown"})


def _validate(method: str, params: dict[str, Any]) -> Any:
    from protocol.quick_params import QUICK, plainly_valid

    # A window's first requests: pydantic only when their params need judging.
    if method in QUICK and (quick := plainly_valid(method, params)) is not None:
        return quick
    from protocol.methods import METHODS

    model = METHODS[method][0]
    assert model is not None
    return model.model_validate(params)


def register(connection: SessiondProtocol, server: Serving) -> None:
    """Register every handler (and the notifications sessiond reads) on a connection."""
    ctx = Context(connection, server)
    for method, handler in HANDLERS.items():
        connection.methods[method] = _bind(method, handler, ctx)
    connection.methods["initialized"] = lambda params: None
    connection.methods["workspace/didChangeWorkspaceFolders"] = lambda params: (
        handshake.change_folders(ctx, params)
    )


def _bind(method: str, handler: Handler, ctx: Context) -> Callable[[Any], Any]:
    """The handler with its params validated; invalid params raise before any work."""
    if method in UNVALIDATED:
        return lambda params: handler(ctx, params)
    return lambda params: handler(ctx, _validate(method, params))
