"""The `sessiond` command line on a real data dir written by a real server."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.rpc_client import REPO, ServerProcess


def sessiond(home: Path, *args: str, stderr: int | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "server.cli", "--home", str(home), *args],
        cwd=REPO,
        capture_output=stderr is None,
        stderr=stderr,
        stdout=subprocess.PIPE if stderr is not None else None,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def test_list_and_show_print_what_the_server_recorded(
    spawn: Callable[..., ServerProcess], home: Path, tmp_path: Path
) -> None:
    server = spawn()
    server.initialize()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    started = server.request("thread/start", {"cwd": str(tmp_path / "a"), "title": "Alpha"})
    tid, sid = started["thread"]["threadId"], started["sessionId"]
    server.request(
        "thread/record",
        {
            "threadId": tid,
            "sessionId": sid,
            "items": [
                {"type": "message", "id": "m1", "role": "user", "content": "fix the payment bug"}
            ],
        },
    )
    server.request("thread/start", {"cwd": str(tmp_path / "b"), "title": "Beta"})
    server.shutdown()

    listed = sessiond(home, "list", "--cwd", str(tmp_path / "a"), "--json")
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["threadId"], r["title"], r["itemCount"]) for r in rows] == [(tid, "Alpha", 1)]
    shown = sessiond(home, "show", tid)
    assert "fix the payment bug" in shown.stdout and "session_meta" in shown.stdout
    missing = sessiond(home, "show", "../etc/passwd")
    assert missing.returncode == 2 and "InvalidId" in missing.stderr


def test_doctor_draws_a_progress_bar_on_a_terminal(
    spawn: Callable[..., ServerProcess], home: Path, tmp_path: Path
) -> None:
    server = spawn()
    server.initialize()
    for _ in range(3):
        server.request("thread/start", {"cwd": str(tmp_path)})
    server.shutdown()
    leader, follower = pty.openpty()
    try:
        done = sessiond(home, "doctor", stderr=follower)
        os.close(follower)
        follower = -1
        drawn = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(leader)
        if follower != -1:
            os.close(follower)
    assert done.returncode == 0, done.stdout
    assert "checked 3 thread files" in done.stdout and "clean" in done.stdout
    assert b"Checking thread files" in drawn and b"3/3" in drawn
