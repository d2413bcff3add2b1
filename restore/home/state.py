"""Whether the data directory can be used, and how: checked once, by the first request or
command that needs it (never at startup), so that a home that is a file, cannot be read or
cannot be created is one line a person can act on instead of a traceback per request.

A home that can be read but not written (a backup, another machine's data mounted
read-only) is not an error: it is served read-only, and `read_only` says why.
"""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from protocol.errors import ErrorKind, ProtocolError, storage_error
from restore.home.files import private_dirs

logger = logging.getLogger("sessiond.home")


@dataclass(frozen=True)
class Home:
    path: Path
    read_only: str | None = None
    """Why nothing can be written here ("mounted read-only", ...); None when writable."""

    def refuse_write(
        self, consequence: str = "threads can be listed, read and resumed as a report, not changed"
    ) -> ProtocolError:
        """The error every write gets on a read-only home: what, where, why, and what the
        user can still do."""
        return ProtocolError(
            ErrorKind.STORAGE_ERROR,
            f"the data directory {self.path} is read-only ({self.read_only}): {consequence}",
            path=str(self.path),
            readOnly=True,
        )


def open_home(path: Path) -> Home:
    """Check the data directory (creating it, 0700, when missing); StorageError otherwise."""
    try:
        info: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:  # a parent that is a file, or one we may not search
        raise storage_error(exc, path, "cannot use") from exc
    if info is None:
        try:
            private_dirs(path)  # 0700, and so is any missing parent it creates
        except OSError as exc:
            raise storage_error(exc, path, "cannot create") from exc
    elif not stat.S_ISDIR(info.st_mode):
        raise ProtocolError(ErrorKind.STORAGE_ERROR, f"{path} is not a directory", path=str(path))
    try:
        with os.scandir(path):
            pass
    except OSError as exc:
        raise storage_error(exc, path, "cannot read") from exc
    read_only = _read_only_reason(path)
    if info is not None and read_only is None:
        _close_to_others(path, info)
    return Home(path, read_only)


# What a data dir holds once sessiond has used it (layout.py, server/transport/discovery.py).
_OWN_ENTRIES = frozenset(
    {"threads", "archived", "index.sqlite3", "servers", "locks", "snapshots", "blobs"}
)


def _close_to_others(path: Path, info: os.stat_result) -> None:
    """A data dir that an older sessiond created under the umask (0755) leaves titles, cwds,
    first messages and blobs readable by every local user: it is made 0700 at first use
    (closing the top closes everything below), and the log warns of it. Only a directory this
    user owns that is sessiond's (it holds sessiond's entries, or nothing): `--home ~`
    must not re-mode a person's home directory."""
    mode = info.st_mode
    if not mode & 0o077 or info.st_uid != os.getuid():
        return
    names = set(os.listdir(path))
    if names and not names & _OWN_ENTRIES:
        return
    try:
        os.chmod(path, stat.S_IMODE(mode) & 0o700)
    except OSError as exc:
        logger.warning("the data directory %s stays %o: %s", path, stat.S_IMODE(mode), exc)
        return
    # An empty one (made by hand before the first use) exposed nothing: no need to say so.
    logger.log(
        logging.WARNING if names else logging.INFO,
        "made the data directory %s private (it was %o, readable by other users; now %o)",
        path,
        stat.S_IMODE(mode),
        stat.S_IMODE(mode) & 0o700,
    )


def _read_only_reason(path: Path) -> str | None:
    if os.statvfs(path).f_flag & os.ST_RDONLY:
        return "mounted read-only"
    if not os.access(path, os.W_OK | os.X_OK):
        return "not writable by this user"
    return None
