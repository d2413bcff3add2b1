"""Filesystem and SQLite failures as typed errors that name the path.

Whatever the layer, an `OSError` or a `sqlite3.Error` that reaches a client is
`StorageFull` (no space, quota) or `StorageError`, with the path involved, never a bare
InternalError: the user can act on "permission denied: /…/blobs/ab", not on a traceback.
`sqlite3` is never imported here (startup imports no sqlite3): an error of that module
exists only once the index has imported it.
"""

from __future__ import annotations

import errno
import sys
from pathlib import Path

from protocol.errors import ErrorKind, ProtocolError

_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_FULL_SQLITE = ("SQLITE_FULL",)


def typed(exc: BaseException, path: str | Path | None = None) -> ProtocolError | None:
    """The typed error for `exc`, if it is a storage failure; None if it is not one."""
    if isinstance(exc, OSError):
        where = exc.filename if exc.filename is not None else path
        reason = exc.strerror or type(exc).__name__
        full = exc.errno in _FULL_ERRNOS
    else:
        sqlite3 = sys.modules.get("sqlite3")
        if sqlite3 is None or not isinstance(exc, sqlite3.Error):
            return None
        where, reason = path, str(exc)
        full = getattr(exc, "sqlite_errorname", "") in _FULL_SQLITE
    where = None if where is None else str(where)
    subject = where or "sessiond's data"
    if full:
        return ProtocolError(ErrorKind.STORAGE_FULL, f"disk full: {subject}", path=where)
    return ProtocolError(ErrorKind.STORAGE_ERROR, f"{subject}: {reason}", path=where)
