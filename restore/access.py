"""What a client-named path may touch: the one decision for every read, write, restore and
hash of a path that a client, or an item it recorded, names.

Why one module: the question "may sessiond touch this path for this thread?" used to be
answered in several places, differently (`fs/applyEdit` refused `../`, `thread/rewind` did
not, prompt sections read any file). Every caller now asks here:

- a path is a string without NUL, made absolute against the thread's cwd and resolved with
  `realpath`, so `..` and symlinks are followed *before* deciding, never after;
- it must lie inside the thread's workspace (its repo root, else its cwd, resolved too)
  and, when the client opened workspace folders, inside one of those as well: a symlink
  that leaves the workspace is refused like a `../` path (`OutsideWorkspace`);
- only regular files are read, hashed or replaced. A file is opened with `O_NONBLOCK` and
  `O_NOFOLLOW` and checked with `fstat` before a byte is read, so a FIFO, a device or a
  socket is refused at once (`InvalidParams`) instead of blocking the one store thread
  every client waits on.

A race (a symlink swapped in between the check and the use) stays possible for whoever can
write inside the workspace: the agent and the user, who may write there anyway.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from protocol.errors import ErrorKind, ProtocolError
from restore.home.files import write_atomically

TEXT_LIMIT = 4 << 20
"""Bytes of a file-backed prompt section read back on resume; a larger file is refused."""
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC


def checked_text(value: str, field: str = "path") -> str:
    """A client string that will name a path: non-empty and without NUL (InvalidParams)."""
    if not value or "\0" in value:
        raise ProtocolError(
            ErrorKind.INVALID_PARAMS, f"{field} must be a non-empty path without NUL", field=field
        )
    return value


def existing_directory(cwd: str, field: str = "cwd") -> str:
    """`thread/start`'s cwd: absolute, without NUL, an existing directory (InvalidParams).

    A relative cwd would be taken relative to wherever the server runs, and a missing one
    would make the thread `needs_review` at its first resume."""
    checked_text(cwd, field)
    if not os.path.isabs(cwd):
        raise ProtocolError(
            ErrorKind.INVALID_PARAMS, f"{field} must be an absolute path: {cwd!r}", field=field
        )
    if not os.path.isdir(cwd):
        raise ProtocolError(
            ErrorKind.INVALID_PARAMS, f"{field} is not an existing directory: {cwd}", field=field
        )
    return cwd


def is_inside(target: str, root: str) -> bool:
    """Both already resolved: `target` is `root` or below it."""
    return target == root or target.startswith(root.rstrip("/") + "/")


def folder_of(path: str, folders: Iterable[str]) -> str | None:
    """The innermost folder (as the client named it) holding `path`, judged on resolved
    paths: `TRUSTED/../UNTRUSTED` is not inside TRUSTED, whatever its spelling."""
    if not path or "\0" in path or not os.path.isabs(path):
        return None
    return folder_among(path, resolved_folders(folders))


def resolved_folders(folders: Iterable[str]) -> list[tuple[str, str]]:
    """Each usable folder as the client named it, with its resolved path: resolved once for
    many `folder_among` calls (a page of 50 threads and 20 folders: 20 realpaths, not
    1,000)."""
    return [
        (folder, os.path.realpath(folder))
        for folder in folders
        if folder and "\0" not in folder and os.path.isabs(folder)
    ]


def folder_among(path: str, folders: Iterable[tuple[str, str]]) -> str | None:
    """`folder_of`, the folders already resolved (`resolved_folders`)."""
    if not path or "\0" in path or not os.path.isabs(path):
        return None
    target = os.path.realpath(path)
    best: str | None = None
    best_length = -1
    for folder, root in folders:
        if is_inside(target, root) and len(root) > best_length:
            best, best_length = folder.rstrip("/") or "/", len(root)
    return best


def inside_any(path: str | None, folders: Iterable[str]) -> bool:
    return path is not None and folder_of(path, folders) is not None


@dataclass(frozen=True)
class Scope:
    """Where one thread's client-named paths may point.

    `workspace` is the resolved repo root (else cwd) the thread recorded; `cwd` anchors
    relative paths; `folders` are the resolved workspace folders of the client asking
    (None: it opened none, and only the thread's workspace bounds it)."""

    workspace: str | None
    cwd: str | None
    folders: tuple[str, ...] | None = None

    @classmethod
    def of_thread(cls, worktree: dict[str, object], folders: Iterable[str] = ()) -> Scope:
        cwd = worktree.get("cwd")
        cwd = cwd if isinstance(cwd, str) and os.path.isabs(cwd) and "\0" not in cwd else None
        root = worktree.get("repoRoot")
        root = root if isinstance(root, str) and os.path.isabs(root) and "\0" not in root else cwd
        opened = tuple(
            os.path.realpath(f) for f in folders if f and "\0" not in f and os.path.isabs(f)
        )
        return cls(os.path.realpath(root) if root else None, cwd, opened or None)

    def resolve(self, path: str) -> str:
        """The resolved absolute path, if the thread may touch it; OutsideWorkspace if not."""
        if not isinstance(path, str):
            raise ProtocolError(ErrorKind.INVALID_PARAMS, "path must be a string", path=path)
        checked_text(path)
        if self.workspace is None:
            raise ProtocolError(
                ErrorKind.OUTSIDE_WORKSPACE,
                f"{path}: the thread records no workspace, so no path is inside it",
                path=path,
            )
        if not os.path.isabs(path) and self.cwd is None:
            raise ProtocolError(
                ErrorKind.OUTSIDE_WORKSPACE, f"{path}: relative, and no cwd", path=path
            )
        target = os.path.realpath(os.path.join(self.cwd or "/", path))
        if not is_inside(target, self.workspace):
            raise ProtocolError(
                ErrorKind.OUTSIDE_WORKSPACE,
                f"{path} is outside the thread's workspace {self.workspace}",
                path=path,
                workspace=self.workspace,
            )
        if self.folders is not None and not any(is_inside(target, f) for f in self.folders):
            raise ProtocolError(
                ErrorKind.OUTSIDE_WORKSPACE,
                f"{path} is outside every workspace folder this client opened",
                path=path,
            )
        return target


# --- file access: regular files only -----------------------------------------------------


def _not_regular(path: str, what: str) -> ProtocolError:
    return ProtocolError(
        ErrorKind.INVALID_PARAMS, f"{path} is {what}, not a regular file", path=path
    )


def _kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


def _open_regular(path: str) -> int | None:
    """A read-only descriptor on a regular file, None if nothing is there; never blocks."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # replaced by a symlink since it was resolved
            raise _not_regular(path, "a symlink") from None
        if exc.errno in (errno.ENXIO, errno.EISDIR):  # a socket, or a directory opened RDONLY
            raise _not_regular(path, "a special file") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(path, _kind_of(mode))
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str, limit: int | None = None) -> bytes | None:
    """The bytes of a regular file (None: missing); larger than `limit` is InvalidParams."""
    fd = _open_regular(path)
    if fd is None:
        return None
    try:
        size = os.fstat(fd).st_size
        if limit is not None and size > limit:
            raise ProtocolError(
                ErrorKind.INVALID_PARAMS, f"{path} is larger than {limit} bytes", path=path
            )
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
            if limit is not None and sum(map(len, chunks)) > limit:  # grew while read
                raise ProtocolError(
                    ErrorKind.INVALID_PARAMS, f"{path} is larger than {limit} bytes", path=path
                )
        return b"".join(chunks)
    finally:
        os.close(fd)


def sha256_regular(path: str) -> str | None:
    """sha256 of a regular file, read in chunks (None: missing)."""
    fd = _open_regular(path)
    if fd is None:
        return None
    digest = hashlib.sha256()
    try:
        while chunk := os.read(fd, 1 << 20):
            digest.update(chunk)
    finally:
        os.close(fd)
    return digest.hexdigest()


def _existing_mode(path: str) -> int | None:
    """Permission bits of what is at `path` now (None: nothing); refuses non-regular files."""
    try:
        found = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISLNK(found.st_mode):
        raise _not_regular(path, "a symlink")
    if not stat.S_ISREG(found.st_mode):
        raise _not_regular(path, _kind_of(found.st_mode))
    return stat.S_IMODE(found.st_mode)


def replace_regular(path: str, data: bytes) -> None:
    """Replace (or create) a regular file atomically. An existing file keeps its permission
    bits; a new one gets what the process umask gives any new file (0666 minus umask)."""
    mode = _existing_mode(path)
    write_atomically(Path(path), data, 0o666 if mode is None else mode)
    if mode is not None:
        os.chmod(path, mode)  # exactly as before, whatever the umask took away


def remove_regular(path: str) -> None:
    """Remove a regular file if it is there; refuses anything else."""
    if _existing_mode(path) is not None:
        os.unlink(path)
