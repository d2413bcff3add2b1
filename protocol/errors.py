"""Error codes and the typed errors every layer raises.

Why one exception type: `restore/` raises `ProtocolError` for known conditions (busy thread,
bad id, ...) and `server/` turns it into a JSON-RPC error with a `data.kind`, so no known
condition ever reaches a client as a bare -32603.
"""

from __future__ import annotations

import errno
from enum import StrEnum
from typing import Any


class ErrorCode:
    """JSON-RPC error codes. Standard ones first, then sessiond's application range."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    SERVER_NOT_INITIALIZED = -32002
    OVERLOADED = -32001
    REQUEST_CANCELLED = -32800
    # Application errors: one code per kind so clients that only look at `code` still can tell.
    THREAD_NOT_FOUND = -32010
    THREAD_BUSY = -32011
    THREAD_ARCHIVED = -32012
    INVALID_ID = -32013
    STALE_SESSION = -32014
    PAYLOAD_TOO_LARGE = -32015
    UNAUTHORIZED = -32016
    CONFLICTING_OPERATION = -32017
    STORAGE_FULL = -32018
    STORAGE_ERROR = -32019
    WORKSPACE_DRIFT = -32020
    OUTSIDE_WORKSPACE = -32021
    AGENT_EXITED = -32022


class ErrorKind(StrEnum):
    """The `data.kind` string of every error sessiond sends."""

    PARSE_ERROR = "ParseError"
    INVALID_REQUEST = "InvalidRequest"
    METHOD_NOT_FOUND = "MethodNotFound"
    INVALID_PARAMS = "InvalidParams"
    INTERNAL_ERROR = "InternalError"
    SERVER_NOT_INITIALIZED = "ServerNotInitialized"
    OVERLOADED = "Overloaded"
    REQUEST_CANCELLED = "RequestCancelled"
    THREAD_NOT_FOUND = "ThreadNotFound"
    THREAD_BUSY = "ThreadBusy"
    THREAD_ARCHIVED = "ThreadArchived"
    INVALID_ID = "InvalidId"
    STALE_SESSION = "StaleSession"
    PAYLOAD_TOO_LARGE = "PayloadTooLarge"
    UNAUTHORIZED = "Unauthorized"
    CONFLICTING_OPERATION = "ConflictingOperation"
    STORAGE_FULL = "StorageFull"
    STORAGE_ERROR = "StorageError"
    WORKSPACE_DRIFT = "WorkspaceDrift"
    """The thread was recorded on another branch, worktree or directory (`sessiond acp`)."""
    OUTSIDE_WORKSPACE = "OutsideWorkspace"
    """A path outside the thread's workspace, or not a regular file (restore/access.py)."""
    AGENT_EXITED = "AgentExited"
    """The agent `sessiond acp` proxies exited before it answered; the next prompt restarts it."""


CODE_OF_KIND: dict[ErrorKind, int] = {
    ErrorKind.PARSE_ERROR: ErrorCode.PARSE_ERROR,
    ErrorKind.INVALID_REQUEST: ErrorCode.INVALID_REQUEST,
    ErrorKind.METHOD_NOT_FOUND: ErrorCode.METHOD_NOT_FOUND,
    ErrorKind.INVALID_PARAMS: ErrorCode.INVALID_PARAMS,
    ErrorKind.INTERNAL_ERROR: ErrorCode.INTERNAL_ERROR,
    ErrorKind.SERVER_NOT_INITIALIZED: ErrorCode.SERVER_NOT_INITIALIZED,
    ErrorKind.OVERLOADED: ErrorCode.OVERLOADED,
    ErrorKind.REQUEST_CANCELLED: ErrorCode.REQUEST_CANCELLED,
    ErrorKind.THREAD_NOT_FOUND: ErrorCode.THREAD_NOT_FOUND,
    ErrorKind.THREAD_BUSY: ErrorCode.THREAD_BUSY,
    ErrorKind.THREAD_ARCHIVED: ErrorCode.THREAD_ARCHIVED,
    ErrorKind.INVALID_ID: ErrorCode.INVALID_ID,
    ErrorKind.STALE_SESSION: ErrorCode.STALE_SESSION,
    ErrorKind.PAYLOAD_TOO_LARGE: ErrorCode.PAYLOAD_TOO_LARGE,
    ErrorKind.UNAUTHORIZED: ErrorCode.UNAUTHORIZED,
    ErrorKind.CONFLICTING_OPERATION: ErrorCode.CONFLICTING_OPERATION,
    ErrorKind.STORAGE_FULL: ErrorCode.STORAGE_FULL,
    ErrorKind.STORAGE_ERROR: ErrorCode.STORAGE_ERROR,
    ErrorKind.WORKSPACE_DRIFT: ErrorCode.WORKSPACE_DRIFT,
    ErrorKind.OUTSIDE_WORKSPACE: ErrorCode.OUTSIDE_WORKSPACE,
    ErrorKind.AGENT_EXITED: ErrorCode.AGENT_EXITED,
}


MEANING_OF_KIND: dict[ErrorKind, str] = {
    ErrorKind.PARSE_ERROR: "The message is not JSON (or its header is malformed).",
    ErrorKind.INVALID_REQUEST: "Not a JSON-RPC 2.0 request, or sent after `shutdown`.",
    ErrorKind.METHOD_NOT_FOUND: "This server does not have that method (update the server).",
    ErrorKind.INVALID_PARAMS: "A parameter is missing or wrong; `data.errors` lists each.",
    ErrorKind.INTERNAL_ERROR: "A bug in sessiond; nothing known went wrong. Please report it.",
    ErrorKind.SERVER_NOT_INITIALIZED: "Send `initialize` first.",
    ErrorKind.OVERLOADED: "Too many requests in flight; retry after an answer arrives.",
    ErrorKind.REQUEST_CANCELLED: "The request was cancelled by `$/cancelRequest`.",
    ErrorKind.THREAD_NOT_FOUND: "No thread with that id (deleted, or never existed).",
    ErrorKind.THREAD_BUSY: "Another client or process holds the thread; `data.holder` says who.",
    ErrorKind.THREAD_ARCHIVED: "The thread is archived: unarchive it first.",
    ErrorKind.INVALID_ID: "An id is not a UUID (or a client id is too long).",
    ErrorKind.STALE_SESSION: "The session is no longer the thread's current one: resume again.",
    ErrorKind.PAYLOAD_TOO_LARGE: "The message or an item exceeds a limit (`data.limit`).",
    ErrorKind.UNAUTHORIZED: "The client may not do that.",
    ErrorKind.CONFLICTING_OPERATION: "An operation's state would move backwards.",
    ErrorKind.STORAGE_FULL: "The disk holding the data directory is full; nothing was written.",
    ErrorKind.STORAGE_ERROR: "The data directory could not be read or written; `data.path` "
    "names where (`data.readOnly`: the directory is read-only).",
    ErrorKind.WORKSPACE_DRIFT: "`sessiond acp`: the thread was recorded on another branch, "
    "worktree or directory; `data.drift` lists how (`_meta.sessiond.acceptDrift` continues).",
    ErrorKind.OUTSIDE_WORKSPACE: "A path outside the thread's workspace (or outside the "
    "client's workspace folders), resolved with symlinks; `data.path` names it. Nothing was "
    "read or written.",
    ErrorKind.AGENT_EXITED: "`sessiond acp`: the proxied agent exited before it answered; "
    "the next prompt restarts it.",
}
"""What each error means for a client, for docs/protocol.md."""


class ProtocolError(Exception):
    """A known failure with a JSON-RPC code and a `data.kind`; `details` go into `data`."""

    def __init__(self, kind: ErrorKind, message: str, **details: Any) -> None:
        super().__init__(message)
        self.kind = kind
        self.code = CODE_OF_KIND[kind]
        self.message = message
        self.details = details

    @property
    def data(self) -> dict[str, Any]:
        return {"kind": str(self.kind), **self.details}

    def to_error_object(self) -> dict[str, Any]:
        """The JSON-RPC `error` member for this failure."""
        return {"code": self.code, "message": self.message, "data": self.data}


def thread_not_found(thread_id: str) -> ProtocolError:
    return ProtocolError(ErrorKind.THREAD_NOT_FOUND, f"no thread {thread_id}", threadId=thread_id)


def invalid_id(value: object, what: str = "threadId") -> ProtocolError:
    shown = repr(value)[:80]
    return ProtocolError(ErrorKind.INVALID_ID, f"{what} must be a UUID, got {shown}", field=what)


def storage_error(exc: OSError, path: object = None, doing: str = "") -> ProtocolError:
    """The typed error for a filesystem failure: StorageFull for a full disk or quota,
    StorageError otherwise, always naming the path (the caller's, else the exception's).
    `doing` says what failed ("cannot create"), so the message is one line to act on."""
    where = str(path if path is not None else exc.filename or "the data directory")
    reason = exc.strerror or str(exc) or type(exc).__name__
    message = f"{doing} {where}: {reason}" if doing else f"{where}: {reason}"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return ProtocolError(ErrorKind.STORAGE_FULL, f"{message} (disk full)", path=where)
    return ProtocolError(ErrorKind.STORAGE_ERROR, message, path=where)


def invalid_params(errors: list[Any], within: list[str] | None = None) -> ProtocolError:
    """InvalidParams from pydantic's `errors()`, naming the first problem's place
    (`within`: the path that place is under, e.g. `["items[3]"]` for one item of a batch)."""
    problems = [
        {"loc": ".".join([*(within or []), *map(str, error["loc"])]), "msg": error["msg"]}
        for error in errors[:20]
    ]
    if not problems:
        return ProtocolError(ErrorKind.INVALID_PARAMS, "invalid params")
    first = problems[0]
    return ProtocolError(
        ErrorKind.INVALID_PARAMS,
        f"invalid params: {first['loc']}: {first['msg']}",
        errors=problems,
        **({"field": first["loc"]} if within else {}),
    )
