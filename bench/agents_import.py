"""Importing every agent's store: 10,000 real-shaped sessions each, and listing them beside
the agent's own listing.

    python -m bench.agents_import [--sessions 10000] [--agents codex,opencode,...]

For each agent, its pinned real CLI (tests/agents) runs one session headless against the
mock model (a prompt, a shell command, an answer: what tests/compat runs too); that
session, as the CLI wrote it, is the template of a store of `--sessions` copies, each with
a session id of its own (files copied with the id replaced; OpenCode's and Kilo's database
rows copied with every id suffixed). Then, in the same run:
- `sessiond import <agent> --from <store>` in a fresh process: spawn → exit, sessions/s
  (Codex's among them: the figure the others are held against);
- where the agent has a listing command of its own (`opencode session list`, `kilo session
  list`, `qwen sessions list`, `gemini --list-sessions`): its spawn → exit beside
  `sessiond list` of the imported threads from spawn.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.startup import REPO
from tests.agents import install
from tests.agents.clis import AgentHome
from tests.agents.mock_model import Call, MockModel, Reply, Scenario

PROMPT = "[[bench]] check the tests"


@dataclass(frozen=True)
class Spec:
    flag: str
    shell: Call
    run: Callable[[AgentHome], Any]
    store: Callable[[AgentHome], Path]
    listing: Callable[[AgentHome], list[str]] | None = None


def _bin(agent: AgentHome, name: str) -> str:
    return str(agent.bins / name)


CODEX_SHELL = 'const r = await tools.exec_command({"cmd": "echo ok"}); text(JSON.stringify(r));'
SPECS = [
    Spec(
        "codex",
        Call("exec", CODEX_SHELL),
        lambda a: a.codex(PROMPT).check(),
        lambda a: a.codex_sessions,
    ),
    Spec(
        "claude",
        Call("Bash", {"command": "echo ok", "description": "check"}),
        lambda a: a.claude(PROMPT).check(),
        lambda a: a.claude_projects,
    ),
    Spec(
        "gemini",
        Call("run_shell_command", {"command": "echo ok"}),
        lambda a: a.gemini(PROMPT).check(),
        lambda a: a.gemini_tmp,
        lambda a: [_bin(a, "gemini"), "--list-sessions"],
    ),
    Spec(
        "opencode",
        Call("bash", {"command": "echo ok", "description": "check"}),
        lambda a: a.opencode(PROMPT).check(),
        lambda a: a.opencode_data,
        lambda a: [_bin(a, "opencode"), "session", "list"],
    ),
    Spec(
        "kilo",
        Call("bash", {"command": "echo ok", "description": "check"}),
        lambda a: a.kilo(PROMPT).check(),
        lambda a: a.kilo_data,
        lambda a: [_bin(a, "kilo"), "session", "list"],
    ),
    Spec(
        "qwen",
        Call("run_shell_command", {"command": "echo ok", "description": "check"}),
        lambda a: a.qwen(PROMPT).check(),
        lambda a: a.qwen_projects,
        lambda a: [_bin(a, "qwen"), "sessions", "list"],
    ),
    Spec(
        "copilot",
        Call("bash", {"command": "echo ok", "description": "check"}),
        lambda a: a.copilot(PROMPT).check(),
        lambda a: a.copilot_sessions,
    ),
    Spec(
        "pi",
        Call("bash", {"command": "echo ok"}),
        lambda a: a.pi(PROMPT).check(),
        lambda a: a.pi_sessions,
    ),
]


def record_template(spec: Spec, root: Path, bins: Path) -> tuple[AgentHome, MockModel]:
    """One real session of the agent, against a mock model that stays up (its listing
    command is run against the same home later)."""
    model = MockModel(Scenario({"bench": [Reply(calls=(spec.shell,)),
                                          Reply(text="The tests pass.")]})).__enter__()  # fmt: skip
    agent = AgentHome(root, model, bins)
    spec.run(agent)
    return agent, model


# --- copies -----------------------------------------------------------------------------


def replicate_files(store: Path, sessions: int) -> int:
    """`sessions` copies of every session file under `store`: each template session id
    (a UUID in a file's name or content) replaced by a fresh one, in names and contents."""
    files = [p for p in store.rglob("*") if p.is_file() and p.suffix in (".jsonl", ".yaml",
                                                                         ".json")]  # fmt: skip
    # A session's id is in its file's name, else (Gemini CLI: 8 characters of it in the
    # name) in its first line.
    ids = {found for p in files if (found := _uuid_in(str(p.relative_to(store))) or (
        _uuid_in(p.read_text(errors="replace").split("\n", 1)[0]) if p.suffix == ".jsonl"
        else None))}  # fmt: skip
    template = [(path, str(path.relative_to(store)), path.read_bytes()) for path in files]
    made = 0
    for _ in range(sessions - 1):
        fresh = {old: str(uuid.uuid4()) for old in ids}
        for path, relative, text in template:
            for old, new in fresh.items():
                relative = relative.replace(old, new).replace(old[:8], new[:8])
                text = text.replace(old.encode(), new.encode())
            target = store / relative
            if target == path:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(text)
        made += 1
    return made + 1


def _uuid_in(text: str) -> str | None:
    import re

    found = re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", text)
    return found.group(0) if found else None


def replicate_database(database: Path, sessions: int) -> int:
    """`sessions` copies of the template sessions' rows (session, messages, parts, change
    counter), every id suffixed with the copy's number."""
    db = sqlite3.connect(database)
    try:
        session_rows = db.execute("SELECT * FROM session").fetchall()
        columns = [c[1] for c in db.execute("PRAGMA table_info(session)")]
        messages = db.execute("SELECT * FROM message").fetchall()
        parts = db.execute("SELECT * FROM part").fetchall()
        counters = db.execute("SELECT * FROM event_sequence").fetchall()
        with db:
            for n in range(1, sessions):
                suffix = f"_{n:06d}"
                for row in session_rows:
                    copy = list(row)
                    copy[columns.index("id")] += suffix
                    if copy[columns.index("parent_id")]:
                        copy[columns.index("parent_id")] += suffix
                    db.execute(f"INSERT INTO session VALUES ({','.join('?' * len(copy))})", copy)
                db.executemany(
                    "INSERT INTO message VALUES (?, ?, ?, ?, ?)",
                    [(m[0] + suffix, m[1] + suffix, *m[2:]) for m in messages],
                )
                db.executemany("INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)",
                               [(p[0] + suffix, p[1] + suffix, p[2] + suffix, *p[3:])
                                for p in parts])  # fmt: skip
                db.executemany(
                    "INSERT INTO event_sequence VALUES (?, ?, ?)",
                    [(c[0] + suffix, *c[1:]) for c in counters],
                )
        return len(session_rows) * sessions
    finally:
        db.close()


# --- measurements -------------------------------------------------------------------------


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, str]:
    began = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=3600)
    elapsed = time.perf_counter() - began
    if done.returncode != 0:
        raise RuntimeError(f"{argv[:4]} exited {done.returncode}: {done.stderr[-2000:]}")
    return elapsed, done.stdout


def sessiond_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "SESSIOND_DURABILITY": "fsync"}


def measure(spec: Spec, sessions: int, runs: int, tmp: Path, bins: Path) -> dict[str, Any]:
    agent, model = record_template(spec, tmp / spec.flag / "agent", bins)
    try:
        store = spec.store(agent)
        # Not measured: the first import of a user compiles the redaction rules once (a
        # few seconds, cached); whichever agent came first would pay for all. Warmed on
        # the one template session, before it is copied.
        timed([sys.executable, "-m", "server.cli", "--home", str(tmp / "warm-up"), "import",
               spec.flag, "--from", str(store), "--json"], sessiond_env(), REPO)  # fmt: skip
        if spec.flag in ("opencode", "kilo"):
            count = replicate_database(store / f"{spec.flag}.db", sessions)
        else:
            count = replicate_files(store, sessions)
        row: dict[str, Any] = {"agent": spec.flag, "sessions": count}
        imports, lists, own = [], [], []
        for run in range(runs):
            home = tmp / spec.flag / f"home-{run}"
            seconds, out = timed([sys.executable, "-m", "server.cli", "--home", str(home),
                                  "import", spec.flag, "--from", str(store), "--json"],
                                 sessiond_env(), REPO)  # fmt: skip
            summary = json.loads(out)
            assert summary["sessions"] >= sessions and not summary["busy"], summary
            imports.append(seconds)
            seconds, _ = timed([sys.executable, "-m", "server.cli", "--home", str(home),
                                "list", "--limit", "50"], sessiond_env(), REPO)  # fmt: skip
            lists.append(seconds)
            if spec.listing is not None:
                env = agent.env()
                if spec.flag == "pi":
                    env["PATH"] = f"{install.node22(bins)}:{env['PATH']}"
                seconds, listed = timed(spec.listing(agent), env, agent.repo)
                own.append(seconds)
                row["own_list_lines"] = len(listed.splitlines())
        row["import_s"] = statistics.median(imports)
        row["sessions_per_s"] = count / row["import_s"]
        row["list_ms"] = statistics.median(lists) * 1000
        row["own_list_ms"] = statistics.median(own) * 1000 if own else None
        return row
    finally:
        model.__exit__(None, None, None)


def render(rows: list[dict[str, Any]]) -> str:
    codex = next((r for r in rows if r["agent"] == "codex"), None)
    lines = ["| agent | sessions | import: spawn → exit (s) | sessions/s | vs Codex | "
             "`sessiond list` from spawn (ms) | the agent's own listing (ms) | ratio |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for row in rows:
        versus = f"{row['sessions_per_s'] / codex['sessions_per_s']:.2f}x" if codex else "—"
        own = row["own_list_ms"]
        lines.append(
            f"| {row['agent']} | {row['sessions']:,} | {row['import_s']:.1f} | "
            f"{row['sessions_per_s']:,.0f} | {versus} | {row['list_ms']:.0f} | "
            + (f"{own:.0f} | {row['list_ms'] / own:.2f}x |" if own else "— | — |")
        )
    return "\n".join(lines)


def run(sessions: int, runs: int, agents: list[str] | None = None) -> list[dict[str, Any]]:
    """Every agent of `agents` (default: all) at `sessions` each, one after the other."""
    bins = install.bin_dir()
    rows = []
    with tempfile.TemporaryDirectory(prefix="sessiond-bench-agents-") as tmp:
        for spec in SPECS:
            if agents is None or spec.flag in agents:
                rows.append(measure(spec, sessions, runs, Path(tmp), bins))
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
                shutil.rmtree(Path(tmp) / spec.flag, ignore_errors=True)  # ~1 GiB each
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--agents", default=",".join(spec.flag for spec in SPECS))
    args = parser.parse_args()
    print(render(run(args.sessions, args.runs, args.agents.split(","))))


if __name__ == "__main__":
    main()
