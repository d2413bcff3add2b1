"""`python -m bench`: every workload beside its baseline, in one run, as one report.

    python -m bench [--quick] [--update-docs]

Prints a markdown report and writes docs/bench-latency.png, latency against size. First
the journeys a person waits for — each from a fresh process over the real pipe, beside
the Codex app-server peer in the same run when `codex` is on PATH (bench/journeys.py) —
then the in-process tables: startup vs the floor of the stack, list via index vs a
directory scan, resume via snapshot vs full replay, record throughput vs the disk's raw
sync limit, peak memory vs the floor, the PostgreSQL store beside the embedded one
(bench/stores.py), the ACP front door vs talking to the agent directly, a follower's
latency on either store (bench/follow.py), search over 1M messages beside `rg` and `grep -r`
(bench/search.py), `search_sessions` through MCP beside it (bench/mcp.py), importing 10k
Codex sessions beside Codex's own first-start indexing, 10k sessions of every agent's store
recorded by its real CLI beside the agent's own listing (bench/agents_import.py), and
Codex beside the in-process calls. With `--update-docs` the report replaces the generated block
in docs/benchmarks.md.
`--quick` uses small sizes (a smoke run, not for publishing).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import (
    acp,
    agents_import,
    codex_peer,
    follow,
    import_,
    journeys,
    listing,
    mcp,
    memory,
    record,
    resume,
    search,
    startup,
    stores,
)

DOCS = Path(__file__).resolve().parent.parent / "docs"
CHART = DOCS / "bench-latency.png"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
CODEX_TIMEOUT = 240.0


def startup_section(runs: int) -> tuple[str, dict[str, float]]:
    """bench/startup.py: spawn → first answer of each command, from an install."""
    result = startup.run(runs, 10_000)
    medians = {name: statistics.median(values) for name, values in result["samples"].items()}
    return startup.render(result), medians


def chart(list_rows: list[dict[str, Any]], resume_rows: list[dict[str, Any]]) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "(chart skipped: `pip install -e '.[bench]'` for matplotlib)"
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    sizes = [r["threads"] for r in list_rows]
    left.loglog(sizes, [r["index_p50"] for r in list_rows], "o-", label="index (p50)")
    left.loglog(sizes, [r["scan_p50"] for r in list_rows], "s--", label="directory scan (p50)")
    left.set(title="thread/list, first page", xlabel="threads", ylabel="ms")
    items = [r["items"] for r in resume_rows]
    right.loglog(items, [r["snapshot_ms"] for r in resume_rows], "o-", label="snapshot + tail")
    right.loglog(items, [r["replay_ms"] for r in resume_rows], "s--", label="full replay")
    right.set(title="thread/resume", xlabel="items in thread", ylabel="ms")
    for axis in (left, right):
        axis.grid(True, which="both", alpha=0.3)
        axis.legend()
    figure.tight_layout()
    figure.savefig(CHART, dpi=110)
    plt.close(figure)
    return f"![latency against size]({CHART.name})"


def codex_section(sizes: list[int], runs: int, list_rows: list[dict[str, Any]],
                  resume_rows: list[dict[str, Any]]) -> str:  # fmt: skip
    """The Codex app-server peer beside sessiond's rows; a note (and how to install) without it."""
    if not codex_peer.available():
        return ("`codex` (npm @openai/codex) is not on PATH, so the peer comparison was not "
                f"run; install it (`{codex_peer.INSTALL}`, then put "
                "`/tmp/codex-peer/node_modules/.bin` on PATH) and re-run to add Codex "
                "app-server ratios.")  # fmt: skip
    began = time.perf_counter()
    try:
        # Codex indexes every rollout before it answers `initialize`: ~2 min at 100k.
        rows = codex_peer.run(sizes, runs, timeout=CODEX_TIMEOUT)
    except codex_peer.CodexError as failed:  # a report beats losing the run's other sections
        return f"`codex` is on PATH, but the peer comparison failed: {failed}"
    took = time.perf_counter() - began
    table = codex_peer.render(rows, list_rows, resume_rows)
    return f"{table}\n\nThe Codex runs took {took:.0f} s of this run."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--update-docs", action="store_true")
    args = parser.parse_args()
    sizes = [1000, 10_000] if args.quick else [1000, 10_000, 100_000]
    began = time.perf_counter()
    journey_rows = journeys.run(1000, 10_000, 1) if args.quick else journeys.run(10_000, 100_000, 3)
    startup_table, _ = startup_section(5 if args.quick else 10)
    list_rows = listing.run(sizes)
    resume_rows = resume.run(sizes, 3 if args.quick else 7)
    records = record.run(500 if args.quick else 2000, 32)
    memory_result = memory.run(2000 if args.quick else 10_000)
    shared = stores.run(sizes[-1], sizes[-1], 500 if args.quick else 2000)
    acp_medians = acp.run(3 if args.quick else 10, 5 if args.quick else 20)
    followed = follow.run(10 if args.quick else 30)
    searched = (
        search.run(1000, 50_000, 20, 500, rounds=3)
        if args.quick
        else search.run(10_000, 1_000_000, 100)
    )
    through_mcp = mcp.run(1000, 50_000, 20) if args.quick else mcp.run(10_000, 1_000_000, 100)
    imported = import_.run(1000 if args.quick else 10_000, 1 if args.quick else 3, CODEX_TIMEOUT)
    agents = agents_import.run(1000 if args.quick else 10_000, 1)
    peers = codex_section(sizes, 3 if args.quick else 7, list_rows, resume_rows)
    picture = chart(list_rows, resume_rows)
    elapsed = time.perf_counter() - began
    report = "\n".join([
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {startup.machine()}, "
        f"Python {platform.python_version()}; the whole run took {elapsed / 60:.1f} min.",
        "", "### Journeys (fresh processes, over the pipe)", "", journeys.render(journey_rows),
        "", "### Startup", "", startup_table,
        "", "### Listing (in-process calls)", "", listing.render(list_rows),
        "", "### Resume (in-process calls)", "", resume.render(resume_rows),
        "", "### Recording", "", record.render(records, 32),
        "", "### Memory", "", memory.render(memory_result),
        "", "### Shared store (PostgreSQL) beside the embedded one", "", stores.render(shared),
        "", "### ACP front door", "", acp.render(acp_medians),
        "", "### Following a thread another process writes", "", follow.render(followed),
        "", "### Search", "", search.render(searched),
        "", "### Search through MCP beside JSON-RPC", "", mcp.render(through_mcp),
        "", "### Import", "", import_.render(imported),
        "", "### Every agent's store: import and listing", "", agents_import.render(agents),
        "", "### Peers (sessiond in-process, Codex over its pipe)", "", peers,
        "", picture,
    ])  # fmt: skip
    print(report)
    if args.update_docs:
        path = DOCS / "benchmarks.md"
        text = path.read_text()
        start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
        path.write_text(text[:start] + "\n" + report + "\n" + text[end:])


if __name__ == "__main__":
    main()
