"""Discovery lock files: how a local client finds a running server's socket and token.

Each WebSocket server writes `$SESSIOND_HOME/servers/<port>.json` (directory 0700, file
0600, replaced atomically so a reader never sees half a file) and removes it on exit,
with its Unix socket `<port>.sock` beside it. The token in it is the only credential a
WebSocket client needs, so the file is readable by its owner alone. A server killed with
SIGKILL leaves both behind: a file whose pid is not a live process **of this user** is
stale (server/transport/peers.py: another user may have been given the pid), ignored by
readers and removed, with its socket, by whoever finds it.

`servers/` must be a directory of this user's own, not a link: the server deletes stale
files in it and makes it 0700, which through a link would happen to whatever it leads to,
and records read through a link would be someone else's. Anything else there is refused
(StorageError naming it, and the mend), never followed or changed.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from protocol import PROTOCOL_VERSION
from protocol.errors import ErrorKind, ProtocolError
from restore.home.files import private_dirs, read_regular
from server.transport.peers import ours
from server.transport.proof import PROOF_NAME


def servers_dir(home: Path) -> Path:
    return home / "servers"


def checked_servers_dir(home: Path) -> Path:
    """`servers/` (which may not exist yet), once it is known to be a real directory of
    this user's; StorageError naming what it is instead, and the mend."""
    directory = servers_dir(home)
    try:
        info = os.lstat(directory)
    except FileNotFoundError:
        return directory
    except OSError as exc:
        what = f"cannot be read ({exc.strerror})"
        raise _refused(directory, what, "check its permissions") from exc
    if stat.S_ISLNK(info.st_mode):
        raise _refused(
            directory,
            "is a symbolic link",
            f"remove the link (rm {directory}); sessiond makes the directory itself",
        )
    if not stat.S_ISDIR(info.st_mode):
        raise _refused(directory, "is not a directory", f"move it away ({directory})")
    if info.st_uid != os.getuid():
        raise _refused(
            directory, f"belongs to uid {info.st_uid}, not to you", f"remove it ({directory})"
        )
    return directory


def _refused(directory: Path, what: str, mend: str) -> ProtocolError:
    return ProtocolError(
        ErrorKind.STORAGE_ERROR,
        f"{directory} {what}: sessiond keeps its servers' tokens and sockets in a private "
        f"directory of its own and will not use it; {mend}",
        path=str(directory),
    )


def pid_alive(pid: object) -> bool:
    """A live process of this user's (server/transport/peers.py `ours`)."""
    return ours(pid)


def socket_path(directory: Path, record: dict[str, Any]) -> Path | None:
    """The Unix socket a record names, inside `directory` (None: it names none, or
    something that is not a plain name there)."""
    name = record.get("socket")
    if not isinstance(name, str) or not name.endswith(".sock") or "/" in name or "\0" in name:
        return None
    if name.startswith("."):
        return None
    return directory / name


def _read(path: Path) -> dict[str, Any] | None:
    try:
        record = orjson.loads(read_regular(path))
    except (OSError, orjson.JSONDecodeError):
        return None
    return record if isinstance(record, dict) else None


def live_servers(home: Path) -> list[dict[str, Any]]:
    """Every running server's record, newest first; stale files are removed on the way
    (with the socket each names). StorageError if `servers/` is not ours to use."""
    directory = checked_servers_dir(home)
    if not directory.is_dir():
        return []
    found: list[tuple[float, dict[str, Any]]] = []
    for path in directory.glob("*.json"):
        record = _read(path)
        if record is None or not pid_alive(record.get("pid")):
            forget_socket(directory, record)
            with contextlib.suppress(OSError):
                path.unlink()
            continue
        with contextlib.suppress(OSError):
            found.append((path.stat().st_mtime, record))
    return [record for _, record in sorted(found, key=lambda pair: pair[0], reverse=True)]


def forget_socket(directory: Path, record: dict[str, Any] | None) -> None:
    """Remove the Unix socket a stale record names, if a socket is what is there."""
    path = socket_path(directory, record) if record is not None else None
    if path is None:
        return
    with contextlib.suppress(OSError):
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            path.unlink()


class LockFile:
    """One server's discovery file, rewritten when its clients' workspace folders change."""

    def __init__(
        self, home: Path, host: str, port: int, token: str, socket_name: str | None = None
    ) -> None:
        self.directory = checked_servers_dir(home)
        self.path = self.directory / f"{port}.json"
        self.record: dict[str, Any] = {
            "pid": os.getpid(),
            "host": host,
            "port": port,
            "url": f"ws://{host if ':' not in host else f'[{host}]'}:{port}",
            "token": token,
            "proof": PROOF_NAME,
            "workspaceFolders": [],
            "protocolVersion": PROTOCOL_VERSION,
        }
        if socket_name is not None:
            self.record["socket"] = socket_name
        self.removed = False

    def write(self, workspace_folders: Iterable[str] = ()) -> None:
        if self.removed:
            return
        checked_servers_dir(self.directory.parent)  # still no link (only we can change it)
        private_dirs(self.directory)  # and the data dir, 0700, if this server creates it
        os.chmod(self.directory, 0o700)
        self.record["workspaceFolders"] = list(workspace_folders)
        fd, temporary = tempfile.mkstemp(dir=self.directory, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:  # mkstemp creates the file 0600
                handle.write(orjson.dumps(self.record, option=orjson.OPT_INDENT_2))
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise

    def remove(self) -> None:
        """Remove the file if it is still ours (a later server may reuse the port); later
        writes do nothing, so a late folder change cannot bring it back."""
        self.removed = True
        record = _read(self.path)
        if record is not None and record.get("pid") == os.getpid():
            with contextlib.suppress(OSError):
                self.path.unlink()
