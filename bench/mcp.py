"""`search_sessions` through MCP beside the same search over sessiond's JSON-RPC, in one run
on the same 1M-message store.

    python -m bench.mcp [--threads 10000] [--messages 1000000] [--runs 100]

The corpus and its index are bench/search.py's (bench/search_corpus.py: `--threads`
thread files holding `--messages` real-shaped messages in 20 workspaces, the index built
whole first). Then one `sessiond mcp` process and one `sessiond serve` process, each
warm (one call first), asked the same queries in turn — a call to one, then the same call
to the other, `--runs` times — each over its own pipe: `search_sessions` scoped as an
agent started in one workspace is (`--folder`), and started with `--all-folders`, beside
`thread/search` with and without that `workspaceFolder`, 20 hits a page. The MCP figure
includes what MCP adds: the SDK's validation of the arguments and the answer written as
text for a model.

Target (issue 38): `search_sessions` through MCP p50 ≤ 20 ms warm at 1M messages.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.rpc import PipelinedServer
from bench.search import FOLDER, QUERIES, _percentiles, build
from bench.search_corpus import write_corpus
from restore.home.layout import Layout
from tests.support.mcp_client import McpProcess

LIMIT = 20
TARGET_MS = 20.0


def _timed(call: Any) -> float:
    began = time.perf_counter()
    call()
    return (time.perf_counter() - began) * 1000


def compare(home: Path, runs: int) -> dict[str, dict[str, tuple[float, float]]]:
    """p50 and p99 ms per query and scope: `mcp` and `json-rpc`, measured turn about."""
    rows: dict[str, dict[str, tuple[float, float]]] = {}
    server = PipelinedServer(home)
    server.request("initialize", {"clientInfo": {"name": "bench"}})
    try:
        scopes = (("in a folder", ["--folder", FOLDER]), ("every folder", ["--all-folders"]))
        for scope, args in scopes:
            with McpProcess(home, home.parent, args) as mcp:
                for kind, query in QUERIES.items():
                    params: dict[str, Any] = {"query": query, "limit": LIMIT}
                    if scope == "in a folder":
                        params["workspaceFolder"] = FOLDER

                    def over_mcp(query: str = query) -> int:
                        text, error = mcp.call("search_sessions", query=query, limit=LIMIT)
                        assert not error, text
                        return int(text.split(" ", 1)[0])

                    def over_rpc(params: dict[str, Any] = params) -> int:
                        return len(server.request("thread/search", params)["hits"])

                    hits = over_mcp()  # warm, and the same page both ways
                    assert hits == over_rpc(), (kind, scope, hits)
                    samples: dict[str, list[float]] = {"mcp": [], "json-rpc": []}
                    for _ in range(runs):
                        samples["mcp"].append(_timed(over_mcp))
                        samples["json-rpc"].append(_timed(over_rpc))
                    rows[f"{kind}, {scope}"] = {
                        name: _percentiles(values) for name, values in samples.items()
                    }
    finally:
        server.close()
    return rows


def run(threads: int, messages: int, runs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(dir=os.environ.get("SESSIOND_BENCH_DIR")) as tmp:
        home = Path(tmp) / "home"
        corpus = write_corpus(Layout(home), threads, messages)
        built = build(home)
        load = os.getloadavg()[0]
        rows = compare(home, runs)
        return {"threads": corpus.threads, "messages": corpus.messages, "build_s":
                built["build_s"], "rows": rows, "load": (load, os.getloadavg()[0])}  # fmt: skip


def render(result: dict[str, Any]) -> str:
    lines = [
        f"{result['messages']:,} messages in {result['threads']:,} threads (index built in "
        f"{result['build_s']:.0f} s), load {result['load'][0]:.1f} to {result['load'][1]:.1f}",
        "",
        "| query, scope | MCP `search_sessions` p50 / p99 ms | JSON-RPC `thread/search` "
        "p50 / p99 ms |",
        "|---|---:|---:|",
    ]
    worst = 0.0
    for name, row in result["rows"].items():
        (mp50, mp99), (rp50, rp99) = row["mcp"], row["json-rpc"]
        worst = max(worst, mp50)
        lines.append(f"| {name} | {mp50:.1f} / {mp99:.1f} | {rp50:.1f} / {rp99:.1f} |")
    verdict = "met" if worst <= TARGET_MS else "NOT met"
    lines += ["", f"Target p50 ≤ {TARGET_MS:.0f} ms through MCP: {verdict} (worst {worst:.1f})"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=100)
    args = parser.parse_args()
    print(render(run(args.threads, args.messages, args.runs)))


if __name__ == "__main__":
    main()
