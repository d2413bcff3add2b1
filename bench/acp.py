"""The ACP front door's cost: an editor talking to AGENT through `sessiond acp` against the
same editor talking to AGENT directly, fresh processes each run, over real pipes.

    python -m bench.acp [--quick]

AGENT here is a minimal ACP agent (`python -m bench.acp agent`) that streams N message
chunks per prompt, each stamped with CLOCK_MONOTONIC when written; the editor stamps it
again when it reads the line. Measured: spawn → `initialize` answered; the delivery of a
lone update, nothing queued ahead of it (median µs: the proxy's share is the difference);
a prompt's round trip with 0 and with 100 updates (median ms; through the proxy it
includes recording every update and syncing the turn's end).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parent.parent
UPDATES = 100


def agent_main() -> None:
    """The benchmark's AGENT: answers at once, streams `stream N` chunks per prompt."""
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        message = orjson.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue
        if method == "initialize":
            result: Any = {"protocolVersion": 1, "agentCapabilities": {}}
        elif method == "session/new":
            result = {"sessionId": "bench-session"}
        elif method == "session/prompt":
            params = message["params"]
            count = int(params["prompt"][-1]["text"].split()[1])
            for n in range(count):
                update = {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": f"chunk {n} of the answer "},
                }
                note = {
                    "sessionId": params["sessionId"],
                    "update": update,
                    "_meta": {"t": time.monotonic_ns()},
                }
                out.write(
                    orjson.dumps({"jsonrpc": "2.0", "method": "session/update", "params": note})
                    + b"\n"
                )
                out.flush()
            result = {"stopReason": "end_turn"}
        else:
            error = {"code": -32601, "message": method}
            out.write(orjson.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}) + b"\n")
            out.flush()
            continue
        out.write(orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}) + b"\n")
        out.flush()


class Editor:
    """One fresh process (AGENT, or sessiond acp in front of it) driven over its pipes."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.began = time.perf_counter()
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=REPO,
            env=env,
        )
        self.next_id = 0
        self.delivery_ns: list[int] = []

    def request(self, method: str, params: dict[str, Any]) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.proc.stdin.write(orjson.dumps(body) + b"\n")
        self.proc.stdin.flush()
        while line := self.proc.stdout.readline():
            received = time.monotonic_ns()
            message = orjson.loads(line)
            if message.get("method") == "session/update":
                self.delivery_ns.append(received - message["params"]["_meta"]["t"])
            elif message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(message["error"])
                return message["result"]
        raise RuntimeError("the process ended before it answered")

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def one_run(argv: list[str], env: dict[str, str], cwd: str, prompts: int) -> dict[str, Any]:
    editor = Editor(argv, env)
    try:
        editor.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        spawn_ms = (time.perf_counter() - editor.began) * 1000
        session = editor.request("session/new", {"cwd": cwd, "mcpServers": []})["sessionId"]

        def prompt(count: int) -> float:
            began = time.perf_counter()
            text = [{"type": "text", "text": f"stream {count}"}]
            editor.request("session/prompt", {"sessionId": session, "prompt": text})
            return (time.perf_counter() - began) * 1000

        prompt(1)  # the first prompt pays for lazy imports in the proxy: not a steady state
        empty = [prompt(0) for _ in range(prompts)]
        editor.delivery_ns.clear()
        for _ in range(prompts):  # one update per prompt: its delivery, nothing queued ahead
            prompt(1)
        delivery = list(editor.delivery_ns)
        full = [prompt(UPDATES) for _ in range(prompts)]
        return {"spawn": spawn_ms, "empty": empty, "full": full, "delivery": delivery}
    finally:
        editor.close()


def run(runs: int, prompts: int) -> dict[str, dict[str, float]]:
    agent = [sys.executable, "-m", "bench.acp", "agent"]
    results: dict[str, dict[str, list[float]]] = {
        mode: {"spawn": [], "empty": [], "full": [], "delivery": []} for mode in ("direct", "proxy")
    }
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONPATH": str(REPO), "SESSIOND_CONFIG_HOME": tmp}
        for n in range(runs):  # interleaved, so load on the machine hits both alike
            home = Path(tmp) / f"home-{n}"
            proxy = [sys.executable, "-m", "server.cli", "acp", "--home", str(home), "--", *agent]
            for mode, argv in (("direct", agent), ("proxy", proxy)):
                measured = one_run(argv, env, tmp, prompts)
                results[mode]["spawn"].append(measured["spawn"])
                results[mode]["empty"] += measured["empty"]
                results[mode]["full"] += measured["full"]
                results[mode]["delivery"] += [ns / 1000 for ns in measured["delivery"]]
    return {
        mode: {key: statistics.median(values) for key, values in rows.items()}
        for mode, rows in results.items()
    }


def render(medians: dict[str, dict[str, float]]) -> str:
    direct, proxy = medians["direct"], medians["proxy"]
    rows = [
        ("spawn → `initialize` answered (ms)", "spawn", "{:.0f}"),
        ("a lone update, agent write → editor read (µs)", "delivery", "{:.0f}"),
        ("prompt round trip, 0 updates (ms)", "empty", "{:.2f}"),
        (f"prompt round trip, {UPDATES} updates (ms)", "full", "{:.2f}"),
    ]
    lines = [
        "| median | editor → AGENT | editor → `sessiond acp` → AGENT | overhead |",
        "|---|---:|---:|---:|",
    ]
    for label, key, shape in rows:
        extra = proxy[key] - direct[key]
        lines.append(
            f"| {label} | {shape.format(direct[key])} | {shape.format(proxy[key])} | "
            f"+{shape.format(extra)} |"
        )
    per_update = (proxy["full"] - proxy["empty"] - direct["full"] + direct["empty"]) / UPDATES
    lines += [
        "",
        f"Recording and forwarding cost {per_update * 1000:.0f} µs per update on the prompt's "
        "critical path (the 100-update round trip's overhead less the empty one's, per "
        "update); the empty prompt's overhead is the turn's records and its fdatasync.",
    ]
    return "\n".join(lines)


def main() -> None:
    if sys.argv[1:2] == ["agent"]:
        agent_main()
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print(render(run(3 if args.quick else 10, 5 if args.quick else 20)))


if __name__ == "__main__":
    main()
