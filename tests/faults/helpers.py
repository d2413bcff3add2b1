"""Small helpers shared by the fault tests: items, paths, and the `sessiond` command."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.rpc_client import REPO, ServerProcess

Spawn = Callable[..., ServerProcess]


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


def sessiond(
    home: Path, *args: str, prefix: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The `sessiond` command line as its own process, on the test's data dir (`prefix`:
    a confinement to run it under, tests/support/confine.py)."""
    return subprocess.run(
        [*(prefix or []), sys.executable, "-m", "server.cli", "--home", str(home), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
