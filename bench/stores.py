"""The shared PostgreSQL store beside the embedded one, in the same run, over the pipe.

    python -m bench.stores [--threads 100000] [--items 100000] [--records 2000]

A throwaway PostgreSQL cluster (tests/support/pg_cluster.py: initdb + pg_ctl, Unix socket, fsync
on) is started for the run and removed after it. Each workload runs on both stores:
- record: items/s with group commit (8 threads, 32 records in flight), one sessiond
  process, and two at once (each streaming into its own threads, started together):
  each process's own rate, and the combined rate as a wall-clock aggregate (all items
  over the span from the first stream's start to the last one's end), never a sum of
  rates measured over different spans;
- list: `thread/list` p50/p99 of one workspace folder's first page at N threads, alone and
  while two other sessiond processes stream records;
- resume: a fresh process over the pipe, from spawn to the answer of `thread/resume` of an
  N-message thread (snapshot + tail), alone and while two other processes stream records.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from bench.record import server_throughput
from bench.rpc import PipelinedServer
from restore.home.layout import Layout
from restore.service import Settings, open_service
from restore.stores import open_store
from restore.stores.records import encode_line
from restore.summary import summarize
from tests.support import pg_cluster

FOLDERS = 20
PAGE = 50
LIST_RUNS = 200
RESUME_RUNS = 5


def _thread(n: int, folder: str, messages: int = 2) -> tuple[str, list[dict[str, Any]]]:
    thread_id, session = str(uuid.uuid4()), str(uuid.uuid4())
    ts = f"2026-01-01T00:00:{n // 1_000_000:02d}.{n % 1_000_000:06d}Z"
    items: list[dict[str, Any]] = [
        {"v": 1, "seq": 1, "ts": ts, "type": "session_meta", "sessionId": session,
         "id": str(uuid.uuid4()), "threadId": thread_id, "source": "startup", "reason": "user",
         "cwd": folder, "workspaceFolder": folder, "branch": "main"},
    ]  # fmt: skip
    for seq in range(2, messages + 2):
        role = "user" if seq == 2 else "assistant"
        content = f"thread {n}: fix the test" if seq == 2 else "done " * 30
        items.append({"v": 1, "seq": seq, "ts": ts, "type": "message", "sessionId": session,
                      "id": str(uuid.uuid4()), "role": role, "content": content})  # fmt: skip
    return thread_id, items


def _seed(
    store_url: str | None, home: Path, threads: list[tuple[str, list[dict[str, Any]]]]
) -> None:
    """Write threads in bulk: files directly, or COPY into the tables (not timed)."""
    if store_url is None:
        layout = Layout(home)
        for thread_id, items in threads:
            path = layout.thread_path(thread_id)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"".join(encode_line(item) for item in items))
        return
    import psycopg

    from restore.stores.postgres.rows import UPDATE_ROW, repo_binding, row_values

    store = open_store(Settings(home, store_url))
    store.index.count()  # connects, and so migrates
    store.close()
    with psycopg.connect(store_url) as conn, conn.cursor() as cur:
        with cur.copy("COPY sessiond_threads (thread_id) FROM STDIN") as copy:
            for thread_id, _ in threads:
                copy.write_row((thread_id,))
        with cur.copy("COPY sessiond_items (thread_id, seq, item_id, line) FROM STDIN") as copy:
            for thread_id, items in threads:
                for item in items:
                    copy.write_row(
                        (thread_id, item["seq"], item["id"], orjson.dumps(item).decode())
                    )
        rows = []
        for thread_id, items in threads:
            repo = next((b for i in items if (b := repo_binding(i))), (None, None))
            rows.append(row_values(summarize(thread_id, items), repo))
        cur.executemany(UPDATE_ROW, rows)
        cur.execute("ANALYZE")


def _env(store_url: str | None, durability: str = "group") -> dict[str, str]:
    return {"SESSIOND_DURABILITY": durability, "SESSIOND_DEBUG": "1",
            **({"SESSIOND_STORE": store_url} if store_url else {})}  # fmt: skip


@contextmanager
def _writers(store_url: str | None, home: Path, count: int):  # type: ignore[no-untyped-def]
    """`count` other sessiond processes streaming records until the block ends."""
    stop = threading.Event()
    done: list[int] = []
    failures: list[BaseException] = []

    def stream(n: int) -> None:
        try:
            written(n)
        except BaseException as exc:  # said after the block: a silent writer measures nothing
            failures.append(exc)

    def written(n: int) -> None:
        cwd = home.parent / f"elsewhere-{n}"  # thread/start needs an existing directory
        cwd.mkdir(exist_ok=True)
        server = PipelinedServer(home, _env(store_url))
        try:
            server.request("initialize", {"clientInfo": {"name": f"writer-{n}"}})
            started = server.request("thread/start", {"cwd": str(cwd)})
            session = {"threadId": started["thread"]["threadId"], "sessionId": started["sessionId"]}
            window, written = [], 0
            while not stop.is_set():
                items = [{"type": "message", "id": str(uuid.uuid4()), "role": "assistant",
                          "content": "x" * 150}]  # fmt: skip
                window.append(server.send("thread/record", {**session, "items": items}))
                if len(window) >= 8:
                    window.pop(0).result(timeout=600)
                    written += 1
            for future in window:
                future.result(timeout=600)
            done.append(written)
        finally:
            server.close()

    threads = [threading.Thread(target=stream, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    time.sleep(1.0)  # streaming before the measurement begins
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    if failures:
        raise RuntimeError(f"a writer process failed: {failures[0]!r}")
    if len(done) != count or not all(done):
        raise RuntimeError(f"writers wrote {done} records: nothing ran beside the measurement")


def records(store_url: str | None, root: Path, count: int, processes: int) -> dict[str, Any]:
    """Items/s with group commit of `processes` sessiond processes writing at once: each
    one's rate over its own stream, and all items over the wall-clock span of all streams
    (`combined`), with how much of that span they overlapped (`overlap`, 1.0 = fully)."""
    results: list[dict[str, Any]] = []
    together = threading.Barrier(processes)  # every stream starts once all are ready
    env = {"SESSIOND_STORE": store_url} if store_url else {}

    def one(n: int) -> None:
        home = root / f"rec-{processes}-{n}"  # two machines: two homes, as on one database
        home = home if store_url else root / f"rec-{processes}-shared"  # one data dir
        home.mkdir(parents=True, exist_ok=True)
        results.append(server_throughput(home, "group", count, 32, env=env, ready=together.wait))

    threads = [threading.Thread(target=one, args=(n,)) for n in range(processes)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if len(results) != processes:
        raise RuntimeError("a recording process failed")
    span = max(r["ended"] for r in results) - min(r["began"] for r in results)
    overlap = min(r["ended"] for r in results) - max(r["began"] for r in results)
    return {
        "each": [r["per_second"] for r in results],
        "combined": sum(r["items"] for r in results) / span,
        "overlap": max(overlap, 0.0) / span,
    }


def listing(store_url: str | None, home: Path, writers: int) -> tuple[float, float]:
    server = PipelinedServer(home, _env(store_url))
    try:
        server.request("initialize", {"clientInfo": {"name": "bench"}})
        server.request("thread/list", {"workspaceFolder": "/work/project-0", "limit": PAGE})
        with _writers(store_url, home, writers):
            server.latencies.clear()
            for n in range(LIST_RUNS):
                page = server.request("thread/list", {
                    "workspaceFolder": f"/work/project-{n % FOLDERS}", "limit": PAGE})  # fmt: skip
                assert len(page["threads"]) == PAGE
            samples = sorted(server.latencies)
    finally:
        server.close()
    return statistics.median(samples) * 1000, samples[round(0.99 * (len(samples) - 1))] * 1000


def resume(store_url: str | None, home: Path, thread_id: str, writers: int) -> float:
    """Median ms from spawn to the resume answer, in a fresh process each time."""
    timings = []
    with _writers(store_url, home, writers):
        for _ in range(RESUME_RUNS):
            began = time.perf_counter()
            server = PipelinedServer(home, _env(store_url, "fsync"))
            try:
                server.request("initialize", {"clientInfo": {"name": "bench"}})
                report = server.request("thread/resume", {"threadId": thread_id,
                                                          "messageLimit": 50})  # fmt: skip
                timings.append(time.perf_counter() - began)
                assert report["status"] == "ready", report["environment"]["drift"]
                assert report["recovery"]["snapshotUsed"], report["recovery"]
                session = report["session"]["sessionId"]
                server.request("thread/close", {"threadId": thread_id, "sessionId": session})
            finally:
                server.close()
    return statistics.median(timings) * 1000


def run(threads: int, items: int, record_count: int) -> dict[str, Any]:
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="sessiond-bench-") as tmp:
        root = Path(tmp)
        cluster = pg_cluster.create(tempfile.mkdtemp(prefix="sessiond-bench-pg-"))
        try:
            admin = cluster.url()
            for name in ("embedded", "postgres"):
                url = None if name == "embedded" else cluster.url(pg_cluster.fresh_database(admin))
                home = root / name
                home.mkdir()
                many = [_thread(n, f"/work/project-{n % FOLDERS}") for n in range(threads)]
                long_id, long_items = _thread(threads, "/work/long", messages=items)
                _seed(url, home, [*many, (long_id, long_items)])
                # the long thread's snapshot, as a clean close leaves it (not timed)
                service = open_service(Settings(home, url))
                report = service.resume(long_id, cwd="/", accept_drift=True, message_limit=1)
                service.close(long_id, report["session"]["sessionId"])
                service.close_all()
                row: dict[str, Any] = {}
                row["records_1"] = records(url, root / f"{name}-records", record_count, 1)
                row["records_2"] = records(url, root / f"{name}-records", record_count, 2)
                row["list_1"] = listing(url, home, 0)
                row["list_2"] = listing(url, home, 2)
                row["resume_1"] = resume(url, home, long_id, 0)
                row["resume_2"] = resume(url, home, long_id, 2)
                rows[name] = row
        finally:
            pg_cluster.destroy(cluster.root)
    return {"threads": threads, "items": items, "records": record_count, "rows": rows}


def render(result: dict[str, Any]) -> str:
    rows = result["rows"]
    embedded, postgres = rows["embedded"], rows["postgres"]

    def ratio(key: str, field: str | None = None) -> str:
        a, b = embedded[key], postgres[key]
        a, b = (a[field], b[field]) if field else (a, b)
        return f"{b / a:.2f}x"

    def each(row: dict[str, Any]) -> str:
        return " / ".join(f"{rate:,.0f}" for rate in row["each"])

    lines = [
        f"Same run, same machine; PostgreSQL 15 on a Unix socket (fsync on), threads "
        f"{result['threads']:,}, long thread {result['items']:,} messages. "
        '"+2 writers": two other sessiond processes stream records meanwhile.',
        "",
        "| workload | embedded | PostgreSQL | PostgreSQL / embedded |",
        "|---|---:|---:|---:|",
        f"| records/s, group commit, 1 process | {embedded['records_1']['combined']:,.0f} | "
        f"{postgres['records_1']['combined']:,.0f} | {ratio('records_1', 'combined')} |",
        f"| records/s, 2 processes at once: each process | {each(embedded['records_2'])} | "
        f"{each(postgres['records_2'])} | |",
        f"| records/s, 2 processes at once: combined (all items / wall time; overlap "
        f"{embedded['records_2']['overlap']:.0%} / {postgres['records_2']['overlap']:.0%}) | "
        f"{embedded['records_2']['combined']:,.0f} | {postgres['records_2']['combined']:,.0f} | "
        f"{ratio('records_2', 'combined')} |",
    ]
    for key, label in (("list_1", "alone"), ("list_2", "+2 writers")):
        e, p = embedded[key], postgres[key]
        lines.append(
            f"| thread/list p50 / p99 ms at {result['threads']:,} threads, {label} | "
            f"{e[0]:.2f} / {e[1]:.2f} | {p[0]:.2f} / {p[1]:.2f} | {p[0] / e[0]:.2f}x |"
        )
    for key, label in (("resume_1", "alone"), ("resume_2", "+2 writers")):
        lines.append(
            f"| resume of the {result['items']:,}-message thread, spawn → answer ms, "
            f"{label} | {embedded[key]:.0f} | {postgres[key]:.0f} | {ratio(key)} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=100_000)
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--records", type=int, default=2000)
    args = parser.parse_args()
    print(render(run(args.threads, args.items, args.records)))


if __name__ == "__main__":
    main()
