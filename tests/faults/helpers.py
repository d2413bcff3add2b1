"""Small helpers shared by the fault tests: items, paths, and the `sessiond` command."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.rpc_client import REPO, ServerProcess

Spawn = Callable[..., ServerProcess]
PR_CAPBSET_DROP = 24


def message(text: str, role: str = "user") -> dict[str, Any]:
    return {"type": "message", "id": str(uuid.uuid4()), "role": role, "content": text}


def thread_file(home: Path, thread_id: str) -> Path:
    return home / "threads" / thread_id[:2] / f"{thread_id}.jsonl"


def start(server: ServerProcess, cwd: Path | str, **extra: Any) -> tuple[str, str]:
    Path(cwd).mkdir(parents=True, exist_ok=True)  # thread/start needs an existing directory
    result = server.request("thread/start", {"cwd": str(cwd), **extra})
    return result["thread"]["threadId"], result["sessionId"]


def record(server: ServerProcess, tid: str, sid: str, *items: dict[str, Any]) -> dict[str, Any]:
    for item in items:
        item.setdefault("id", str(uuid.uuid4()))
    return server.request(
        "thread/record", {"threadId": tid, "sessionId": sid, "items": list(items)}
    )


def subsystem(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in report["subsystems"] if s["name"] == name)


def list_all(server: ServerProcess, **filters: Any) -> list[dict[str, Any]]:
    return server.request("thread/list", {"limit": 200, **filters})["threads"]


def as_ordinary_user() -> None:
    """preexec_fn: a server that file permissions bind. Root keeps its uid but loses the
    capabilities that bypass them (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), so a mode-000
    directory is unreadable to it as to any user; for other users this changes nothing."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):
        if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def sessiond(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The `sessiond` command line as its own process, on the test's data dir."""
    return subprocess.run(
        [sys.executable, "-m", "server.cli", "--home", str(home), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
