"""Many open sessions: what parking idle writers' files costs, and what it allows.

    python -m bench.open_sessions [--baseline DIR] [--rounds 10] [--sessions 20000]

First the cost per record, in-process (`ThreadService.record` in a loop, so the machine's
other load moves the figures less than a server's threads would): process CPU µs per record
into 8 open sessions (the common case: nothing is parked), and round-robin into 1,000 open
sessions with 120 files kept open (every record takes a parked file back and parks
another). With `--baseline DIR` (a checkout, e.g. `git worktree add DIR main`) the same
loops run there too, alternated round by round, and the ratio is given. The data dir is in
/dev/shm when there is one: the syncs are the disk's, not what is measured.

Then the journey this was built for: one server under `ulimit -n 1024` (git off PATH: a
thread/start's git probe would be most of its cost) starts `--sessions` threads and keeps
them open, records into each, and shuts down, each step pipelined (48 in flight).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parent.parent
LIMIT = 1024
WINDOW = 48

_LOOP = """
import sys, tempfile, time, uuid
from pathlib import Path
from restore.service import Settings, open_service
from restore.stores.api import Durability
mode, records, sessions, base = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
home = Path(tempfile.mkdtemp(dir=base)) / "home"
service = open_service(Settings(home, durability=Durability(mode)))
open_ = []
for _ in range(sessions):
    started = service.start(cwd=base, workspace_folder=None)
    open_.append((started.summary.threadId, started.session_id))
items = [[{"type": "message", "id": str(uuid.uuid4()), "role": "assistant", "content": "x" * 150}]
         for _ in range(records)]
began = time.process_time()
for n in range(records):
    thread_id, session_id = open_[n % sessions]
    service.record(thread_id, session_id, items[n], defer_sync=mode == "group")
    if mode == "group" and n % 32 == 31 and (sync := service.begin_commit()) is not None:
        sync()
print((time.process_time() - began) / records * 1e6)
service.close_all()
"""


def scratch() -> str:
    shm = Path("/dev/shm")
    return (
        str(shm)
        if shm.is_dir() and shutil.disk_usage(shm).free > 1 << 30
        else tempfile.gettempdir()
    )


def loop_cpu(code: Path, mode: str, records: int, sessions: int) -> float:
    """CPU µs per record of one in-process loop run by the checkout at `code`."""
    base = tempfile.mkdtemp(dir=scratch(), prefix="sessiond-bench-")
    try:
        out = subprocess.run(
            [sys.executable, "-c", _LOOP, mode, str(records), str(sessions), base],
            cwd=code, env={**os.environ, "PYTHONPATH": str(code), "SESSIOND_OPEN_THREADS": "120"},
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        return float(out.stdout.split()[0])
    finally:
        shutil.rmtree(base, ignore_errors=True)


LOOPS = [("none", 20_000, 8), ("group", 20_000, 8), ("none", 10_000, 1000), ("group", 10_000, 1000)]


def record_costs(baseline: Path | None, rounds: int) -> str:
    codes = {"this": REPO, **({"baseline": baseline} if baseline else {})}
    found: dict[tuple[str, int, str], list[float]] = {}
    for round_ in range(rounds):
        order = list(codes.items())
        for name, code in order if round_ % 2 == 0 else reversed(order):
            for mode, records, sessions in LOOPS:
                cpu = loop_cpu(code, mode, records, sessions)
                found.setdefault((mode, sessions, name), []).append(cpu)
    lines = [
        "| durability | open sessions | CPU µs/record, this (range) | baseline (range) "
        "| this / baseline |",
        "|---|---:|---:|---:|---:|",
    ]
    for mode, _, sessions in LOOPS:
        this = found[(mode, sessions, "this")]
        cells = [f"{statistics.median(this):.2f} ({min(this):.2f}-{max(this):.2f})"]
        if baseline is not None:
            base = found[(mode, sessions, "baseline")]
            ratio = statistics.median(this) / statistics.median(base)
            cells += [f"{statistics.median(base):.2f} ({min(base):.2f}-{max(base):.2f})",
                      f"{ratio:.3f}"]  # fmt: skip
        else:
            cells += ["—", "—"]
        lines.append(f"| {mode} | {sessions:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


class Pipe:
    """A server under `ulimit -n LIMIT`, newline framing, `WINDOW` requests in flight."""

    def __init__(self, home: Path, env: dict[str, str]) -> None:
        limit = ("import os, resource, sys; "
                 f"resource.setrlimit(resource.RLIMIT_NOFILE, ({LIMIT}, {LIMIT})); "
                 "os.execv(sys.argv[1], sys.argv[1:])")  # fmt: skip
        self.proc = subprocess.Popen(
            [sys.executable, "-c", limit, sys.executable, "-m", "server.cli", "--home",
             str(home), "serve", "--stdio"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO), **env},
        )  # fmt: skip
        self._ids = iter(range(1, 1 << 62))

    def _send(self, method: str, params: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        message = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
        self.proc.stdin.write(orjson.dumps(message) + b"\n")
        self.proc.stdin.flush()

    def _answer(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while True:
            message: dict[str, Any] = orjson.loads(self.proc.stdout.readline())
            if message.get("id") is not None:
                if "error" in message:
                    raise RuntimeError(message["error"])
                return message

    def calls(self, calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[Any], float]:
        """Every call's result in order (answers come in request order), and the seconds."""
        began, results, waiting = time.perf_counter(), [], deque[None]()
        for method, params in calls:
            if len(waiting) >= WINDOW:
                waiting.popleft()
                results.append(self._answer()["result"])
            self._send(method, params)
            waiting.append(None)
        results += [self._answer()["result"] for _ in waiting]
        return results, time.perf_counter() - began

    def shutdown(self) -> float:
        began = time.perf_counter()
        self.calls([("shutdown", {})])
        assert self.proc.stdin is not None
        self.proc.stdin.write(b'{"jsonrpc":"2.0","method":"exit"}\n')
        self.proc.stdin.close()
        self.proc.wait(timeout=600)
        return time.perf_counter() - began


def journey(sessions: int) -> str:
    base = Path(tempfile.mkdtemp(dir=scratch(), prefix="sessiond-bench-"))
    try:
        (base / "no-git").mkdir()
        (base / "work").mkdir()
        env = {"SESSIOND_DURABILITY": "group", "PATH": str(base / "no-git")}
        server = Pipe(base / "home", env)
        try:
            server.calls([("initialize", {"clientInfo": {"name": "bench"}})])
            started, start_s = server.calls(
                [("thread/start", {"cwd": str(base / "work")})] * sessions
            )
            records = [("thread/record", {"threadId": s["thread"]["threadId"],
                        "sessionId": s["sessionId"], "items": [{"type": "message",
                        "id": str(uuid.uuid4()), "role": "user", "content": "hello"}]})
                       for s in started]  # fmt: skip
            _, record_s = server.calls(records)
            shutdown_s = server.shutdown()
        finally:
            if server.proc.poll() is None:
                server.proc.kill()
                server.proc.wait()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    rows = [
        ("thread/start, every session left open", start_s),
        ("one record into each, in start order (each file taken back)", record_s),
        ("shutdown: each session's end record and snapshot", shutdown_s),
    ]
    lines = [f"| under `ulimit -n {LIMIT}`, {sessions:,} sessions | seconds | per session (ms) |",
             "|---|---:|---:|"]  # fmt: skip
    lines += [f"| {what} | {secs:.1f} | {secs / sessions * 1000:.2f} |" for what, secs in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="a checkout to compare the loops with")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--sessions", type=int, default=20_000)
    args = parser.parse_args()
    print(record_costs(args.baseline, args.rounds))
    print()
    print(journey(args.sessions))


if __name__ == "__main__":
    main()
