"""Peak resident memory (and time) of `sessiond export` on a 100,000-message thread.

    python -m bench.export [--messages N]

The thread is written by the store itself (a user and an assistant message a turn, a
tool call with its result every tenth turn, a turn's cost), then each format is exported
by a fresh `sessiond export` process; its peak RSS is the child's `ru_maxrss` from
wait4(2), the whole process from interpreter start to exit. The floor is `sessiond
--version` (the interpreter and sessiond's first import), and beside the export stands
`sessiond show --json`, which still reads the whole thread at once (`Store.read`): what
streaming page by page saves.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.rpc import REPO
from restore.service import Settings, open_service
from restore.stores.api import Durability

PASSPHRASE = "correct horse battery staple"


def write_thread(home: Path, messages: int) -> str:
    """A thread of `messages` messages (plus its calls and costs), through the store."""
    service = open_service(Settings(home, durability=Durability.NONE))
    started = service.start(cwd=str(home), workspace_folder=None)
    session = service.session_for(started.summary.threadId, started.session_id, "local")
    batch: list[dict[str, Any]] = []
    for turn in range(messages // 2):
        batch += [
            {"type": "message", "id": f"u{turn}", "role": "user",
             "content": f"turn {turn}: please look at the failing test " + "x" * 120},
            {"type": "message", "id": f"a{turn}", "role": "assistant",
             "content": f"Looked at it ({turn}). " + "The fix is in the rounding. " * 8},
            {"type": "cost", "id": f"k{turn}", "model": "claude-sonnet-4-5",
             "inputTokens": 1200, "outputTokens": 300, "usd": 0.0081},
        ]  # fmt: skip
        if turn % 10 == 0:
            batch += [
                {"type": "operation", "id": f"o{turn}", "operationId": f"run{turn}",
                 "tool": "shell", "effect": "side_effect", "state": "failed",
                 "command": "pytest -q", "exitCode": 1, "resultPersisted": True,
                 "result": "FAILED tests/test_pay.py::test_round\n" + "trace line\n" * 20},
            ]  # fmt: skip
        if len(batch) >= 900:
            service.append(session, batch)
            batch = []
    if batch:
        service.append(session, batch)
    service.close_all()
    return str(started.summary.threadId)


MEASURE = """
import os, sys
pid = os.fork()
if pid == 0:
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.execv(sys.executable, [sys.executable, "-m", "server.cli", *sys.argv[1:]])
_, status, usage = os.wait4(pid, 0)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""
"""Linux keeps a process's peak RSS across exec(2) from the memory it was forked with, so
a child forked by this (large) process would report at least this process's size: the
export is forked from a bare interpreter instead (~10 MiB, less than any sessiond process
reaches), which reports its child's `ru_maxrss`."""


def peak_of(argv: list[str], stdin: bytes | None = None) -> tuple[int, float]:
    """(peak RSS in KiB, seconds) of one `sessiond ARGV` process, from its own rusage."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", MEASURE, *argv], cwd=REPO, input=stdin,
                          capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)},
                          check=True)  # fmt: skip
    seconds = time.perf_counter() - start
    code, peak = done.stdout.split()
    assert code == b"0", done.stderr.decode()
    return int(peak), seconds


def export_peak(home: Path, thread_id: str, fmt: str, out: Path, *, encrypt: bool = False
                ) -> tuple[int, float]:  # fmt: skip
    argv = ["--home", str(home), "export", thread_id, "--format", fmt, "-o", str(out)]
    if encrypt:
        argv += ["--passphrase-file", "/dev/stdin"]
    return peak_of(argv, (PASSPHRASE + "\n").encode() if encrypt else None)


def run(messages: int = 100_000) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="sessiond-bench-export-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        start = time.perf_counter()
        thread_id = write_thread(home, messages)
        written = time.perf_counter() - start
        size = sum(p.stat().st_size for p in (home / "threads").rglob("*.jsonl"))
        rows.append({"what": f"thread written ({messages:,} messages, {size / 2**20:.0f} MiB "
                     "JSONL)", "peak": None, "seconds": written, "bytes": size})  # fmt: skip
        floor, secs = peak_of(["--version"])
        rows.append({"what": "floor: sessiond --version", "peak": floor, "seconds": secs,
                     "bytes": None})  # fmt: skip
        for fmt, encrypt in (("md", False), ("json", False), ("html", False), ("html", True)):
            out = Path(tmp) / f"{uuid.uuid4().hex}.{fmt}"
            peak, secs = export_peak(home, thread_id, fmt, out, encrypt=encrypt)
            label = f"export --format {fmt}" + (" --passphrase-file" if encrypt else "")
            rows.append({"what": label, "peak": peak, "seconds": secs,
                         "bytes": out.stat().st_size})  # fmt: skip
            out.unlink()
        peak, secs = peak_of(["--home", str(home), "show", thread_id])
        rows.append({"what": "show (the same walk, as text)", "peak": peak, "seconds": secs,
                     "bytes": None})  # fmt: skip
        peak, secs = peak_of(["--home", str(home), "show", thread_id, "--json"])
        rows.append({"what": "show --json (reads the thread whole)", "peak": peak,
                     "seconds": secs, "bytes": None})  # fmt: skip
    return rows


def report(rows: list[dict[str, Any]]) -> str:
    lines = ["| process | peak RSS | time | output |", "|---|---:|---:|---:|"]
    for row in rows:
        peak = "" if row["peak"] is None else f"{row['peak'] / 1024:.1f} MiB"
        out = "" if row["bytes"] is None else f"{row['bytes'] / 2**20:.1f} MiB"
        lines.append(f"| {row['what']} | {peak} | {row['seconds']:.1f} s | {out} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    args = parser.parse_args()
    print(report(run(args.messages)))


if __name__ == "__main__":
    main()
