"""Following a thread another sessiond process writes: from B's record answer to the
`item/recorded` on A's follower, over the real pipes, both stores in one run.

    python -m bench.follow [--records 30]

Baseline: the embedded store, two processes on one data dir (the file watcher says the
thread changed, server/live/watch.py, and the relay reads the items after the last one sent,
server/live/relay.py). Against it: PostgreSQL, two processes with their own
homes on one database (LISTEN/NOTIFY, then the relay reads the rows, server/live/relay.py).
A throwaway cluster (tests/support/pg_cluster.py) is started for the run and removed after it.
Records are spaced (one at a time, each waited for), so each latency is one append's.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from tests.support import pg_cluster
from tests.support.rpc_client import ServerProcess


def _latencies(root: Path, store_url: str | None, records: int) -> list[float]:
    def server(name: str) -> ServerProcess:
        home = root / (name if store_url else "shared")
        home.mkdir(exist_ok=True)
        env = {"SESSIOND_STORE": store_url} if store_url else {}
        process = ServerProcess(home, env={"SESSIOND_DURABILITY": "group", **env})
        process.initialize()
        return process

    a, b = server("a"), server("b")
    try:
        b.request("thread/list", {})
        started = b.request("thread/start", {"cwd": str(root)})
        tid, sid = started["thread"]["threadId"], started["sessionId"]
        a.request("thread/subscribe", {"threadId": tid})
        time.sleep(1.0)  # both listeners in place before the first record
        out = []
        for n in range(records + 2):
            item: dict[str, Any] = {"type": "message", "id": str(uuid.uuid4()), "role": "user",
                                    "content": f"record {n}"}  # fmt: skip
            b.request("thread/record", {"threadId": tid, "sessionId": sid, "items": [item]})
            answered = time.perf_counter()
            if n < 2:
                # Warm-up, not measured: each side's first read of the thread (its page
                # map, the relay's first page) is not what a follower waits for after.
                time.sleep(1.0)
                continue
            _wait_for(a, item["id"])
            out.append(time.perf_counter() - answered)
        return out
    finally:
        a.close()
        b.close()


def _wait_for(server: ServerProcess, item_id: str) -> None:
    """Until an `item/recorded` carries the item (polled every millisecond; 60 s at most)."""
    deadline = time.monotonic() + 60
    while not any(i["id"] == item_id for n in list(server.notifications)
                  if n["method"] == "item/recorded" for i in n["params"]["items"]):  # fmt: skip
        if time.monotonic() > deadline:
            raise TimeoutError(f"item {item_id} never reached the follower")
        time.sleep(0.001)


def run(records: int) -> dict[str, list[float]]:
    """Latencies (seconds) per store, the embedded baseline first."""
    with tempfile.TemporaryDirectory(prefix="sessiond-bench-follow-") as tmp:
        cluster = pg_cluster.create(tempfile.mkdtemp(prefix="sessiond-bench-pg-"))
        try:
            url = cluster.url(pg_cluster.fresh_database(cluster.url()))
            rows = {}
            for name, store in (("embedded (baseline)", None), ("postgresql", url)):
                root = Path(tmp) / name.split()[0]
                root.mkdir()
                rows[name] = _latencies(root, store, records)
        finally:
            pg_cluster.destroy(cluster.root)
    return rows


def render(rows: dict[str, list[float]]) -> str:
    base = statistics.median(rows["embedded (baseline)"])
    lines = [
        "| follower on A, writer on B: record answered → `item/recorded` | records | median ms "
        "| p90 ms | median vs baseline |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, values in rows.items():
        ordered = sorted(values)
        p90 = ordered[int(0.9 * (len(ordered) - 1))]
        median = statistics.median(values)
        lines.append(f"| {name} | {len(values)} | {median * 1000:.0f} | {p90 * 1000:.0f} "
                     f"| {median / base:.2f}x |")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=30)
    args = parser.parse_args()
    print(render(run(args.records)))


if __name__ == "__main__":
    main()
