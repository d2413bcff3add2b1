"""Startup: spawn → `initialize` answer, sessiond against the floor of its own stack.

The floor is bench/floor_server.py, the smallest JSON-RPC server on sessiond's stack (the
interpreter, asyncio, orjson) that answers one request; both are timed in the same run,
interleaved (floor, sessiond, sessiond, floor, ...) so machine load hits both alike, and
the medians are compared. The target is sessiond within 1.3x the floor: anything more is
warmup (docs/architecture.md) and a bug.

Also reported: import costs (`python -X importtime`) of `asyncio`, and of `pygls.server`
and its `lsprotocol.types` — what sessiond paid on every spawn while it was built on pygls
(measured when pygls is installed) — and spawn → first `thread/list` page over 10,000
threads on disk, with the index missing (it is built by that request) and present.

    python -m bench.startup [--runs 20] [--threads 10000] [--output docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TARGET_RATIO = 1.3


class Peer:
    """A spawned server and a Content-Length client on its pipes."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=REPO,
            env={**os.environ, **(env or {}), "PYTHONPATH": str(REPO)},
        )
        self._ids = 0

    def request(self, method: str, params: dict[str, Any]) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._ids += 1
        body = json.dumps(
            {"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params}
        ).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()
        while True:
            length = 0
            while (header := self.proc.stdout.readline()) not in (b"\r\n", b"\n"):
                if not header:
                    raise ConnectionError(f"{method}: the server exited")
                name, _, value = header.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            message = json.loads(self.proc.stdout.read(length))
            if message.get("id") == self._ids:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


INITIALIZE = {"protocolVersion": 1, "clientInfo": {"name": "bench"}, "workspaceFolders": []}


def floor_argv() -> list[str]:
    return [sys.executable, "-m", "bench.floor_server"]


def sessiond_argv(home: Path) -> list[str]:
    return [sys.executable, "-m", "server.cli", "--home", str(home), "serve", "--stdio"]


def time_until(argv: list[str], work: Callable[[Peer], Any], env: dict[str, str]) -> float:
    """Seconds from spawn to the answer `work` waits for (the shutdown is not timed)."""
    began = time.perf_counter()
    peer = Peer(argv, env)
    try:
        work(peer)
        return time.perf_counter() - began
    finally:
        peer.close()


def initialize(peer: Peer) -> None:
    peer.request("initialize", INITIALIZE)


def first_page(peer: Peer) -> None:
    peer.request("initialize", INITIALIZE)
    threads = peer.request("thread/list", {"limit": 50})["threads"]
    assert len(threads) == 50, len(threads)


def interleaved(runs: int, home: Path) -> tuple[list[float], list[float]]:
    floor: list[float] = []
    sessiond: list[float] = []
    env = {"SESSIOND_DURABILITY": "none"}
    for run in range(runs):
        pair = [("floor", floor_argv()), ("sessiond", sessiond_argv(home))]
        for name, argv in pair if run % 2 == 0 else reversed(pair):
            (floor if name == "floor" else sessiond).append(time_until(argv, initialize, env))
    return floor, sessiond


def import_costs(repeat: int = 5) -> dict[str, float]:
    """Median cumulative import time (ms) of asyncio and, if installed, pygls.server."""
    samples: dict[str, list[float]] = {}
    for _ in range(repeat):
        result = subprocess.run(
            [sys.executable, "-X", "importtime", "-c",
             "import asyncio\ntry:\n import pygls.server\nexcept ImportError:\n pass"],
            capture_output=True,
            text=True,
            check=False,
        )  # fmt: skip
        for line in result.stderr.splitlines():
            parts = [part.strip() for part in line.removeprefix("import time:").split("|")]
            if len(parts) == 3 and parts[2] in ("pygls.server", "lsprotocol.types", "asyncio"):
                samples.setdefault(parts[2], []).append(int(parts[1]) / 1000)
    return {name: statistics.median(values) for name, values in samples.items()}


def bare_interpreter(repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def make_threads(home: Path, count: int) -> None:
    """`count` threads of one session and one message each, written by the store itself."""
    sys.path.insert(0, str(REPO))
    from restore.home.layout import Layout
    from restore.stores.api import Durability
    from restore.stores.embedded.files import ThreadStore

    store = ThreadStore(Layout(home), Durability.NONE)
    for n in range(count):
        thread_id, session_id = str(uuid.uuid4()), str(uuid.uuid4())
        meta = {
            "type": "session_meta",
            "id": str(uuid.uuid4()),
            "threadId": thread_id,
            "source": "startup",
            "reason": "user",
            "cwd": f"/work/project-{n % 20}",
        }
        writer = store.create(thread_id, session_id, meta)
        text = f"thread {n}: please look at the failing test"
        message = {"type": "message", "id": str(uuid.uuid4()), "role": "user", "content": text}
        writer.append([message], session_id)
        writer.close()


def list_timings(home: Path, runs: int) -> tuple[float, float]:
    """Medians of spawn → first thread/list page: index missing, then index present."""
    env = {"SESSIOND_DURABILITY": "none"}
    cold: list[float] = []
    warm: list[float] = []
    for _ in range(runs):
        for path in home.glob("index.sqlite3*"):  # the index and its WAL files
            path.unlink()
        cold.append(time_until(sessiond_argv(home), first_page, env))
        warm.append(time_until(sessiond_argv(home), first_page, env))
    return statistics.median(cold), statistics.median(warm)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}"


def report(args: argparse.Namespace) -> str:
    scratch = Path(tempfile.mkdtemp(prefix="sessiond-bench-"))
    try:
        empty_home = scratch / "empty"
        floor, sessiond = interleaved(args.runs, empty_home)
        floor_ms = statistics.median(floor) * 1000
        sessiond_ms = statistics.median(sessiond) * 1000
        ratio = sessiond_ms / floor_ms
        costs = import_costs()
        python_ms = bare_interpreter() * 1000
        big_home = scratch / "big"
        make_threads(big_home, args.threads)
        cold, warm = list_timings(big_home, args.list_runs)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    verdict = "within" if ratio <= TARGET_RATIO else "OVER"
    lines = [
        "## Startup (`python -m bench.startup`)",
        "",
        f"Machine: {machine()}; Python {platform.python_version()}; "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC. "
        f"Medians of {args.runs} interleaved runs.",
        "",
        "| spawn → answer | median ms |",
        "|---|---|",
        f"| floor: minimal asyncio JSON-RPC server, `initialize` | {floor_ms:.0f} |",
        f"| sessiond, `initialize` | {sessiond_ms:.0f} |",
        f"| **ratio** (target ≤ {TARGET_RATIO}x: {verdict}) | **{ratio:.2f}x** |",
        f"| sessiond, first `thread/list` page, {args.threads:,} threads, no index "
        f"(built by the request) | {cold * 1000:.0f} |",
        f"| sessiond, first `thread/list` page, {args.threads:,} threads, index present "
        f"| {warm * 1000:.0f} |",
        "",
        "Import costs (`python -X importtime`, cumulative, median of 5):",
        "",
        "| part | ms |",
        "|---|---|",
        f"| bare interpreter, spawn → exit (`python -c pass`) | {python_ms:.0f} |",
        f"| `import asyncio` (in the floor and in sessiond) | "
        f"{costs.get('asyncio', float('nan')):.0f} |",
        f"| `import pygls.server` (sessiond before issue 13; not imported now) | "
        f"{costs.get('pygls.server', float('nan')):.0f} |",
        f"| … of which `lsprotocol.types` | {costs.get('lsprotocol.types', float('nan')):.0f} |",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--list-runs", type=int, default=3)
    parser.add_argument("--output", type=Path, help="also write the table to this file")
    args = parser.parse_args()
    text = report(args)
    print(text)
    if args.output:
        args.output.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
