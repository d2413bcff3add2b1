"""A client that searches to hold the others (issue 34): while hostile clients run 200-hit,
16-word searches over 100,000-character records, how long does another client of the same
server wait for its `thread/record` and `thread/list`?

    python -m bench.search_load [--records 250] [--seconds 20] [--hostile 2]
                                [--stores embedded,postgres] [--code DIR]

Per store (a throwaway PostgreSQL cluster for the shared one: tests/support/pg_cluster.py),
`--records` records of 100,000 characters are stored first (in-process, not timed), each
full of near misses of the query's words (`parsers`, `tokenize`…: a word's start, not the
word) with the 16 words themselves at its end: the worst a snippet can be asked to do;
the embedded store's search index is built then too (as records arriving over time build
it: the first search after an upgrade, which builds it a budget at a time, is not what is
measured here).
Then one `sessiond serve --ws 0` (group commit) and, over its WebSocket, for `--seconds`:

- `--hostile` clients, each searching the 16 words, 200 hits a page, paging on with the
  cursor and starting over, one request after another;
- one other client recording a 600-character message into its own thread and listing
  its workspace's threads (50 a page), in turn, 20 ms apart: each request timed from send
  to answer, p50 / p99 / max.

The same other client alone first (no hostile client: the floor of this machine), then
with them. `--code DIR` runs another checkout's server (the design before: a baseline).
Target (issue 34): the other client's p99 under 100 ms for both methods, on both stores.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

from restore.service import Settings, open_service  # noqa: E402
from tests.support import pg_cluster  # noqa: E402
from tests.support.ws_client import WsClient, wait_for_record  # noqa: E402

WORDS = ["parser", "token", "buffer", "socket", "thread", "commit", "branch", "cursor",
         "schema", "index", "render", "signal", "stream", "window", "widget", "vector"]  # fmt: skip
QUERY = " ".join(WORDS)
CHARS = 100_000
GAP = 0.02
"""Seconds the other client waits between two of its requests (a person's editor, not a
flood of its own)."""


def hostile_text(n: int) -> str:
    """100,000 characters of near misses (each word's start inside a longer word), the
    16 words at the end: every candidate a snippet could look at, then the matches."""
    near = " ".join(f"{word}{suffix}" for word in WORDS for suffix in ("s", "ize", "ed", "ing"))
    body = f"record {n}: " + (near + " ") * (CHARS // (len(near) + 1) + 1)
    tail = " " + " ".join(WORDS)
    return body[: CHARS - len(tail)] + tail


def seed(home: Path, url: str | None, records: int, cwd: str) -> None:
    """`records` hostile records in 10 threads, stored through the service (not timed)."""
    service = open_service(Settings(home, url))
    try:
        per_thread = max(1, records // 10)
        made = 0
        while made < records:
            started = service.start(cwd=cwd, workspace_folder=cwd)
            count = min(per_thread, records - made)
            items = [{"type": "message", "id": str(uuid.uuid4()), "role": "user",
                      "content": hostile_text(made + k)} for k in range(count)]  # fmt: skip
            for at in range(0, len(items), 10):
                service.record(started.summary.threadId, started.session_id, items[at : at + 10])
            service.close(started.summary.threadId, started.session_id)
            made += count
        service.flush_index()
        service.search(QUERY, limit=1, budget=None)  # the embedded index built, as in use
    finally:
        service.close_all()
        service.store.close()


class Server:
    """`sessiond serve --ws 0` of `code`, on `home` (and the shared store `url`)."""

    def __init__(self, home: Path, url: str | None, code: Path) -> None:
        env = {**os.environ, "SESSIOND_DURABILITY": "group", "PYTHONPATH": str(code)}
        if url is not None:
            env["SESSIOND_STORE"] = url
        self.log = open(home.parent / f"server-{home.name}.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "server.cli", "--home", str(home), "serve", "--ws", "0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log,
            cwd=code, env=env,
        )  # fmt: skip
        self.record = wait_for_record(home, self.proc.pid)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def _summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    if not ordered:
        return {"n": 0, "p50": float("nan"), "p99": float("nan"), "max": float("nan")}
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"n": len(ordered), "p50": statistics.median(ordered) * 1000, "p99": p99 * 1000,
            "max": ordered[-1] * 1000}  # fmt: skip


async def _call(client: WsClient, method: str, params: dict[str, Any]) -> Any:
    """The answer, however long it takes (the design before held requests for minutes:
    that wait is the measurement, not a failure)."""
    reply = await (await client.start_request(method, params))
    if "error" in reply:
        raise RuntimeError(f"{method}: {reply['error']}")
    return reply["result"]


async def _other_client(record: dict[str, Any], cwd: str, until: float) -> dict[str, Any]:
    """Record and list in turn until `until`; each request's latency, by method."""
    client = await WsClient.open(record, name="other", folders=[cwd])
    began = time.perf_counter()
    started = await _call(client, "thread/start", {"cwd": cwd})
    start_ms = (time.perf_counter() - began) * 1000
    thread_id, session_id = started["thread"]["threadId"], started["sessionId"]
    latencies: dict[str, list[float]] = {"thread/record": [], "thread/list": []}
    text = ("the other client's message, short and plain " * 14)[:600]
    try:
        while time.monotonic() < until:
            item = {"type": "message", "id": str(uuid.uuid4()), "role": "user", "content": text}
            for method, params in (
                ("thread/record", {"threadId": thread_id, "sessionId": session_id,
                                   "items": [item]}),
                ("thread/list", {"workspaceFolder": cwd, "limit": 50}),
            ):  # fmt: skip
                began = time.perf_counter()
                await _call(client, method, params)
                latencies[method].append(time.perf_counter() - began)
                await asyncio.sleep(GAP)
    finally:
        await client.close()
    answer: dict[str, Any] = {method: _summary(s) for method, s in latencies.items()}
    answer["thread/start"] = start_ms
    return answer


async def _hostile(record: dict[str, Any], until: float, searches: list[float],
                   partial: list[bool]) -> None:  # fmt: skip
    client = await WsClient.open(record, name="hostile")
    cursor = None
    try:
        while time.monotonic() < until:
            params: dict[str, Any] = {"query": QUERY, "limit": 200}
            if cursor is not None:
                params["cursor"] = cursor
            began = time.perf_counter()
            answer = await _call(client, "thread/search", params)
            searches.append(time.perf_counter() - began)
            partial.append(bool(answer["partial"]))
            cursor = answer["nextCursor"]
    except (ConnectionError, TimeoutError):
        pass
    finally:
        await client.close()


async def measure(record: dict[str, Any], cwd: str, seconds: float, hostile: int) -> dict[str, Any]:
    until = time.monotonic() + seconds
    searches: list[float] = []
    partial: list[bool] = []
    tasks = [asyncio.create_task(_hostile(record, until, searches, partial))
             for _ in range(hostile)]  # fmt: skip
    if hostile:
        await asyncio.sleep(0.5)  # the hostile searches under way first
    other = await _other_client(record, cwd, until)
    await asyncio.gather(*tasks)
    return {"other": other, "searches": _summary(searches),
            "partial": sum(partial), "pages": len(partial)}  # fmt: skip


def run_store(name: str, url: str | None, root: Path, args: argparse.Namespace) -> dict[str, Any]:
    home = root / name
    home.mkdir()
    cwd = str(root / "work")
    os.makedirs(cwd, exist_ok=True)
    began = time.perf_counter()
    seed(home, url, args.records, cwd)
    seeded = time.perf_counter() - began
    server = Server(home, url, Path(args.code))
    try:
        alone = asyncio.run(measure(server.record, cwd, args.seconds / 2, 0))
        loaded = asyncio.run(measure(server.record, cwd, args.seconds, args.hostile))
    finally:
        server.close()
    return {"seeded": seeded, "alone": alone, "loaded": loaded}


def render(result: dict[str, Any]) -> str:
    lines = [
        f"{result['records']} records of {CHARS:,} characters, {result['hostile']} hostile "
        f"clients (200 hits, 16 words, paging), {result['seconds']:g} s, load "
        f"{result['load'][0]:.1f} to {result['load'][1]:.1f}, server from {result['code']}",
        "",
        "| store | other client | alone p50 / p99 / max ms | under the searches p50 / p99 / max "
        "ms | requests |",
        "|---|---|---:|---:|---:|",
    ]
    for name, row in result["stores"].items():
        for method in ("thread/record", "thread/list"):
            a, b = row["alone"]["other"][method], row["loaded"]["other"][method]
            lines.append(
                f"| {name} | `{method}` | {a['p50']:.1f} / {a['p99']:.1f} / {a['max']:.1f} | "
                f"{b['p50']:.1f} / {b['p99']:.1f} / {b['max']:.1f} | {b['n']} |"
            )
    lines.append("")
    for name, row in result["stores"].items():
        s = row["loaded"]["searches"]
        lines.append(
            f"- {name}: the other client's `thread/start` took "
            f"{row['alone']['other']['thread/start']:.0f} ms alone, "
            f"{row['loaded']['other']['thread/start']:.0f} ms under the searches"
        )
        lines.append(
            f"- {name}: the hostile pages took p50 {s['p50']:.0f} ms, p99 {s['p99']:.0f} ms, "
            f"max {s['max']:.0f} ms ({row['loaded']['pages']} pages, "
            f"{row['loaded']['partial']} partial); seeding {row['seeded']:.0f} s"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=250)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--hostile", type=int, default=2)
    parser.add_argument("--stores", default="embedded,postgres")
    parser.add_argument("--code", default=str(REPO), help="the checkout whose server runs")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    result: dict[str, Any] = {"records": args.records, "hostile": args.hostile,
                              "seconds": args.seconds, "code": args.code,
                              "stores": {}}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="sessiond-bench-") as tmp:
        root = Path(tmp)
        cluster = None
        try:
            for name in args.stores.split(","):
                url = None
                if name == "postgres":
                    if cluster is None:
                        cluster = pg_cluster.create(tempfile.mkdtemp(prefix="sessiond-bench-pg-"))
                    url = cluster.url(pg_cluster.fresh_database(cluster.url()))
                result["stores"][name] = run_store(name, url, root, args)
                print(f"{name}: done", file=sys.stderr, flush=True)
        finally:
            if cluster is not None:
                pg_cluster.destroy(cluster.root)
    result["load"] = (load_before, os.getloadavg()[0])
    print(render(result))


if __name__ == "__main__":
    main()
