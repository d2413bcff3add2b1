"""`thread/list` at 1k/10k/100k threads: the SQLite index against a naive directory scan.

    python -m bench.listing [--sizes 1000,10000,100000]

The naive scan is what a store without an index does on every listing (and what makes
peers' pickers take 30+ seconds on big histories): read every thread file, summarize it,
filter, sort, page. Both answer the same query — the first page (50) of one workspace
folder's threads, newest first — and must return the same threads.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

from restore.home.layout import Layout
from restore.service import Settings, ThreadService, open_service
from restore.stores.api import Durability, ListFilters
from restore.stores.embedded.jsonl import parse_bytes
from restore.summary import summarize

FOLDERS = 20
PAGE = 50


def write_threads(layout: Layout, count: int) -> None:
    """Thread files in the documented format (docs/storage.md), written directly: fast."""
    for n in range(count):
        thread_id = str(uuid.uuid4())
        ts = f"2026-01-01T00:00:00.{n:06d}Z" if n < 1_000_000 else "2026-01-02T00:00:00.000000Z"
        session = str(uuid.uuid4())
        folder = f"/work/project-{n % FOLDERS}"
        lines = [
            {"v": 1, "seq": 1, "ts": ts, "type": "session_meta", "sessionId": session,
             "id": str(uuid.uuid4()), "threadId": thread_id, "source": "startup",
             "reason": "user", "cwd": folder, "workspaceFolder": folder, "branch": "main"},
            {"v": 1, "seq": 2, "ts": ts, "type": "message", "sessionId": session,
             "id": str(uuid.uuid4()), "role": "user", "content": f"thread {n}: fix the test"},
            {"v": 1, "seq": 3, "ts": ts, "type": "message", "sessionId": session,
             "id": str(uuid.uuid4()), "role": "assistant", "content": "done " * 50},
        ]  # fmt: skip
        path = layout.thread_path(thread_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))


def naive_scan(layout: Layout, folder: str) -> list[str]:
    rows = []
    for path, archived in layout.iter_thread_files():
        summary = summarize(path.stem, parse_bytes(path.read_bytes()).items, archived=archived)
        if summary.workspaceFolder == folder and not archived:
            rows.append(summary)
    rows.sort(key=lambda s: (s.updatedAt or "", s.threadId), reverse=True)
    return [s.threadId for s in rows[:PAGE]]


def indexed(service: ThreadService, folder: str) -> list[str]:
    threads, _ = service.list(ListFilters(workspace_folder=folder, limit=PAGE))
    return [t.threadId for t in threads]


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1000, p99 * 1000


def run(sizes: list[int]) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            layout = Layout(Path(tmp))
            write_threads(layout, size)
            service = open_service(Settings(layout.home, durability=Durability.NONE))
            began = time.perf_counter()
            service.index.ensure_ready()
            build_s = time.perf_counter() - began
            index_times, scan_times = [], []
            scan_runs = 20 if size <= 1000 else 5 if size <= 10_000 else 3
            for n in range(200):
                folder = f"/work/project-{n % FOLDERS}"
                began = time.perf_counter()
                fast = indexed(service, folder)
                index_times.append(time.perf_counter() - began)
                if n < scan_runs:
                    began = time.perf_counter()
                    slow = naive_scan(layout, folder)
                    scan_times.append(time.perf_counter() - began)
                    assert slow == fast, "the index and the scan disagree"
            service.close_all()
        index_p50, index_p99 = _percentiles(index_times)
        scan_p50, scan_p99 = _percentiles(scan_times)
        rows.append({"threads": size, "index_p50": index_p50, "index_p99": index_p99,
                     "scan_p50": scan_p50, "scan_p99": scan_p99, "build_s": build_s,
                     "index_runs": len(index_times), "scan_runs": len(scan_times)})  # fmt: skip
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| threads | index p50 / p99 (ms) | directory scan p50 / p99 (ms) | scan / index | "
        "index build (s) |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['threads']:,} | {r['index_p50']:.2f} / {r['index_p99']:.2f} | "
            f"{r['scan_p50']:.0f} / {r['scan_p99']:.0f} | {r['scan_p50'] / r['index_p50']:,.0f}x "
            f"| {r['build_s']:.1f} |"
        )
    first, last = rows[0], rows[-1]
    growth = last["index_p50"] / first["index_p50"]
    lines += ["", f"Index p50 at {last['threads']:,} threads is {growth:.2f}x its p50 at "
              f"{first['threads']:,}."]  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    args = parser.parse_args()
    print(render(run([int(s) for s in args.sizes.split(",")])))


if __name__ == "__main__":
    main()
