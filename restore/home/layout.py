"""Where things live on disk, derived from ids alone (so resume never needs the index)."""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from restore.ids import validate_thread_id

logger = logging.getLogger("sessiond.paths")
_MISSING = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)


def default_home() -> Path:
    """`$SESSIOND_HOME`, else `$XDG_STATE_HOME/sessiond`, else `~/.local/state/sessiond`.
    Set but empty (`SESSIOND_HOME=$UNSET sessiond ...`) is a mistake, not the default:
    ValueError, before any other home is touched."""
    if (home := os.environ.get("SESSIOND_HOME")) is not None:
        if not home.strip():
            raise ValueError(
                "SESSIOND_HOME is set but empty: name a directory, or unset it for the "
                "default ($XDG_STATE_HOME/sessiond or ~/.local/state/sessiond)"
            )
        return Path(home)
    if xdg := os.environ.get("XDG_STATE_HOME"):
        return Path(xdg) / "sessiond"
    return Path.home() / ".local" / "state" / "sessiond"


@dataclass(frozen=True)
class Layout:
    """The data directory: `threads/`, `archived/`, `index.sqlite3`, `recovered/`, ..."""

    home: Path

    @property
    def threads_dir(self) -> Path:
        return self.home / "threads"

    @property
    def archived_dir(self) -> Path:
        return self.home / "archived"

    @property
    def recovered_dir(self) -> Path:
        """Torn tails are copied here before the live file is truncated."""
        return self.home / "recovered"

    @property
    def snapshots_dir(self) -> Path:
        return self.home / "snapshots"

    @property
    def blobs_dir(self) -> Path:
        return self.home / "blobs"

    def snapshot_path(self, thread_id: str) -> Path:
        return self.snapshots_dir / thread_id[:2] / f"{thread_id}.json"

    def offsets_path(self, thread_id: str) -> Path:
        """The thread's seq → byte offset map (stores/embedded/offsets.py), by its snapshot."""
        return self.snapshots_dir / thread_id[:2] / f"{thread_id}.offsets"

    def blob_path(self, sha: str) -> Path:
        return self.blobs_dir / sha[:2] / sha

    @property
    def writers_dir(self) -> Path:
        """Writer marks (stores/embedded/marks.py): the threads being written, or whose
        writer died before their index row was written."""
        return self.home / "writers"

    def writer_mark_path(self, thread_id: str) -> Path:
        return self.writers_dir / thread_id

    @property
    def locks_dir(self) -> Path:
        """Holders' names of parked writers (stores/embedded/files.py), the index build's
        lock, session keys' locks (stores/embedded/keylocks.py)."""
        return self.home / "locks"

    @property
    def key_locks_dir(self) -> Path:
        """Session keys' locks, a byte of one of 64 files each (stores/embedded/keylocks.py)."""
        return self.locks_dir / "keys"

    @property
    def claims_dir(self) -> Path:
        """The threads open writers hold, a byte-range lock each (stores/embedded/claims.py)."""
        return self.home / "claims"

    @property
    def index_path(self) -> Path:
        return self.home / "index.sqlite3"

    @property
    def index_lock_path(self) -> Path:
        """Held (flock) while a process builds the index: one build at a time, and the
        others open what it built (stores/embedded/index.py)."""
        return self.home / "locks" / "index.build"

    @property
    def import_ledger_path(self) -> Path:
        """Where imported sources were left (a cache of the threads' checkpoints)."""
        return self.home / "imports.sqlite3"

    def thread_path(self, thread_id: str, *, archived: bool = False) -> Path:
        return Path(self.thread_file(thread_id, archived=archived))

    def thread_file(self, thread_id: str, *, archived: bool = False) -> str:
        """Where a thread's file is (`threads_dir` or `archived_dir`, a shard of its id's
        first two characters), as a string: for a stat where no path object is wanted (an
        import asks for thousands of missing threads; a watcher looks at each file
        written). `thread_id` must be validated already."""
        base = "archived" if archived else "threads"
        return f"{self.home}/{base}/{thread_id[:2]}/{thread_id}.jsonl"

    def locate(self, thread_id: str) -> tuple[Path, bool] | None:
        """The live or archived file of a thread and whether it is archived; None if neither."""
        thread_id = validate_thread_id(thread_id)
        for archived in (False, True):
            # A string and a stat first; a Path only for the file found.
            try:
                os.stat(self.thread_file(thread_id, archived=archived))
            except OSError as exc:
                if exc.errno in _MISSING:  # as Path.exists: any other error is raised
                    continue
                raise
            return self.thread_path(thread_id, archived=archived), archived
        return None

    def iter_thread_files(self) -> list[tuple[Path, bool]]:
        """Every thread file on disk with its archived flag (a directory scan: index repair)."""
        return [(Path(path), archived) for path, archived, _ in self.scan_thread_files()]

    def scan_thread_files(
        self, shards: Collection[str] | None = None
    ) -> list[tuple[str, bool, os.stat_result]]:
        """Every thread file as (path, archived, stat), without building Path objects:
        the index reconciles 100k files with this (after a reboot, or when rebuilt).
        `shards`: only those shard directories (a thread's first two characters)."""
        found: list[tuple[str, bool, os.stat_result]] = []
        for archived, base in ((False, self.threads_dir), (True, self.archived_dir)):
            if not base.is_dir():
                continue
            for shard in _entries(base):
                if shards is not None and shard.name not in shards:
                    continue
                if not shard.is_dir(follow_symlinks=False):
                    continue
                for entry in _entries(Path(shard.path)):
                    if entry.name.endswith(".jsonl"):
                        try:
                            found.append((entry.path, archived, entry.stat()))
                        except OSError:
                            continue  # removed while scanning, or not ours to read
        return found

    def shard_times(self) -> dict[str, int]:
        """Each shard directory's mtime (ns), as `threads/ab`: a file created, removed or
        renamed in a shard changes it, an append does not (writer marks cover those)."""
        times: dict[str, int] = {}
        for base in (self.threads_dir, self.archived_dir):
            for shard in _entries(base) if base.is_dir() else []:
                try:
                    if shard.is_dir(follow_symlinks=False):
                        times[f"{base.name}/{shard.name}"] = shard.stat().st_mtime_ns
                except OSError:
                    continue
        return times


def _entries(directory: Path) -> list[os.DirEntry[str]]:
    """A directory's entries; an unreadable one is skipped with a warning, so one bad shard
    never hides the other threads (`sessiond doctor` reports it)."""
    try:
        with os.scandir(directory) as entries:
            return list(entries)
    except OSError as exc:
        logger.warning("skipping %s while listing threads: %s", directory, exc.strerror)
        return []
