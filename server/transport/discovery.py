"""Discovery lock files: how a local client finds a running server's port and token.

Each WebSocket server writes `$SESSIOND_HOME/servers/<port>.json` (directory 0700, file
0600, replaced atomically so a reader never sees half a file) and removes it on exit. The
token in it is the only credential a WebSocket client needs, so the file is readable by
its owner alone. A server killed with SIGKILL leaves its file behind: a file whose pid is
not alive is stale, ignored by readers and removed by whoever finds it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from protocol import PROTOCOL_VERSION
from restore.home.files import private_dirs, read_regular


def servers_dir(home: Path) -> Path:
    return home / "servers"


def pid_alive(pid: object) -> bool:
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, owned by someone else
    return True


def _read(path: Path) -> dict[str, Any] | None:
    try:
        record = orjson.loads(read_regular(path))
    except (OSError, orjson.JSONDecodeError):
        return None
    return record if isinstance(record, dict) else None


def live_servers(home: Path) -> list[dict[str, Any]]:
    """Every running server's record, newest first; stale files are removed on the way."""
    directory = servers_dir(home)
    if not directory.is_dir():
        return []
    found: list[tuple[float, dict[str, Any]]] = []
    for path in directory.glob("*.json"):
        record = _read(path)
        if record is None or not pid_alive(record.get("pid")):
            with contextlib.suppress(OSError):
                path.unlink()
            continue
        with contextlib.suppress(OSError):
            found.append((path.stat().st_mtime, record))
    return [record for _, record in sorted(found, key=lambda pair: pair[0], reverse=True)]


class LockFile:
    """One server's discovery file, rewritten when its clients' workspace folders change."""

    def __init__(self, home: Path, host: str, port: int, token: str) -> None:
        self.directory = servers_dir(home)
        self.path = self.directory / f"{port}.json"
        self.record: dict[str, Any] = {
            "pid": os.getpid(),
            "host": host,
            "port": port,
            "url": f"ws://{host if ':' not in host else f'[{host}]'}:{port}",
            "token": token,
            "workspaceFolders": [],
            "protocolVersion": PROTOCOL_VERSION,
        }
        self.removed = False

    def write(self, workspace_folders: Iterable[str] = ()) -> None:
        if self.removed:
            return
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
