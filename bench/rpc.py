"""A pipelining JSON-RPC client for benchmarks: many requests in flight on one pipe."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parent.parent


class PipelinedServer:
    """`sessiond serve --stdio` with newline-delimited framing and a reader thread."""

    def __init__(
        self, home: Path, env: dict[str, str] | None = None, site: Path | None = None
    ) -> None:
        """`site`: sessiond installed there (bench/install.py) instead of this checkout."""
        code = site or REPO
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "server.cli", "--home", str(home), "serve", "--stdio"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            cwd=code.parent if site else REPO,
            env={**os.environ, **(env or {}), "PYTHONPATH": str(code)},
        )  # fmt: skip
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[Future[Any], float]] = {}
        self._lock = threading.Lock()
        self.latencies: list[float] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            message = orjson.loads(line)
            if "id" not in message or message.get("id") is None:
                continue
            with self._lock:
                future, sent = self._pending.pop(message["id"])
            self.latencies.append(time.perf_counter() - sent)
            if "error" in message:
                future.set_exception(RuntimeError(message["error"]))
            else:
                future.set_result(message["result"])

    def send(self, method: str, params: dict[str, Any]) -> Future[Any]:
        assert self.proc.stdin is not None
        msg_id = next(self._ids)
        future: Future[Any] = Future()
        with self._lock:
            self._pending[msg_id] = (future, time.perf_counter())
        body = {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}
        self.proc.stdin.write(orjson.dumps(body) + b"\n")
        self.proc.stdin.flush()
        return future

    def request(self, method: str, params: dict[str, Any]) -> Any:
        return self.send(method, params).result(timeout=600)

    def peak_rss_kib(self) -> int:
        """VmHWM: the most resident memory the server process has used so far."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
        raise RuntimeError("no VmHWM")

    def close(self) -> None:
        try:
            self.request("shutdown", {})
            assert self.proc.stdin is not None
            self.proc.stdin.write(b'{"jsonrpc":"2.0","method":"exit"}\n')
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        except Exception:
            self.proc.kill()
            self.proc.wait()
