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

from bench.install import installed_env

REPO = Path(__file__).resolve().parent.parent


class PipelinedServer:
    """`sessiond serve --stdio` with newline-delimited framing and a reader thread."""

    def __init__(
        self,
        home: Path,
        env: dict[str, str] | None = None,
        site: Path | None = None,
        sessiond: Path | None = None,
    ) -> None:
        """`sessiond`: the command of an install (bench/install.py's `install_venv`), run
        as a person runs it; `site`: a directory of the wheel's files run with this
        interpreter; neither: this checkout."""
        if sessiond is not None:
            argv, cwd = [str(sessiond)], sessiond.parent
            environment = installed_env(env)
        else:
            code = site or REPO
            argv, cwd = [sys.executable, "-m", "server.cli"], code.parent if site else REPO
            environment = {**os.environ, **(env or {}), "PYTHONPATH": str(code)}
        self.proc = subprocess.Popen(
            [*argv, "--home", str(home), "serve", "--stdio"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            cwd=cwd, env=environment,
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
