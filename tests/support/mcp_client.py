"""`sessiond mcp` as a real process over real pipes, and a small MCP client for tests and
the bench: newline-delimited JSON-RPC as the MCP stdio transport frames it, written here
(not the SDK's client), so a bug in the SDK's framing cannot hide behind the same bug in
the test."""

from __future__ import annotations

import itertools
import json
import os
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.rpc_client import REPO
from tests.support.wait import HANG_GUARD

PROTOCOL = "2025-06-18"


class McpError(Exception):
    """A JSON-RPC error answer (not a tool's `isError` result)."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.error = error


class McpProcess:
    """`sessiond --home HOME mcp ARGS` started in `cwd`, initialized."""

    def __init__(
        self,
        home: Path,
        cwd: Path,
        args: list[str] | None = None,
        env: dict[str, str] | None = None,
        code: Path = REPO,
    ) -> None:
        full_env = {**os.environ, **(env or {})}
        full_env["PYTHONPATH"] = str(code) + os.pathsep + full_env.get("PYTHONPATH", "")
        self.stderr_path = home.parent / f"mcp-stderr-{os.getpid()}-{id(self)}.log"
        self._stderr = open(self.stderr_path, "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "server.cli", "--home", str(home), "mcp", *(args or [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            cwd=cwd,
            env=full_env,
        )
        self._ids = itertools.count(1)
        self._buffer = b""
        self.initialized = self.request("initialize", {
            "protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "sessiond-tests", "version": "1"},
        })  # fmt: skip
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def __enter__(self) -> McpProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def _line(self) -> bytes:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        poller = select.poll()  # not select(): the suite's descriptors pass 1024
        poller.register(fd, select.POLLIN)
        while b"\n" not in self._buffer:
            if not poller.poll(HANG_GUARD * 1000):
                raise TimeoutError(f"sessiond mcp said nothing in {HANG_GUARD}s: {self.stderr()}")
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise EOFError(f"sessiond mcp closed its stdout: {self.stderr()}")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        number = next(self._ids)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": number, "method": method}
        if params is not None:
            message["params"] = params
        self._send(message)
        while True:
            answer = json.loads(self._line())
            if answer.get("id") != number:
                continue  # a notification (a log line, progress)
            if "error" in answer:
                raise McpError(answer["error"])
            return answer["result"]

    def call(self, tool: str, **arguments: Any) -> tuple[str, bool]:
        """A tool's text and whether it is an error (`isError`)."""
        result = self.request("tools/call", {"name": tool, "arguments": arguments})
        text = "\n".join(c["text"] for c in result["content"] if c.get("type") == "text")
        return text, bool(result.get("isError"))

    def text(self, tool: str, **arguments: Any) -> str:
        """A tool's text; an error answer fails the test, saying what it was."""
        text, error = self.call(tool, **arguments)
        assert not error, text
        return text

    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")[-3000:]

    def close(self) -> int | None:
        """Closing stdin ends the server (the client went away): its exit code; None when
        it had to be killed."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        code: int | None
        try:
            code = self.proc.wait(timeout=HANG_GUARD)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=HANG_GUARD)
            code = None
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._stderr.close()
        return code
