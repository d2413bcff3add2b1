"""Following a thread another sessiond process writes: from B's record answer to the
`item/recorded` on A's follower, over the real pipes, both stores in one run.

    python -m bench.follow [--records 30]
    python -m bench.follow --visibility [--against CHECKOUT] [--records 30]

`--visibility`: PostgreSQL only, `team` beside `private` (docs/security.md: under
`private` a commit notifies its role's own channel), and with `--against` the `team`
figures of another checkout's sessiond (e.g. `git archive main`) as the baseline. Every
pair of processes is started first and the records go round them one by one
(interleaved), each on a database of its own; per record both what A's follower waits
for (`item/recorded`) and A's listing (`thread/updated` carrying the record) are timed.

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
from tests.support.rpc_client import REPO, ServerProcess


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


class _Pair:
    """A writer B and a follower A (own homes) on one database, with B's thread."""

    def __init__(self, root: Path, store_url: str, code: Path) -> None:
        def server(name: str) -> ServerProcess:
            home = root / name
            home.mkdir(parents=True)
            env = {"SESSIOND_STORE": store_url, "SESSIOND_DURABILITY": "group"}
            process = ServerProcess(home, env=env, code=code)
            process.initialize()
            return process

        self.a, self.b = server("a"), server("b")
        self.a.request("thread/list", {})  # A listens
        started = self.b.request("thread/start", {"cwd": str(root)})
        self.tid, self.sid = started["thread"]["threadId"], started["sessionId"]
        self.a.request("thread/subscribe", {"threadId": self.tid})

    def once(self, n: int) -> tuple[float, float]:
        """Record n (from 0) on B: seconds until A's follower has it, until A's listing
        does (`thread/updated` counting n + 1 items: nothing else is recorded)."""
        item: dict[str, Any] = {"type": "message", "id": str(uuid.uuid4()), "role": "user",
                                "content": f"record {n}"}  # fmt: skip
        start = len(self.a.notifications)  # what came before this record is not looked at
        self.b.request(
            "thread/record", {"threadId": self.tid, "sessionId": self.sid, "items": [item]}
        )
        answered = time.perf_counter()
        recorded = updated = None
        deadline = time.monotonic() + 60
        while recorded is None or updated is None:
            notes = self.a.notifications[start:]
            if recorded is None and any(i["id"] == item["id"] for m in notes
                                        if m["method"] == "item/recorded"
                                        for i in m["params"]["items"]):  # fmt: skip
                recorded = time.perf_counter() - answered
            if updated is None and any(m["method"] == "thread/updated"
                                       and m["params"]["thread"].get("itemCount", 0) > n
                                       for m in notes):  # fmt: skip
                updated = time.perf_counter() - answered
            if time.monotonic() > deadline:
                raise TimeoutError(f"record {n} never reached A")
            time.sleep(0.001)
        return recorded, updated

    def close(self) -> None:
        self.a.close()
        self.b.close()


def run_visibility(records: int, against: Path | None) -> dict[str, list[tuple[float, float]]]:
    """(item/recorded, thread/updated) latencies per variant, the baseline first."""
    variants: list[tuple[str, Path, str]] = []
    if against is not None:
        variants.append((f"team, {against.name} (baseline)", against, "team"))
    variants += [("team, this checkout", REPO, "team"), ("private, this checkout", REPO, "private")]
    with tempfile.TemporaryDirectory(prefix="sessiond-bench-visibility-") as tmp:
        cluster = pg_cluster.create(tempfile.mkdtemp(prefix="sessiond-bench-pg-"))
        pairs: list[_Pair] = []
        try:
            for index, (_, code, visibility) in enumerate(variants):
                url = cluster.url(pg_cluster.fresh_database(cluster.url()))
                pair = _Pair(Path(tmp) / str(index), url, code)
                pairs.append(pair)
                if visibility == "private":
                    import psycopg

                    with psycopg.connect(url, autocommit=True) as conn:
                        conn.execute("UPDATE sessiond_settings SET value = 'private' "
                                     "WHERE name = 'visibility'")  # fmt: skip
            time.sleep(1.0)  # every listener in place
            rows: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in variants}
            for n in range(records + 2):
                for (name, _, _), pair in zip(variants, pairs, strict=True):
                    timed = pair.once(n)
                    if n >= 2:  # the first two warm each side's reads up: not measured
                        rows[name].append(timed)
        finally:
            for pair in pairs:
                pair.close()
            pg_cluster.destroy(cluster.root)
    return rows


def render_visibility(rows: dict[str, list[tuple[float, float]]]) -> str:
    def median_ms(values: list[float]) -> float:
        return statistics.median(values) * 1000

    base = next(iter(rows.values()))
    lines = [
        "| PostgreSQL, writer B → A | records | `item/recorded` median ms | p90 ms "
        "| vs baseline | `thread/updated` median ms | vs baseline |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, timed in rows.items():
        recorded, updated = [t[0] for t in timed], [t[1] for t in timed]
        p90 = sorted(recorded)[int(0.9 * (len(recorded) - 1))] * 1000
        lines.append(
            f"| {name} | {len(timed)} | {median_ms(recorded):.1f} | {p90:.1f} "
            f"| {median_ms(recorded) / median_ms([t[0] for t in base]):.2f}x "
            f"| {median_ms(updated):.1f} "
            f"| {median_ms(updated) / median_ms([t[1] for t in base]):.2f}x |"
        )
    return "\n".join(lines)


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
    parser.add_argument(
        "--visibility",
        action="store_true",
        help="PostgreSQL team beside private (and --against's team)",
    )
    parser.add_argument("--against", type=Path, help="another checkout: its team baseline")
    args = parser.parse_args()
    if args.visibility:
        print(render_visibility(run_visibility(args.records, args.against)))
    else:
        print(render(run(args.records)))


if __name__ == "__main__":
    main()
