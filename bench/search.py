"""Search: every thread's records, found in milliseconds, beside the tools a person uses
today (`rg`, `grep -r`) over the same files, in one run on the same data.

    python -m bench.search [--threads 10000] [--messages 1000000] [--runs 100]

The corpus (bench/search_corpus.py): `--threads` thread files holding `--messages`
real-shaped messages (plus their tool calls, edits, todos) in 20 workspaces, written
directly. Then, each timed:

- building the index: the first search after an upgrade, in-process with no budget (what
  `sessiond search` does offline; a server does it a budget at a time);
- warm queries: one `sessiond serve` process, every query over its pipe, `--runs` times
  each, p50/p99: a rare word (7 records), a common word, a phrase, a prefix, a stop word
  (in most records), each without and with a workspace folder;
- `sessiond search RARE` from spawn to its first hits printed (median of 5 runs);
- index size against the thread files' size;
- `rg -l -i -F` and `grep -rlF -i` for the rare word over the thread files (warm page cache,
  median of 3), the ratios against sessiond's warm p50 and its spawn → first hits;
- record throughput (8 threads, 32 in flight) of a server whose search index is live and
  searched every 100 records, against one that never searches, under group commit and
  with no sync at all (the CPU's cost alone, free of the disk's swinging sync rate): pairs
  of runs, off and on in turn, the order flipped pair by pair; the ratio is taken pair by
  pair, and the median of the ratios is the figure (`--rounds` pairs per durability).
  `python -m bench.search --only recording` runs this part alone.

Targets (issue 24): warm p50 ≤ 20 ms and p99 ≤ 100 ms, spawn → first hits ≤ 300 ms,
≥ 50x faster than rg, recording with indexing ≥ 80% of without.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.install import install_wheel
from bench.rpc import PipelinedServer
from bench.search_corpus import COMMON, FOLDERS, PHRASE, PREFIX, RARE, write_corpus
from restore.home.layout import Layout
from restore.search.query import parse
from restore.service import Settings, open_service
from restore.stores.api import Durability

QUERIES = {
    "rare word": RARE,
    "common word": COMMON,
    "phrase": f'"{PHRASE}"',
    "prefix": f"{PREFIX}*",
    "stop word": "the",
}
FOLDER = "/work/project-3"
SPAWNS = 5
TOOL_RUNS = 3
ROUNDS = 10  # recording pairs per durability: the median ratio steadies by about 8
THREADS, IN_FLIGHT, SEARCH_EVERY = 8, 32, 100
DURABILITIES = ("group", "none")
DURABILITY_NAMES = {"group": "group commit", "none": "no sync (SESSIOND_DURABILITY=none)"}


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[
        min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))
    ]


def _timed(argv: list[str], **kwargs: Any) -> tuple[float, subprocess.CompletedProcess[bytes]]:
    began = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, check=False, **kwargs)
    return (time.perf_counter() - began) * 1000, done


def build(home: Path) -> dict[str, Any]:
    service = open_service(Settings(home, durability=Durability.NONE))
    began = time.perf_counter()
    service.index.ensure_ready()
    listed = time.perf_counter() - began
    began = time.perf_counter()
    page = service.search(RARE, budget=None)
    built = time.perf_counter() - began
    conn = service.store.index.connection()
    matches = {
        kind: conn.execute(
            "SELECT count(*) FROM search_fts WHERE search_fts MATCH ?", (parse(q).fts5(),)
        ).fetchone()[0]
        for kind, q in QUERIES.items()
    }
    documents = conn.execute("SELECT count(*) FROM search_docs").fetchone()[0]
    service.store.close()
    assert len(page.hits) == 7, page
    return {"listing_s": listed, "build_s": built, "matches": matches, "documents": documents}


def warm_queries(home: Path, runs: int) -> dict[str, tuple[float, float, int]]:
    server = PipelinedServer(home)
    rows: dict[str, tuple[float, float, int]] = {}
    try:
        server.request("initialize", {"clientInfo": {"name": "bench"}})
        for kind, query in QUERIES.items():
            for folder in (None, FOLDER):
                params: dict[str, Any] = {"query": query, "limit": 20}
                if folder:
                    params["workspaceFolder"] = folder
                hits = len(server.request("thread/search", params)["hits"])  # warm
                samples = []
                for _ in range(runs):
                    began = time.perf_counter()
                    server.request("thread/search", params)
                    samples.append((time.perf_counter() - began) * 1000)
                p50, p99 = _percentiles(samples)
                rows[kind + (" in a folder" if folder else "")] = (p50, p99, hits)
    finally:
        server.close()
    return rows


def spawn_to_hits(home: Path, site: Path) -> float:
    """`sessiond search` as a person runs it: installed from the wheel (bytecode compiled,
    bench/install.py), a fresh process, from spawn to its lines printed."""
    argv = [sys.executable, "-m", "server.cli", "--home", str(home), "search", RARE]
    env = {**os.environ, "PYTHONPATH": str(site)}
    samples = []
    for _ in range(SPAWNS + 1):
        took, done = _timed(argv, cwd=site.parent, env=env)
        assert done.returncode == 0 and done.stdout.count(b"\n") == 7, done
        samples.append(took)
    return statistics.median(samples[1:])  # the first warms the page cache


def tools(home: Path) -> dict[str, float | None]:
    threads = str(Layout(home).threads_dir)
    found: dict[str, float | None] = {}
    for name, argv in (("rg", ["rg", "-l", "-i", "-F", RARE, threads]),
                       ("grep -r", ["grep", "-r", "-l", "-i", "-F", RARE, threads])):  # fmt: skip
        if shutil.which(argv[0]) is None:
            found[name] = None
            continue
        samples = []
        for _ in range(TOOL_RUNS + 1):
            took, done = _timed(argv)
            assert done.returncode == 0 and done.stdout.count(b"\n") >= 1, done
            samples.append(took)
        found[name] = statistics.median(samples[1:])
    return found


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def _recorded(n: int) -> dict[str, Any]:
    """The `n`th record: an assistant's message, a tool call (its command and arguments),
    its output, in turn, as an agent's turn records them; each holds `parser`."""
    text = f"the parser returned {n} tokens from src/module_{n % 97}.py"
    item: dict[str, Any] = {"id": str(uuid.uuid4())}
    if n % 3 == 0:
        return {**item, "type": "message", "role": "assistant", "content": text}
    call = {**item, "type": "operation", "operationId": f"call-{n // 3}", "tool": "shell",
            "effect": "side_effect"}  # fmt: skip
    if n % 3 == 1:
        command = f"pytest -q tests/test_parser_{n % 53}.py"
        return {**call, "state": "started", "command": command,
                "input": {"command": command, "description": f"check that {text}"}}  # fmt: skip
    lines = [f"tests/test_parser_{n % 53}.py::test_case_{k} PASSED" for k in range(12)]
    return {**call, "state": "committed", "resultPersisted": True,
            "result": "\n".join([*lines, text, "12 passed in 0.31s"])}  # fmt: skip


def recording(directory: Path, records: int, searching: bool, durability: str = "group") -> float:
    """Items per second of one server under `durability` (group commit, or none: the CPU's
    cost alone); `searching`: its search index exists (the listing rows' triggers mark
    threads) and is searched every 100 records."""
    home = directory / f"record-{uuid.uuid4().hex[:8]}"
    home.mkdir()
    server = PipelinedServer(home, {"SESSIOND_DURABILITY": durability})
    try:
        server.request("initialize", {"clientInfo": {"name": "bench"}})
        sessions = []
        for _ in range(THREADS):
            started = server.request("thread/start", {"cwd": str(home)})
            sessions.append((started["thread"]["threadId"], started["sessionId"]))
        server.request("thread/list", {})  # the listing index open in both
        if searching:
            server.request("thread/search", {"query": "warm"})
        window, searches = [], []
        began = time.perf_counter()
        for n in range(records):
            thread_id, session_id = sessions[n // 3 % THREADS]  # a call, its output: one thread
            item = _recorded(n)
            window.append(server.send("thread/record", {
                "threadId": thread_id, "sessionId": session_id, "items": [item]}))  # fmt: skip
            if searching and n % SEARCH_EVERY == SEARCH_EVERY - 1:
                searches.append(server.send("thread/search", {"query": "parser"}))
            if len(window) >= IN_FLIGHT:
                window.pop(0).result(timeout=600)
        for future in window + searches:
            future.result(timeout=600)
        elapsed = time.perf_counter() - began
        if searching:  # the last records are findable: indexing kept up
            said = max(n for n in range(records) if n % 3 == 0)  # a message: always indexed
            last = server.request("thread/search", {"query": f'"returned {said} tokens"'})
            assert len(last["hits"]) == 1, last
    finally:
        server.close()
        shutil.rmtree(home, ignore_errors=True)
    return records / elapsed


def recording_pairs(
    directory: Path, records: int, rounds: int
) -> dict[str, list[tuple[float, float]]]:
    """Per durability, `rounds` pairs (never searched, searched) of items per second.
    Interleaved: each pair's two runs follow each other, the durabilities take turns, and
    which of the pair runs first flips each round, so the machine's drift (other work,
    the disk's sync rate) weighs on both sides of a ratio alike."""
    pairs: dict[str, list[tuple[float, float]]] = {durability: [] for durability in DURABILITIES}
    for n in range(rounds):
        for durability in DURABILITIES:
            order = (False, True) if n % 2 == 0 else (True, False)
            got = {on: recording(directory, records, on, durability) for on in order}
            pairs[durability].append((got[False], got[True]))
    return pairs


def recording_summary(pairs: dict[str, list[tuple[float, float]]]) -> dict[str, Any]:
    """Each durability's medians, and the median (and range) of the pairs' ratios."""
    summary: dict[str, Any] = {}
    for durability, runs in pairs.items():
        ratios = [on / off for off, on in runs]
        summary[durability] = {
            "off": statistics.median(off for off, _ in runs),
            "on": statistics.median(on for _, on in runs),
            "ratio": statistics.median(ratios),
            "ratios": (min(ratios), max(ratios)),
            "pairs": len(runs),
        }
    return summary


def run_recording(records: int, rounds: int) -> dict[str, Any]:
    """The recording part alone (`--only recording`): no corpus."""
    with tempfile.TemporaryDirectory(dir=os.environ.get("SESSIOND_BENCH_DIR")) as tmp:
        load = os.getloadavg()[0]
        pairs = recording_pairs(Path(tmp), records, rounds)
        return {"recording": recording_summary(pairs), "load": (load, os.getloadavg()[0])}


def run(
    threads: int, messages: int, runs: int, records: int = 2000, rounds: int = ROUNDS
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(dir=os.environ.get("SESSIOND_BENCH_DIR")) as tmp:
        home = Path(tmp) / "home"
        began = time.perf_counter()
        corpus = write_corpus(Layout(home), threads, messages)
        written = time.perf_counter() - began
        built = build(home)
        result: dict[str, Any] = {
            "threads": corpus.threads, "messages": corpus.messages, "items": corpus.items,
            "data_bytes": corpus.data_bytes, "written_s": written, **built,
            "index_bytes": _size(Layout(home).index_path),
        }  # fmt: skip
        result["queries"] = warm_queries(home, runs)
        result["spawn_ms"] = spawn_to_hits(home, install_wheel(Path(tmp) / "install"))
        result["tools"] = tools(home)
        load = os.getloadavg()[0]
        result["recording"] = recording_summary(recording_pairs(Path(tmp), records, rounds))
        result["load"] = (load, os.getloadavg()[0])
    return result


def render(result: dict[str, Any]) -> str:
    queries = result["queries"]
    rare_p50 = queries["rare word"][0]
    lines = [
        f"{result['threads']:,} threads, {result['messages']:,} messages ({result['items']:,} "
        f"records, {result['documents']:,} of them searchable) in {FOLDERS} workspaces, "
        f"{result['data_bytes'] / 1e6:,.0f} MB of thread files (written in "
        f"{result['written_s']:.0f} s). Building the search index, the first search after "
        f"an upgrade: {result['build_s']:.0f} s (the listing index before it: "
        f"{result['listing_s']:.1f} s); index file {result['index_bytes'] / 1e6:,.0f} MB, "
        f"{result['index_bytes'] / result['data_bytes']:.2f}x the thread files (listing rows "
        "included). The machine is shared with other work: compare the ratios, measured "
        "in the same run.",
        "",
        "| warm query, over the pipe (20 hits a page) | records matching | p50 ms | p99 ms |",
        "|---|---:|---:|---:|",
    ]
    for kind, (p50, p99, _hits) in queries.items():
        base = kind.removesuffix(" in a folder")
        matched = f"{result['matches'][base]:,}" + (" (all folders)" if base != kind else "")
        query = QUERIES[base].replace("|", "\\|")
        lines.append(f"| {kind} (`{query}`) | {matched} | {p50:.1f} | {p99:.1f} |")
    lines += ["",
              "| rare word, whole corpus | ms | ÷ sessiond warm p50 | ÷ sessiond spawn → hits |",
              "|---|---:|---:|---:|",
              f"| `sessiond search {RARE}`: spawn → first hits printed | "
              f"{result['spawn_ms']:.0f} | — | — |"]  # fmt: skip
    for name, took in result["tools"].items():
        if took is None:
            lines.append(f"| `{name}` | not installed | — | — |")
            continue
        lines.append(f"| `{name}` over the thread files (warm cache) | {took:.0f} | "
                     f"{took / rare_p50:,.0f}x | {took / result['spawn_ms']:.1f}x |")  # fmt: skip
    return "\n".join([*lines, "", render_recording(result)])


def render_recording(result: dict[str, Any]) -> str:
    before, after = result["load"]
    lines = [
        f"| recording, 8 threads, 32 in flight | never searched, items/s | searched every "
        f"{SEARCH_EVERY} records, items/s | searched / never, median of the pairs' ratios "
        "(range) |",
        "|---|---:|---:|---:|",
    ]
    for durability, row in result["recording"].items():
        low, high = row["ratios"]
        lines.append(f"| {DURABILITY_NAMES[durability]} ({row['pairs']} pairs) | "
                     f"{row['off']:,.0f} | {row['on']:,.0f} | {row['ratio']:.0%} ({low:.0%} "
                     f"to {high:.0%}) |")  # fmt: skip
    lines += [
        "",
        f"Load average (1 min) {before:.1f} before the recording runs, {after:.1f} after.",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="recording pairs per durability")
    parser.add_argument("--only", choices=["recording"], help="one part alone")
    args = parser.parse_args()
    if args.only == "recording":
        print(render_recording(run_recording(args.records, args.rounds)))
        return
    print(render(run(args.threads, args.messages, args.runs, args.records, args.rounds)))


if __name__ == "__main__":
    main()
