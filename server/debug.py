"""`sessiond/debug`: what the server process has loaded and opened, for tests and bench.

Registered only when the server starts with `SESSIOND_DEBUG=1`; it is not part of the
protocol. It exists so a test can prove the no-warmup rule from outside the process:
after `initialize`, no thread file, index, GitPython, watcher or hook config is loaded.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from server.app import SessiondServer
    from server.rpc.dispatch import SessiondProtocol

METHOD = "sessiond/debug"


def register_debug(connection: SessiondProtocol, server: SessiondServer) -> None:
    connection.methods[METHOD] = lambda params: report(server)


def report(server: SessiondServer) -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "modules": sorted(sys.modules),
        "openFiles": _open_files(),
        "threadServiceCreated": server._service is not None,
        "hooksCreated": server._hooks is not None,
        "storeWorker": {"hops": server.worker.hops, "commits": server.worker.commits},
        # Thread files the index has read (whole or from a row's end) in this process.
        "indexFilesRead": server._service.index.files_read if server._service else 0,
        # Pages a shared store's relay read for followers (server/live/relay.py).
        "relayReads": relay.reads if (relay := server.subscriptions.relay) is not None else 0,
    }


def _open_files() -> list[str]:
    """Targets of /proc/self/fd (Linux); empty where /proc is not available."""
    targets = []
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return []
    for fd in fds:
        try:
            targets.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue
    return sorted(targets)
