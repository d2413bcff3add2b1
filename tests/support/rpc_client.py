"""A real sessiond process over real pipes, and a small JSON-RPC client for tests.

The client frames messages itself (it does not reuse server.rpc.framing), so a framing bug in
the server cannot be hidden by the same bug in the test.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests.support.wait import HANG_GUARD
from tests.support.wire_check import WireChecked

REPO = Path(__file__).resolve().parents[2]


class RpcError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code = error.get("code")
        self.message = error.get("message")
        self.data = error.get("data") or {}
        self.kind = self.data.get("kind")


class ServerProcess(WireChecked):
    """`sessiond serve --stdio` as a subprocess; `framing` is "headers" or "lines". Each
    answer and notification is held to the protocol (tests/support/wire_check.py)."""

    def __init__(
        self,
        home: Path,
        *,
        framing: str = "headers",
        args: list[str] | None = None,
        env: dict[str, str] | None = None,
        prefix: list[str] | None = None,
        code: Path = REPO,
    ) -> None:
        """`prefix` runs the server through another command (tests/support/confine.py);
        `code` is the checkout whose sessiond runs (a benchmark's baseline: another one)."""
        super().__init__()
        self.home = home
        self.framing = framing
        full_env = {**os.environ, "SESSIOND_DURABILITY": "fsync", **(env or {})}
        full_env["PYTHONPATH"] = str(code) + os.pathsep + full_env.get("PYTHONPATH", "")
        self.stderr_path = home.parent / f"stderr-{os.getpid()}-{id(self)}.log"
        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [
                *(prefix or []),
                sys.executable,
                "-m",
                "server.cli",
                "--home",
                str(home),
                "serve",
                "--stdio",
                *(args or []),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            cwd=code,
            env=full_env,
        )
        self._ids = itertools.count(1)
        self._lock = threading.Condition()
        self.responses: dict[Any, dict[str, Any]] = {}
        self.orphans: list[dict[str, Any]] = []  # responses with id null
        self.notifications: list[dict[str, Any]] = []
        self.eof = False
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()

    # --- wire --------------------------------------------------------------------------

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode()
        if self.framing == "lines":
            self.send_raw(body + b"\n")
        else:
            self.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def _read_loop(self) -> None:
        """Collect messages until the output closes; a message cut short by a kill -9 ends
        the stream like EOF does (it was never a complete message)."""
        try:
            while (message := self._read_message()) is not None:
                with self._lock:
                    self.received(message)
                    if "method" in message:
                        self.notifications.append(message)
                    elif message.get("id") is None:
                        self.orphans.append(message)
                    else:
                        self.responses[message["id"]] = message
                    self._lock.notify_all()
        finally:
            self._closed()

    def _read_message(self) -> dict[str, Any] | None:
        stream = self.proc.stdout
        assert stream is not None
        if self.framing == "lines":
            body = stream.readline()
            if not body.endswith(b"\n"):
                return None
        else:
            length = None
            while (header := stream.readline()) not in (b"\r\n", b"\n"):
                if not header.endswith(b"\n"):
                    return None
                name, _, value = header.decode().partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            assert length is not None, "response without Content-Length"
            body = stream.read(length)
            if len(body) < length:
                return None
        return json.loads(body)

    def _closed(self) -> None:
        with self._lock:
            self.eof = True
            self._lock.notify_all()

    # --- requests ----------------------------------------------------------------------

    def request_async(self, method: str, params: Any = None) -> int:
        msg_id = next(self._ids)
        self.sent(msg_id, method)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return msg_id

    def response(self, msg_id: Any) -> dict[str, Any]:
        deadline = time.monotonic() + HANG_GUARD
        with self._lock:
            while msg_id not in self.responses:
                if self.eof:
                    raise ConnectionError(f"server exited: {self.stderr()}")
                if not self._lock.wait(timeout=max(0.0, deadline - time.monotonic())):
                    raise TimeoutError(f"no answer to request {msg_id}")
            self.check_wire()
            return self.responses.pop(msg_id)

    def request(self, method: str, params: Any = None) -> Any:
        reply = self.response(self.request_async(method, params))
        if "error" in reply:
            raise RpcError(reply["error"])
        return reply["result"]

    def notify(self, method: str, params: Any = None) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params or {}})

    def initialize(self, folders: list[str] | None = None, trusted: bool = False) -> Any:
        result = self.request(
            "initialize",
            {
                "protocolVersion": 1,
                "clientInfo": {"name": "pytest", "version": "1"},
                "workspaceFolders": [
                    {"path": f, "name": Path(f).name, "trusted": trusted} for f in folders or []
                ],
            },
        )
        self.notify("initialized")
        return result

    def wait_orphan(self) -> dict[str, Any]:
        """The next response with `id: null` (parse errors, oversized frames)."""
        deadline = time.monotonic() + HANG_GUARD
        with self._lock:
            while not self.orphans:
                if not self._lock.wait(timeout=max(0.0, deadline - time.monotonic())):
                    raise TimeoutError("no id-less error arrived")
            return self.orphans.pop(0)

    def wait_notification(self, method: str, count: int = 1) -> list[dict[str, Any]]:
        deadline = time.monotonic() + HANG_GUARD
        with self._lock:
            while True:
                found = [n for n in self.notifications if n["method"] == method]
                if len(found) >= count:
                    return found
                if not self._lock.wait(timeout=max(0.0, deadline - time.monotonic())):
                    raise TimeoutError(f"fewer than {count} {method} notifications")

    # --- lifecycle ---------------------------------------------------------------------

    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")[-4000:]

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=HANG_GUARD)
        self._cleanup()

    def shutdown(self) -> int:
        self.request("shutdown")
        self.notify("exit")
        code = self.proc.wait(timeout=HANG_GUARD)
        self._cleanup()
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=HANG_GUARD)
        self._cleanup()

    def _cleanup(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        self._stderr.close()
