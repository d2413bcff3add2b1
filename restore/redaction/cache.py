"""What redaction derives from its rules, kept between processes: the user's own cache
(`$XDG_CACHE_HOME/sessiond`, else `~/.cache/sessiond`), a 0700 folder of 0600 files named
by a digest of what made them. A file is read only from a private folder and only when
private itself (a Hyperscan database is code for Hyperscan to run; translated rules are
patterns every record is matched against), written whole or not at all (a concurrent
reader sees the old file or the new one), and only the newest few of a kind are kept.
Disposable: a missing, foreign or damaged file is made again."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

KEPT = 8
"""Files of one kind kept (a home's own patterns make its own): the newest."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "sessiond"


def _private(path: Path) -> bool:
    """Ours, and writable by no one else."""
    info = path.stat(follow_symlinks=False)
    return info.st_uid == os.getuid() and not info.st_mode & 0o022


def read(name: str) -> bytes | None:
    """The cached file `name`, or None (absent, not private, unreadable)."""
    folder = cache_dir()
    path = folder / name
    try:
        if _private(folder) and _private(path):
            return path.read_bytes()
    except OSError:
        pass
    return None


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def write(name: str, data: bytes, kind: str) -> None:
    """Keep `data` as `name`; of the files matching the glob `kind`, the newest KEPT stay.
    Failing quietly: without a cache the next process derives it again."""
    folder = cache_dir()
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _private(folder):
            return
        made = folder / f".{name}.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(made, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(made, folder / name)
        except OSError:
            made.unlink(missing_ok=True)  # a full disk leaves no half-written file behind
            raise
        for old in sorted(folder.glob(kind), key=_mtime)[:-KEPT]:
            old.unlink(missing_ok=True)
    except OSError:
        pass
