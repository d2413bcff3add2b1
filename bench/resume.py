"""Resume latency against thread length: snapshot + tail vs full replay, in one run.

    python -m bench.resume [--sizes 1000,10000,100000] [--runs 7]

Each thread lives in a real git repo (so the environment probe is real) and mixes the
item types an agent records. A run times `ThreadService.resume` only; between runs the
session is closed (which writes the snapshot), and for the full-replay baseline the
snapshot is deleted first. Reported: medians, the ratio of the largest size to the
smallest, and the speedup of snapshot over full replay at each size.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from restore.service import Settings, ThreadService, open_service
from restore.stores.api import Durability
from restore.stores.embedded import snapshots

BATCH = 1000


def _item(n: int) -> dict[str, Any]:
    kind = n % 20
    base: dict[str, Any] = {"id": str(uuid.uuid4()), "turnId": f"t{n // 10}"}
    if kind == 0:
        return {**base, "type": "cost", "model": "m", "inputTokens": 900, "outputTokens": 90,
                "usd": 0.01}  # fmt: skip
    if kind == 1:
        return {**base, "type": "operation", "operationId": f"op{n}", "tool": "shell",
                "effect": "side_effect", "state": "committed", "resultPersisted": True}  # fmt: skip
    if kind == 2:
        steps = [{"id": str(i), "content": f"step {i}", "status": "pending"} for i in range(5)]
        return {**base, "type": "todos", "items": steps}
    if kind == 3:
        return {**base, "type": "file_edit", "path": f"src/f{n % 50}.py", "beforeSha": None,
                "afterSha": "0" * 64, "author": "agent"}  # fmt: skip
    role = "user" if kind == 4 else "assistant"
    return {**base, "type": "message", "role": role, "content": "word " * 40}


def _make_thread(service: ThreadService, cwd: Path, size: int) -> str:
    started = service.start(cwd=str(cwd), workspace_folder=str(cwd))
    session = service.session_for(started.summary.threadId, started.session_id, "local")
    for first in range(0, size, BATCH):
        service.append(session, [_item(n) for n in range(first, min(size, first + BATCH))])
    service.close(started.summary.threadId, started.session_id)
    return started.summary.threadId


def _time_resume(service: ThreadService, thread_id: str, *, snapshot: bool) -> tuple[float, bool]:
    if not snapshot:
        snapshots.discard(service.layout, thread_id)
    began = time.perf_counter()
    report = service.resume(thread_id, cwd=None, accept_drift=False, message_limit=200)
    elapsed = time.perf_counter() - began
    service.close(thread_id, report["session"]["sessionId"])
    return elapsed, report["recovery"]["snapshotUsed"]


def run(sizes: list[int], runs: int) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        for args in (["init", "-q", "-b", "main"], ["-c", "user.email=b@b", "-c", "user.name=b",
                     "commit", "-q", "--allow-empty", "-m", "init"]):  # fmt: skip
            subprocess.run(["git", *args], cwd=repo, check=True)
        service = open_service(Settings(Path(tmp) / "home", durability=Durability.FSYNC))
        for size in sizes:
            thread_id = _make_thread(service, repo, size)
            _time_resume(service, thread_id, snapshot=True)  # warm the OS cache and imports
            timings: dict[bool, list[float]] = {True: [], False: []}
            for _ in range(runs):  # interleaved, so drift in the machine hits both alike
                for snapshot in (True, False):
                    elapsed, used = _time_resume(service, thread_id, snapshot=snapshot)
                    assert used is snapshot
                    timings[snapshot].append(elapsed)
            rows.append({
                "items": size,
                "snapshot_ms": statistics.median(timings[True]) * 1000,
                "replay_ms": statistics.median(timings[False]) * 1000,
            })  # fmt: skip
        service.close_all()
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    lines = ["| items | resume, snapshot + tail (median ms) | full replay (median ms) | "
             "replay / snapshot |", "|---:|---:|---:|---:|"]  # fmt: skip
    for row in rows:
        lines.append(f"| {row['items']:,} | {row['snapshot_ms']:.1f} | {row['replay_ms']:.1f} | "
                     f"{row['replay_ms'] / row['snapshot_ms']:.1f}x |")  # fmt: skip
    first, last = rows[0], rows[-1]
    lines.append("")
    lines.append(f"Snapshot resume at {last['items']:,} items costs "
                 f"{last['snapshot_ms'] / first['snapshot_ms']:.2f}x its cost at "
                 f"{first['items']:,} items (full replay: "
                 f"{last['replay_ms'] / first['replay_ms']:.1f}x).")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    print(render(run([int(s) for s in args.sizes.split(",")], args.runs)))


if __name__ == "__main__":
    main()
