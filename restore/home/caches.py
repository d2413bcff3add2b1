"""The data directory's SQLite caches (the listing and search index, the import ledger):
what an error says about a cache file, and setting a damaged one aside.

Both files are derived from the thread files, so an error that says the file's contents
are wrong (malformed pages, a constraint its own triggers break, a table or column another
version left out, garbage where the header belongs) is mended by building the file again,
never shown to a person as a failure. An error that says nothing of the contents (busy,
locked, a full disk, an I/O or permission error) is not: rebuilding would not help, and it
reaches the client typed. A damaged file is kept beside the live one for a bug report;
only the newest `KEEP_ASIDE` such copies of each file are kept, so a file damaged again
and again cannot fill the disk.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

logger = logging.getLogger("sessiond.caches")

KEEP_ASIDE = 3
"""Damaged copies kept per cache file (with their WAL), newest first."""
SQLITE_FILES = ("", "-wal", "-shm")
"""A SQLite file and the files SQLite keeps beside it."""

REBUILD_HINT = "run `sessiond doctor --rebuild-index` to build it again from the thread files"
"""The mend a message names when a cache cannot be repaired on the spot."""

_CONTENT_ERRORS = (
    "SQLITE_NOTADB",
    "SQLITE_CORRUPT",
    "SQLITE_CONSTRAINT",
    "SQLITE_MISMATCH",
    "SQLITE_FORMAT",
)
"""What SQLite says when the file is not what this version wrote: not a database,
damaged pages, a constraint its triggers break, a value of another type."""
_SCHEMA_ERRORS = (
    "no such table",
    "no such column",
    "has no column named",
    "no such index",
    "columns but",
    "malformed",
    "vtable constructor failed",
)
"""SQLite's generic SQL error (SQLITE_ERROR) says the schema is another version's only
with these words: the same error code also answers a statement this version got wrong
(a full-text query's syntax error), which no rebuild would mend."""


class CacheContentError(Exception):
    """A cache's row could not be decoded: its contents are not what this version wrote."""


def decoded(decode: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`decode(*args, **kwargs)` of a cache's row: a row that cannot be decoded (JSON
    another version or a damaged page left) is the cache's fault, not the caller's."""
    try:
        return decode(*args, **kwargs)
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise CacheContentError(f"a row that cannot be read: {exc}") from exc


def content_fault(exc: BaseException) -> str | None:
    """What is wrong with the file, when `exc` says its contents are (None: it says
    nothing about them, or it is not a cache's error)."""
    if isinstance(exc, CacheContentError):
        return str(exc)
    if type(exc).__module__ != "sqlite3":  # sqlite3 is imported only once a cache opens
        return None
    name = getattr(exc, "sqlite_errorname", "")
    if name.startswith(_CONTENT_ERRORS):
        return str(exc) or name
    if name == "SQLITE_ERROR" and any(words in str(exc) for words in _SCHEMA_ERRORS):
        return str(exc)
    return None


def set_aside(path: Path, why: str) -> Path | None:
    """Move a damaged cache file (and its WAL) to `<name>.corrupt-<time>`, log one line
    saying so, and drop the oldest copies past `KEEP_ASIDE`. The copy's path (None: there
    was no file)."""
    aside = path.with_name(f"{path.name}.corrupt-{time.time_ns() // 1_000_000}")
    moved = False
    for suffix in SQLITE_FILES:
        source = path.with_name(path.name + suffix)
        if os.path.lexists(source):
            with contextlib.suppress(FileNotFoundError):  # another process moved it first
                os.replace(source, aside.with_name(aside.name + suffix))
                moved = moved or suffix == ""
    if not moved:
        return None
    logger.warning(
        "%s was damaged (%s): set aside as %s; rebuilding it from the thread files",
        path,
        why,
        aside.name,
    )
    _prune(path)
    return aside


def _prune(path: Path) -> None:
    prefix = f"{path.name}.corrupt-"
    copies: dict[str, list[Path]] = {}
    for entry in path.parent.iterdir():
        name = entry.name
        if not name.startswith(prefix):
            continue
        stamp = name[len(prefix) :]
        for suffix in SQLITE_FILES[1:]:
            stamp = stamp.removesuffix(suffix)
        copies.setdefault(stamp, []).append(entry)
    for stamp in sorted(copies, key=_age, reverse=True)[KEEP_ASIDE:]:
        for entry in copies[stamp]:
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()


def _age(stamp: str) -> int:
    """Older copies were stamped in seconds, newer in milliseconds: compared as ms."""
    try:
        value = int(stamp)
    except ValueError:
        return -1
    return value * 1000 if value < 10**11 else value
