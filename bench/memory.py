"""Peak resident memory of the server: idle, after listing 10k threads, with 10 open.

    python -m bench.memory

Peak RSS is the process's VmHWM. The baseline is the floor of the stack, the minimal
asyncio JSON-RPC server of bench/floor_server.py, after answering `initialize`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from bench.listing import write_threads
from bench.rpc import REPO, PipelinedServer
from restore.home.layout import Layout
from restore.service import Settings, open_service
from restore.stores.api import Durability

INITIALIZE = {"clientInfo": {"name": "bench"}, "workspaceFolders": []}


def _floor_peak_kib(home: Path) -> int:
    import subprocess

    import orjson

    proc = subprocess.Popen([sys.executable, "-m", "bench.floor_server"], cwd=REPO,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
    proc.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    proc.stdin.flush()
    while proc.stdout.readline() not in (b"\r\n", b"\n"):
        pass
    status = Path(f"/proc/{proc.pid}/status").read_text()
    proc.kill()
    proc.wait()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM")))


def _open_threads(home: Path, count: int, items: int) -> list[str]:
    service = open_service(Settings(home, durability=Durability.NONE))
    ids = []
    for _ in range(count):
        started = service.start(cwd=str(home), workspace_folder=None)
        session = service.session_for(started.summary.threadId, started.session_id, "local")
        service.append(session, [{"type": "message", "id": str(uuid.uuid4()), "role": "user",
                                  "content": "y" * 200} for _ in range(items)])  # fmt: skip
        ids.append(started.summary.threadId)
    service.close_all()
    return ids


def run(threads: int = 10_000) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        write_threads(Layout(home), threads)
        opened = _open_threads(home, 10, 1000)
        server = PipelinedServer(home, {"SESSIOND_DURABILITY": "none"})
        try:
            server.request("initialize", INITIALIZE)
            idle = server.peak_rss_kib()
            cursor, listed = None, 0
            while True:
                page = server.request("thread/list", {"limit": 200, **(
                    {"cursor": cursor} if cursor else {})})  # fmt: skip
                listed += len(page["threads"])
                if not (cursor := page["nextCursor"]):
                    break
            after_list = server.peak_rss_kib()
            for thread_id in opened:
                assert server.request("thread/resume", {"threadId": thread_id})["status"] == "ready"
            after_open = server.peak_rss_kib()
        finally:
            server.close()
        floor = _floor_peak_kib(home)
    return {"floor": floor, "idle": idle, "listed": after_list, "listed_count": listed,
            "open": after_open}  # fmt: skip


def render(result: dict[str, Any]) -> str:
    mib = 1024
    return "\n".join([
        "| peak RSS (VmHWM) | MiB | vs floor |",
        "|---|---:|---:|",
        f"| floor: minimal asyncio JSON-RPC server after `initialize` | "
        f"{result['floor'] / mib:.1f} | 1.00x |",
        f"| sessiond idle after `initialize` | {result['idle'] / mib:.1f} | "
        f"{result['idle'] / result['floor']:.2f}x |",
        f"| sessiond after listing all {result['listed_count']:,} threads (200 per page) | "
        f"{result['listed'] / mib:.1f} | {result['listed'] / result['floor']:.2f}x |",
        f"| sessiond with 10 threads of 1,000 items resumed and open | "
        f"{result['open'] / mib:.1f} | {result['open'] / result['floor']:.2f}x |",
    ])  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=10_000)
    print(render(run(parser.parse_args().threads)))


if __name__ == "__main__":
    main()
