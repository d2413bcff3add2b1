"""Import: 10k Codex sessions / 1M rollout lines into sessiond, beside Codex's own indexing.

    python -m bench.import_ [--sessions 10000] [--runs 3] [--timeout 240]

The same generated rollouts (bench.codex_peer's line builders, which `codex app-server`
accepts; 100 lines per session: 12 turns of turn_context, user message, shell call and
output, assistant message and token count, plus a plan and a rename) are
- imported by `sessiond import codex --from DIR` in a fresh process, installed from the
  wheel (bench/install.py): spawn → exit, and
  items per second; then imported again (nothing new: a stat per session);
- listed by a fresh `sessiond serve` over its pipe: spawn → first `thread/list` page of
  one folder (the index the import wrote is in place);
- indexed by Codex itself when `codex` is installed: `codex app-server` spawn →
  `initialize` answer on a fresh CODEX_HOME (it indexes every rollout into its state DB
  before answering), and spawn → first `thread/list` page, first start and restart.
Each side runs `--runs` times on fresh copies; medians are reported.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench import codex_peer
from bench.install import install_wheel
from bench.startup import INITIALIZE, REPO, Peer, sessiond_argv

EPOCH = datetime(2026, 2, 1, tzinfo=UTC)
FOLDERS = 20
TURNS = 12
PAGE = 50
SHELL = {"command": ["bash", "-lc", "make test"]}


def write_rollouts(codex_home: Path, sessions: int) -> int:
    """`sessions` rollouts of 100 lines under `codex_home/sessions`; returns the line count."""
    lines = 0
    made: set[Path] = set()
    for n in range(sessions):
        session_id = str(uuid.uuid4())
        created = EPOCH + timedelta(seconds=n)
        path = codex_peer.rollout_path(codex_home, created, session_id)
        if path.parent not in made:
            path.parent.mkdir(parents=True, exist_ok=True)
            made.add(path.parent)
        cwd = f"/work/project-{n % FOLDERS}"
        parts = [codex_peer.session_meta(session_id, created, cwd)]
        for turn in range(TURNS):
            ts = codex_peer.iso(created + timedelta(milliseconds=turn * 10))
            parts += [
                codex_peer.turn_context(ts, cwd, "gpt-5-codex", "on-request", "workspace-write"),
                codex_peer.message_lines(ts, "user", f"session {n}, turn {turn}: run the tests"),
                codex_peer.tool_lines(ts, f"call_{n}_{turn}", "shell", SHELL, "ok"),
                codex_peer.message_lines(ts, "assistant", "The tests pass. " * 8),
                codex_peer.token_count(ts, 5000 * (turn + 1), 300 * (turn + 1)),
            ]
        ts = codex_peer.iso(created + timedelta(seconds=1))
        plan = {"plan": [{"step": "Run the tests", "status": "completed"}]}
        parts.append(codex_peer.tool_lines(ts, f"plan_{n}", "update_plan", plan, "Plan updated"))
        rename = {"type": "thread_name_updated", "thread_id": session_id,
                  "thread_name": f"Session {n}"}  # fmt: skip
        parts.append(codex_peer.line(ts, "event_msg", rename))
        data = b"".join(parts)
        path.write_bytes(data)
        lines += data.count(b"\n")
    return lines


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "SESSIOND_DURABILITY": "fsync"}


def run_import(
    home: Path, sessions_dir: Path, env: dict[str, str] | None = None, site: Path | None = None
) -> tuple[float, dict[str, Any]]:
    """Spawn → exit of `sessiond import codex`, and its summary; `site`: sessiond installed
    there from its wheel (bench/install.py), as a person has it, instead of this checkout."""
    code = {"PYTHONPATH": str(site)} if site else {}
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "server.cli", "--home", str(home), "import", "codex",
         "--from", str(sessions_dir), "--json"],
        capture_output=True, text=True, cwd=site.parent if site else REPO,
        env={**_env(), **code, **(env or {})}, check=True,
    )  # fmt: skip
    return time.perf_counter() - began, json.loads(done.stdout)


def first_page(home: Path, sessions: int) -> float:
    """Spawn → first page of one folder's threads from a fresh `sessiond serve`."""
    began = time.perf_counter()
    peer = Peer(sessiond_argv(home), {"SESSIOND_DURABILITY": "none"})
    try:
        peer.request("initialize", INITIALIZE)
        page = peer.request("thread/list", {"cwd": "/work/project-3", "limit": PAGE})["threads"]
        elapsed = time.perf_counter() - began
        in_folder = len(range(3, sessions, FOLDERS))
        assert len(page) == min(PAGE, in_folder)
        assert all(t["origin"]["agent"] == "codex" for t in page)
        return elapsed
    finally:
        peer.close()


def codex_first_start(codex_home: Path, timeout: float) -> dict[str, float | None]:
    """Codex on the same rollouts: spawn → `initialize` (it indexes them first) and spawn →
    first page, on its first start and on a restart."""
    (codex_home / "config.toml").write_text(codex_peer.CONFIG)
    row: dict[str, float | None] = {}
    for label in ("first", "restart"):
        server = codex_peer.AppServer(codex_home)
        try:
            row[f"{label}_initialize_s"] = server.initialize(timeout)
            server.request("thread/list", {"limit": PAGE, "cwd": "/work/project-3"}, timeout)
            row[f"{label}_page_s"] = time.perf_counter() - server.spawned
        except codex_peer.CodexTimeout:
            row[f"{label}_initialize_s"] = row.get(f"{label}_initialize_s")
            row[f"{label}_page_s"] = None
        finally:
            server.close(kill=row.get(f"{label}_page_s") is None)
    return row


def run(sessions: int, runs: int, timeout: float = 240.0) -> dict[str, Any]:
    """Every measurement on fresh copies of one set of generated rollouts. The two sides
    take turns, run by run, so a machine that gets busier or quieter (it is shared)
    weighs on both alike; nothing is deleted until the end (deleting 10k files makes the
    filesystem's next commits, and so the next run's file creations, slow)."""
    result: dict[str, Any] = {"sessions": sessions, "runs": runs}
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "codex"
        site = install_wheel(Path(tmp) / "install")
        result["lines"] = write_rollouts(source, sessions)
        result["mib"] = sum(p.stat().st_size for p in source.rglob("*.jsonl")) / 2**20
        imports, again, pages, rates, items = [], [], [], [], 0
        peer = codex_peer.available()
        trials = []
        for run_no in range(runs):
            home = Path(tmp) / f"home-{run_no}"
            seconds, summary = run_import(home, source / "sessions", site=site)
            assert summary["created"] == sessions, summary
            imports.append(seconds)
            items = summary["items"]
            rates.append(items / summary["seconds"])
            seconds, summary = run_import(home, source / "sessions", site=site)
            assert summary["unchanged"] == sessions and summary["items"] == 0, summary
            again.append(seconds)
            pages.append(first_page(home, sessions))
            if peer:
                copy = Path(tmp) / f"codex-copy-{run_no}"
                shutil.copytree(source, copy)
                trials.append(codex_first_start(copy, timeout))
        result.update(items=items, import_s=statistics.median(imports),
                      items_per_s=statistics.median(rates), again_s=statistics.median(again),
                      page_ms=statistics.median(pages) * 1000)  # fmt: skip
        result["codex"] = None
        if peer:
            result["codex_version"] = codex_peer.version()
            result["codex"] = {key: _median([t[key] for t in trials]) for key in trials[0]}
            codex_imports = [t["first_initialize_s"] for t in trials]
            result["ratios"] = [
                s / c for s, c in zip(imports, codex_imports, strict=True) if c is not None
            ]
    return result


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if len(known) == len(values) else None


def render(result: dict[str, Any]) -> str:
    codex = result["codex"]
    lines = [
        f"{result['sessions']:,} Codex sessions, {result['lines']:,} rollout lines "
        f"({result['mib']:.0f} MiB), medians of {result['runs']} runs on fresh copies.",
        "",
        "| what | sessiond | Codex app-server |",
        "|---|---:|---:|",
        f"| first import / first start: spawn → done (s) | {result['import_s']:.1f} "
        f"({result['items']:,} items, {result['items_per_s']:,.0f} items/s) | "
        f"{_seconds(codex, 'first_initialize_s')} (spawn → `initialize`: its state DB built) |",
        f"| spawn → first `thread/list` page of one folder (ms) | {result['page_ms']:.0f} | "
        f"{_ms(codex, 'first_page_s')} first start, {_ms(codex, 'restart_page_s')} restart |",
        f"| again, nothing new: spawn → done (s) | {result['again_s']:.1f} | "
        f"{_seconds(codex, 'restart_initialize_s')} (restart → `initialize`) |",
    ]
    if codex is None:
        lines += ["", f"`codex` is not installed, so its column is empty ({codex_peer.INSTALL})."]
    else:
        lines += ["", f"Codex: `{result['codex_version']}`, offline (bench.codex_peer's config)."]
        if result.get("ratios"):
            ratios = ", ".join(f"{r:.2f}" for r in result["ratios"])
            lines.append(f"sessiond / Codex first pass, run by run: {ratios} "
                         f"(median {statistics.median(result['ratios']):.2f}).")  # fmt: skip
    return "\n".join(lines)


def _seconds(codex: dict[str, Any] | None, key: str) -> str:
    value = None if codex is None else codex.get(key)
    return "—" if value is None else f"{value:.1f}"


def _ms(codex: dict[str, Any] | None, key: str) -> str:
    value = None if codex is None else codex.get(key)
    return "—" if value is None else f"{value * 1000:,.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=240.0)
    args = parser.parse_args()
    result = run(args.sessions, args.runs, args.timeout)
    print(render(result))
    print({k: v for k, v in result.items()})


if __name__ == "__main__":
    main()
