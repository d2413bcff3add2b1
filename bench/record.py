"""Record throughput and acknowledgement latency per durability mode, against the disk.

    python -m bench.record [--records 2000] [--in-flight 32]

The baseline is the raw limit of this disk measured in the same run: a loop of one small
write + fsync (and + fdatasync) on a file in the same directory. A server in `fsync` mode
cannot beat it (one sync per record); `group` commit shares one fdatasync among all
records that arrive while the previous sync runs, so under concurrency it may exceed it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.rpc import PipelinedServer

MODES = ("fsync", "group", "none")
THREADS = 8
RAW_SYNCS = 2000  # ~0.2 s a sample: shorter samples swing by 2x on a shared virtual disk
ROUNDS = 3


def raw_sync_limit(directory: Path, syncs: int, sync: Any) -> float:
    """Small write + sync operations per second on this disk."""
    path = directory / "raw.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        line = b'{"v":1,"seq":1,"type":"message","content":"' + b"x" * 150 + b'"}\n'
        began = time.perf_counter()
        for _ in range(syncs):
            os.write(fd, line)
            sync(fd)
        return syncs / (time.perf_counter() - began)
    finally:
        os.close(fd)
        path.unlink()


def server_throughput(
    home: Path,
    mode: str,
    records: int,
    in_flight: int,
    per_record: int = 1,
    threads: int = THREADS,
    *,
    env: dict[str, str] | None = None,
    ready: Callable[[], object] | None = None,
    texts: Sequence[str] | None = None,
    site: Path | None = None,
) -> dict[str, Any]:
    """One server's record rate; `ready` is called once its threads are started, right
    before the timed stream (several servers measured at once wait for each other there).
    `began`/`ended` (perf_counter) let a caller compute a wall-clock aggregate. `texts`:
    the items' contents in turn (bench/redaction.py: ordinary text), else 150 x's. `site`:
    another checkout's server (bench/rpc.py)."""
    env = {"SESSIOND_DURABILITY": mode, "SESSIOND_DEBUG": "1", **(env or {})}
    server = PipelinedServer(home, env, site)
    try:
        server.request("initialize", {"clientInfo": {"name": "bench"}})
        sessions = []
        for _ in range(threads):
            started = server.request("thread/start", {"cwd": str(home)})
            sessions.append((started["thread"]["threadId"], started["sessionId"]))
        if ready is not None:
            ready()
        server.latencies.clear()
        window = []
        began = time.perf_counter()
        for n in range(records):
            thread_id, session_id = sessions[n % threads]
            content = texts[n % len(texts)] if texts else "x" * 150
            items = [{"type": "message", "id": str(uuid.uuid4()), "role": "assistant",
                      "content": content} for _ in range(per_record)]  # fmt: skip
            window.append(server.send("thread/record", {
                "threadId": thread_id, "sessionId": session_id, "items": items}))  # fmt: skip
            if len(window) >= in_flight:
                window.pop(0).result(timeout=600)
        for future in window:
            future.result(timeout=600)
        ended = time.perf_counter()
        elapsed = ended - began
        latencies = sorted(server.latencies)
        worker = server.request("sessiond/debug", {})["storeWorker"]
    finally:
        server.close()
    return {
        "mode": mode
        + (f", {per_record} items per record" if per_record > 1 else "")
        + (f", {threads} thread{'s' if threads > 1 else ''}" if threads != THREADS else ""),
        "per_second": records * per_record / elapsed,
        "items": records * per_record,
        "began": began,
        "ended": ended,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[round(0.99 * (len(latencies) - 1))] * 1000,
        "per_hop": records / max(worker["hops"], 1),
        "per_commit": records / worker["commits"] if worker["commits"] else None,
    }


def run(records: int, in_flight: int, rounds: int = ROUNDS) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(dir=os.environ.get("SESSIOND_BENCH_DIR")) as tmp:
        directory = Path(tmp)
        # This (virtual) disk's sync rate swings by up to 2x from one second to the next,
        # so the raw limit is sampled before every server run, every workload runs in
        # several rounds interleaved with the others, and medians are reported.
        fsync_limits, fdatasync_limits = [], []
        runs: dict[str, list[dict[str, Any]]] = {}
        for round_ in range(rounds):
            for mode in MODES:
                fsync_limits.append(raw_sync_limit(directory, RAW_SYNCS, os.fsync))
                fdatasync_limits.append(raw_sync_limit(directory, RAW_SYNCS, os.fdatasync))
                home = directory / f"{mode}-{round_}"
                runs.setdefault(mode, []).append(server_throughput(home, mode, records, in_flight))
            # One agent streaming into one thread: every record waits for the same file.
            home = directory / f"one-thread-{round_}"
            single = server_throughput(home, "group", records, in_flight, threads=1)
            runs.setdefault(single["mode"], []).append(single)
            # A harness usually records a turn's items together: the same load, batched.
            home = directory / f"batched-{round_}"
            batched = server_throughput(home, "group", records // 4, in_flight, 16)
            runs.setdefault(batched["mode"], []).append(batched)
    return {
        "fsync_limit": statistics.median(fsync_limits),
        "fdatasync_limit": statistics.median(fdatasync_limits),
        "rounds": rounds,
        "modes": [_median_run(mode_runs) for mode_runs in runs.values()],
    }


def _median_run(mode_runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each measure's median over the rounds (the throughput's spread kept beside it)."""
    merged: dict[str, Any] = {"mode": mode_runs[0]["mode"]}
    for key in ("per_second", "p50_ms", "p99_ms", "per_hop", "per_commit"):
        values = [r[key] for r in mode_runs if r[key] is not None]
        merged[key] = statistics.median(values) if values else None
    merged["per_second_range"] = (
        min(r["per_second"] for r in mode_runs),
        max(r["per_second"] for r in mode_runs),
    )
    return merged


def render(result: dict[str, Any], in_flight: int) -> str:
    raw = result["fsync_limit"]
    lines = [
        f"Raw disk limit, same run: {raw:,.0f} write+fsync/s, "
        f"{result['fdatasync_limit']:,.0f} write+fdatasync/s (medians of "
        f"{result['rounds'] * len(MODES)} samples of {RAW_SYNCS:,} syncs, one before each "
        f"server run). Server: {THREADS} threads, {in_flight} records in flight, one item per "
        f"record unless said; medians of {result['rounds']} rounds, the items/s range beside.",
        "",
        "| durability | items/s (range) | vs raw fsync limit | ack p50 (ms) | ack p99 (ms) "
        "| records per store hop | records per group commit |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for mode in result["modes"]:
        per_commit = f"{mode['per_commit']:.1f}" if mode["per_commit"] else "—"
        low, high = mode["per_second_range"]
        lines.append(
            f"| {mode['mode']} | {mode['per_second']:,.0f} ({low:,.0f} to {high:,.0f}) "
            f"| {mode['per_second'] / raw:.0%} | "
            f"{mode['p50_ms']:.1f} | {mode['p99_ms']:.1f} | {mode['per_hop']:.1f} | {per_commit} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--in-flight", type=int, default=32)
    args = parser.parse_args()
    print(render(run(args.records, args.in_flight), args.in_flight))


if __name__ == "__main__":
    main()
