"""Record latency over WebSocket with many concurrent clients: p50 and p99 per `thread/record`.

Starts a real `sessiond serve --ws 0` on a scratch data dir, connects N writers (each on
its own thread) and F followers subscribed to every thread, and times each record from
send to answer. Reports medians and ratios, not pass/fail: compare runs on one machine.

    python bench/ws_record.py [--writers 50] [--followers 5] [--items 200] [--durability none]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.support.ws_client import WsClient, WsServerProcess  # noqa: E402


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def run(writers: int, followers: int, items: int, durability: str) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch) / "home"
        home.mkdir()
        server = WsServerProcess(home, durability=durability)
        try:
            clients = await asyncio.gather(
                *(WsClient.open(server.record, name=f"w{n}") for n in range(writers))
            )
            watchers = [await WsClient.open(server.record) for _ in range(followers)]
            started = await asyncio.gather(
                *(c.request("thread/start", {"cwd": scratch}) for c in clients)
            )
            for watcher in watchers:
                for s in started:
                    await watcher.request("thread/subscribe", {"threadId": s["thread"]["threadId"]})
            latencies: list[float] = []

            async def record(client: WsClient, thread_id: str, session_id: str) -> None:
                for n in range(items):
                    item = {"type": "message", "id": str(uuid.uuid4()), "role": "user"}
                    item["content"] = f"message {n}"
                    began = time.perf_counter()
                    await client.request(
                        "thread/record",
                        {"threadId": thread_id, "sessionId": session_id, "items": [item]},
                    )
                    latencies.append(time.perf_counter() - began)

            began = time.perf_counter()
            await asyncio.gather(
                *(
                    record(c, s["thread"]["threadId"], s["sessionId"])
                    for c, s in zip(clients, started, strict=True)
                )
            )
            elapsed = time.perf_counter() - began
            await asyncio.gather(*(c.close() for c in [*clients, *watchers]))
        finally:
            server.close()
    p50, p99 = percentile(latencies, 0.50), percentile(latencies, 0.99)
    print(f"{writers} writers x {items} records, {followers} followers, durability={durability}")
    print(f"records: {len(latencies)} in {elapsed:.1f} s ({len(latencies) / elapsed:.0f}/s)")
    print(f"p50 {p50 * 1000:.2f} ms  p99 {p99 * 1000:.2f} ms  p99/p50 {p99 / p50:.1f}")
    print(f"mean {statistics.fmean(latencies) * 1000:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=50)
    parser.add_argument("--followers", type=int, default=5)
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--durability", choices=("fsync", "group", "none"), default="none")
    args = parser.parse_args()
    asyncio.run(run(args.writers, args.followers, args.items, args.durability))


if __name__ == "__main__":
    main()
