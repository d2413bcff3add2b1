"""`sessiond/debug`: what the server process has loaded and opened, for tests and bench.

Registered only when the server starts with `SESSIOND_DEBUG=1`; it is not part of the
protocol. It exists so a test can prove the no-warmup rule (docs/architecture.md) from
outside the process: after `initialize`, no thread file, index, watcher or hook config is
loaded.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from restore.service import ThreadService
    from server.live.relay import Relay
    from server.worker import StoreWorker

METHOD = "sessiond/debug"


def report(
    service: ThreadService | None, hooks_created: bool, worker: StoreWorker, relay: Relay | None
) -> dict[str, Any]:
    """What the server made so far: `service` and `relay` are None until first used."""
    return {
        "pid": os.getpid(),
        "modules": sorted(sys.modules),
        "openFiles": _open_files(),
        "threadServiceCreated": service is not None,
        "hooksCreated": hooks_created,
        "storeWorker": {"hops": worker.hops, "commits": worker.commits},
        # Thread files the index has read (whole or from a row's end) in this process.
        "indexFilesRead": service.index.files_read if service is not None else 0,
        # Pages a shared store's relay read for followers (server/live/relay.py).
        "relayReads": relay.reads if relay is not None else 0,
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
