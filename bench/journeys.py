"""Journeys: the waits a person feels, each from a fresh process over the real pipe, beside
Codex app-server in the same run.

    python -m bench.journeys [--threads 10000] [--messages 100000] [--runs 3] [--no-codex]

One data dir per system holds `--threads` small threads (bench.listing's: 20 folders) and
one long thread of `--messages` messages (bench.resume's item mix: 16 messages in every 20
items) in a real git repo. The small threads are Codex rollouts (bench.codex_peer), the same
files for both: Codex's state DB is built by a first start that is not timed, and sessiond
imports them (`sessiond import codex`), its index then opened by a first start that is not
timed either. Every run spawns a new server process, sessiond and Codex alternating; a row
is the median of `--runs` runs.

- J1 open a window: spawn → `initialize` → first `thread/list` page (50), the index
  present, three ways: every thread (no filter) with 1 and with 20 workspace folders (real
  git repos) in `initialize`, and one folder's threads (`cwd` filter). Codex: the same
  lists, its state DB present (a restart).
- J1' a second window: a server the first window spawned is running (`sessiond client
  --spawn`, which starts `serve --ws 0 --linger`); a new WebSocket connection (bearer
  token from the discovery file) → `initialize` → the first `thread/list` page of every
  thread, with 1 and 20 folders, timed in this process (the editor is running already).
- J2 click Resume: spawn → `initialize` → `thread/resume` of the long thread, its answer
  carrying the newest 200 messages. Codex: spawn → `initialize` → `thread/resume`
  (`excludeTurns`) → `thread/turns/list` of the newest turns with their items, as many
  turns as hold 200 messages.
- J3 hand the agent its context: J2, then every message since the last boundary
  (`thread/read` back from `nextBeforeSeq`). Codex: spawn → `thread/resume` with every turn.
- J4 scroll back: in a process that just resumed the long thread, one `thread/read` page of
  200 items deep in history (before seq 1,000) or near the end (just before the resume's
  messages); the time of that request alone.

sessiond runs as a person has it: its wheel installed in a fresh virtual environment, bytecode
compiled at install, spawned as the `sessiond` command (bench/install.py); `--checkout`
runs this checkout instead (with PYTHONDONTWRITEBYTECODE=1: no bytecode, every spawn
compiles what it imports). J1 also reports its spawn → `initialize` part.

sessiond's answers are timed once parsed (the client needs the cursor); Codex's when their
line arrives, before parsing (codex_peer's client), which favours Codex on J3's one big line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import codex_peer, resume
from bench.codex_peer import AppServer
from bench.install import install_venv, installed_env
from bench.listing import FOLDERS, PAGE, write_threads
from bench.rpc import REPO, PipelinedServer
from restore.home.layout import Layout
from restore.service import Settings, open_service
from restore.stores.api import Durability

MESSAGE_LIMIT = 200
MESSAGES_PER_ITEMS = (16, 20)  # bench.resume's mix: 16 messages in every 20 items
MESSAGES_PER_TURN = 16  # and one user message (a Codex turn) per 20 items
DEEP_BEFORE = 1000
READ_PAGE = 10_000  # J3's thread/read pages (cut by bytes under the frame limit too)
TIMEOUT = 600.0
TARGETS = {"J1 cwd": 0.5, "J1 all 1": 0.75, "J1 all 20": 0.75, "J2": 0.1, "J3": 0.33}
"""sessiond / Codex, at most."""
FOLDER_COUNTS = (1, 20)
SECOND_WINDOW_MS = 15.0  # J1': connect to the running server → first page, at most
SECOND_WINDOWS_PER_RUN = 10  # connections are cheap: more samples per run
J4_RATIO, J4_MS = 2.0, 20.0


@dataclass
class Homes:
    sessiond: Path
    codex: Path | None
    repo: Path
    command: Path | None = None  # the installed `sessiond` (None: this checkout)
    folders: list[Path] = field(default_factory=list)  # 20 git repos for `initialize`
    thread_id: str = ""
    codex_thread_id: str = ""
    codex_turns: int = 0
    codex_items: int = 0
    messages: int = 0
    listed: int = 0  # threads on the first page of folder 1


@dataclass
class Timings:
    runs: dict[str, list[float]] = field(default_factory=dict)

    def add(self, key: str, seconds: float) -> None:
        self.runs.setdefault(key, []).append(seconds * 1000)

    def median(self, key: str) -> float | None:
        values = self.runs.get(key)
        return statistics.median(values) if values else None


def _git_repo(path: Path) -> None:
    path.mkdir()
    for args in (["init", "-q", "-b", "main"], ["-c", "user.email=b@b", "-c", "user.name=b",
                 "commit", "-q", "--allow-empty", "-m", "init"]):  # fmt: skip
        subprocess.run(["git", *args], cwd=path, check=True)


def _import(homes: Homes, rollouts: Path) -> None:
    """`sessiond import codex` of the rollouts, as a person brings their sessions in."""
    argv = [str(homes.command)] if homes.command else [sys.executable, "-m", "server.cli"]
    env = installed_env() if homes.command else {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([*argv, "--home", str(homes.sessiond), "import", "codex", "--from",
                    str(rollouts / "sessions")], check=True, stdout=subprocess.DEVNULL,
                   env={**env, "SESSIOND_DURABILITY": "none"}, timeout=TIMEOUT * 5)  # fmt: skip


def prepare(
    root: Path, threads: int, messages: int, codex: bool, wheel: bool = True,
    imported: bool = True,
) -> Homes:  # fmt: skip
    """Both data dirs, with their indexes built (by an untimed first start). `imported`:
    sessiond's small threads are the rollouts Codex lists, imported; otherwise written in
    sessiond's own format (bench.listing), which is quicker at 100,000."""
    items = messages * MESSAGES_PER_ITEMS[1] // MESSAGES_PER_ITEMS[0]
    homes = Homes(root / "sessiond", root / "codex" if codex else None, root / "repo")
    homes.command = install_venv(root / "install") if wheel else None
    _git_repo(homes.repo)
    (root / "folders").mkdir()
    for n in range(max(FOLDER_COUNTS)):
        homes.folders.append(root / "folders" / f"project-{n}")
        _git_repo(homes.folders[-1])
    layout = Layout(homes.sessiond)
    rollouts = homes.codex or root / "rollouts"
    if imported:
        codex_peer.write_list_threads(rollouts, threads)
        _import(homes, rollouts)
    else:
        write_threads(layout, threads)
    service = open_service(Settings(layout.home, durability=Durability.NONE))
    homes.thread_id = resume._make_thread(service, homes.repo, items)
    service.close_all()
    homes.messages = messages
    homes.listed = min(PAGE, len(range(1, threads, FOLDERS)))
    server = PipelinedServer(homes.sessiond, sessiond=homes.command)
    server.request("initialize", {"clientInfo": {"name": "bench"}})
    server.request("thread/list", {"limit": PAGE})  # opens the index after the import
    server.close()
    if homes.codex is not None:
        homes.codex.mkdir(exist_ok=True)
        (homes.codex / "config.toml").write_text(codex_peer.CONFIG)
        if not imported:
            codex_peer.write_list_threads(homes.codex, threads)
        body = codex_peer.resume_body(items)
        homes.codex_thread_id = codex_peer.write_resume_thread(homes.codex, homes.repo, body, 0)
        homes.codex_turns, homes.codex_items = body.turns, body.turn_items
        first = AppServer(homes.codex)
        try:
            first.initialize(TIMEOUT)  # indexes every rollout into its state DB
            first.request("thread/list", {"limit": PAGE, "cwd": "/work/project-1"}, TIMEOUT)
        finally:
            first.close()
    return homes


# --- sessiond ---------------------------------------------------------------------------


def _sessiond(homes: Homes, folders: list[Path] | None = None) -> tuple[PipelinedServer, float]:
    server, began, _ = _spawned(homes, folders)
    return server, began


def _spawned(
    homes: Homes, folders: list[Path] | None = None
) -> tuple[PipelinedServer, float, float]:
    """A new server, initialized: it, when it was spawned, and seconds to `initialize`."""
    began = time.perf_counter()
    server = PipelinedServer(homes.sessiond, {"SESSIOND_DURABILITY": "fsync"},
                             sessiond=homes.command)  # fmt: skip
    named = [{"path": str(path), "name": path.name, "trusted": True}
             for path in folders or [homes.repo]]  # fmt: skip
    server.request("initialize", {"clientInfo": {"name": "bench"}, "workspaceFolders": named})
    return server, began, time.perf_counter() - began


def _list_params(cwd: bool) -> dict[str, Any]:
    return {"limit": PAGE, "cwd": "/work/project-1"} if cwd else {"limit": PAGE}


def sessiond_list(homes: Homes, folders: int = 1, cwd: bool = True) -> tuple[float, float]:
    """J1: `cwd` lists one folder's threads; otherwise every thread, after an `initialize`
    naming `folders` workspace folders. Seconds to the page, and to `initialize`."""
    server, began, ready = _spawned(homes, homes.folders[:folders])
    try:
        params = _list_params(cwd)
        page = server.request("thread/list", params)
        elapsed = time.perf_counter() - began
        assert len(page["threads"]) == (homes.listed if cwd else PAGE), len(page["threads"])
        return elapsed, ready
    finally:
        server.close()


def _spawn_shared(homes: Homes) -> dict[str, Any]:
    """The first window, as `sessiond client --spawn` opens it: the server it starts
    lingers, and its discovery record is returned."""
    argv = [str(homes.command)] if homes.command else [sys.executable, "-m", "server.cli"]
    env = installed_env() if homes.command else {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run(
        [*argv, "--home", str(homes.sessiond), "client", "--spawn", "--linger", "60", "list"],
        cwd=REPO, check=True, stdout=subprocess.DEVNULL,
        env={**env, "SESSIOND_DURABILITY": "fsync"}, timeout=TIMEOUT,
    )  # fmt: skip
    (path,) = (homes.sessiond / "servers").glob("*.json")
    record: dict[str, Any] = json.loads(path.read_text())
    return record


async def _second_windows(record: dict[str, Any], folders: list[Path], n: int) -> list[float]:
    from server.cli.client import Client

    named = [str(folder) for folder in folders]
    times = []
    for _ in range(n):
        began = time.perf_counter()
        client = await Client.open(record, folders=named)
        page = await client.request("thread/list", {"limit": PAGE})
        times.append(time.perf_counter() - began)
        assert len(page["threads"]) == PAGE, len(page["threads"])
        await client.close()
    return times


def sessiond_second_window(homes: Homes, runs: int) -> Timings:
    """J1': every later window connects to the server the first one spawned."""
    record = _spawn_shared(homes)
    timings = Timings()
    try:
        for _ in range(runs):
            for folders in FOLDER_COUNTS:
                for seconds in asyncio.run(
                    _second_windows(record, homes.folders[:folders], SECOND_WINDOWS_PER_RUN)
                ):
                    timings.add(f"J1' {folders}", seconds)
    finally:
        os.kill(record["pid"], signal.SIGTERM)  # the server the bench started
    return timings


def _resume(server: PipelinedServer, homes: Homes) -> dict[str, Any]:
    report = server.request(
        "thread/resume", {"threadId": homes.thread_id, "messageLimit": MESSAGE_LIMIT}
    )
    assert report["status"] == "ready", report["status"]
    messages = report["messages"]
    assert len(messages["items"]) == MESSAGE_LIMIT and messages["total"] == homes.messages
    return report


RSS_TARGET_MIB = 100  # the server's peak resident memory after resuming the long thread


def sessiond_resume(homes: Homes, peaks: list[float] | None = None) -> float:
    """J2; `peaks` gets the server's peak RSS (MiB) once the answer is in."""
    server, began = _sessiond(homes)
    try:
        _resume(server, homes)
        elapsed = time.perf_counter() - began
        if peaks is not None:
            peaks.append(server.peak_rss_kib() / 1024)
        return elapsed
    finally:
        server.close()


def sessiond_context(homes: Homes) -> float:
    """Resume, then page back to the boundary: every message the next model call sees."""
    server, began = _sessiond(homes)
    try:
        messages = _resume(server, homes)["messages"]
        got = len(messages["items"])
        cursor, boundary = messages["nextBeforeSeq"], messages["boundarySeq"]
        while cursor is not None and cursor > boundary + 1:
            page = server.request(
                "thread/read",
                {"threadId": homes.thread_id, "beforeSeq": cursor, "limit": READ_PAGE},
            )
            got += sum(1 for item in page["items"]
                       if item["type"] == "message" and item["seq"] > boundary)  # fmt: skip
            cursor = page["nextBeforeSeq"]
        elapsed = time.perf_counter() - began
        assert got == homes.messages, (got, homes.messages)
        return elapsed
    finally:
        server.close()


def sessiond_page(homes: Homes, deep: bool) -> float:
    """One page of 200 items back, in a process that has just resumed: the request alone."""
    server, _ = _sessiond(homes)
    try:
        messages = _resume(server, homes)["messages"]
        before = DEEP_BEFORE if deep else messages["nextBeforeSeq"]
        params = {"threadId": homes.thread_id, "beforeSeq": before, "limit": MESSAGE_LIMIT}
        began = time.perf_counter()
        page = server.request("thread/read", params)
        elapsed = time.perf_counter() - began
        assert len(page["items"]) == MESSAGE_LIMIT and page["items"][-1]["seq"] == before - 1
        return elapsed
    finally:
        server.close()


# --- Codex ------------------------------------------------------------------------------


def _codex(homes: Homes) -> AppServer:
    assert homes.codex is not None
    server = AppServer(homes.codex)
    server.initialize(TIMEOUT)
    return server


def codex_list(homes: Homes, cwd: bool = True) -> tuple[float, float]:
    assert homes.codex is not None
    server = AppServer(homes.codex)
    try:
        ready = server.initialize(TIMEOUT)
        params = _list_params(cwd)
        _, result = server.request("thread/list", params, TIMEOUT)
        elapsed = time.perf_counter() - server.spawned
        assert len(result["data"]) == (homes.listed if cwd else PAGE), len(result["data"])
        return elapsed, ready
    finally:
        server.close()


def codex_resume(homes: Homes) -> float:
    """Resume without turns, then the newest turns holding at least 200 messages."""
    server = _codex(homes)
    turns = math.ceil(MESSAGE_LIMIT / MESSAGES_PER_TURN)
    try:
        params = {"threadId": homes.codex_thread_id, "excludeTurns": True}
        server.request("thread/resume", params, TIMEOUT)
        page_params = {"threadId": homes.codex_thread_id, "limit": turns, "itemsView": "full"}
        _, page = server.request("thread/turns/list", page_params, TIMEOUT)
        elapsed = time.perf_counter() - server.spawned
        items = sum(len(turn["items"]) for turn in page["data"])
        assert len(page["data"]) == turns and items >= MESSAGE_LIMIT, (len(page["data"]), items)
        return elapsed
    finally:
        server.close()


def codex_context(homes: Homes) -> float:
    server = _codex(homes)
    try:
        params = {"threadId": homes.codex_thread_id}
        _, result = server.request("thread/resume", params, TIMEOUT)
        elapsed = time.perf_counter() - server.spawned
        turns = result["thread"]["turns"]
        items = sum(len(turn["items"]) for turn in turns)
        assert (len(turns), items) == (homes.codex_turns, homes.codex_items), (len(turns), items)
        return elapsed
    finally:
        server.close()


# --- the run ----------------------------------------------------------------------------


def run(
    threads: int, messages: int, runs: int, codex: bool | None = None, wheel: bool = True
) -> dict[str, Any]:
    codex = codex_peer.available() if codex is None else codex
    root = Path(tempfile.mkdtemp(prefix="sessiond-journeys-"))
    try:
        began = time.perf_counter()
        homes = prepare(root, threads, messages, codex, wheel)
        prepared = time.perf_counter() - began
        timings = Timings()
        peaks: list[float] = []
        journeys: list[tuple[str, Any, Any]] = [
            ("J1 cwd", sessiond_list, codex_list),
            (
                "J1 all 1",
                lambda h: sessiond_list(h, 1, cwd=False),
                lambda h: codex_list(h, cwd=False),
            ),
            (
                "J1 all 20",
                lambda h: sessiond_list(h, 20, cwd=False),
                lambda h: codex_list(h, cwd=False),
            ),
            ("J2", lambda h: sessiond_resume(h, peaks), codex_resume),
            ("J3", sessiond_context, codex_context),
        ]
        for n in range(runs):
            for name, ours, theirs in journeys:
                pair = [("sessiond", ours), ("codex", theirs)] if codex else [("sessiond", ours)]
                for who, work in pair if n % 2 == 0 else reversed(pair):
                    took = work(homes)
                    if isinstance(took, tuple):  # J1: the page, and `initialize` before it
                        took, ready = took
                        timings.add(f"{name} {who} initialize", ready)
                    timings.add(f"{name} {who}", took)
            for deep in (n % 2 == 0, n % 2 != 0):  # near and deep pages, alternating first
                timings.add(f"J4 {'deep' if deep else 'near'}", sessiond_page(homes, deep))
        second = sessiond_second_window(homes, runs)
        version = codex_peer.version() if codex else None
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {"threads": threads, "messages": messages, "runs": runs, "timings": timings,
            "second_window": second, "codex": version, "prepare_s": prepared, "wheel": wheel,
            "peak_rss_mib": max(peaks) if peaks else None}  # fmt: skip


SCALE_TARGET = 1.2  # J1 at the largest size / J1 at the smallest, at most


def scale(sizes: list[int], runs: int) -> dict[str, Any]:
    """J1 (every thread, 20 folders; one folder's threads) at each number of threads, in
    fresh data dirs (no Codex, a short long thread): is the first page flat in the number
    of threads?"""
    timings = Timings()
    for size in sizes:
        root = Path(tempfile.mkdtemp(prefix="sessiond-journeys-scale-"))
        try:
            homes = prepare(root, size, 1000, codex=False, imported=False)
            for n in range(runs):
                ways = [("all 20", 20, False), ("cwd", 1, True)]
                for name, folders, cwd in ways if n % 2 == 0 else reversed(ways):
                    timings.add(f"{size} {name}", sessiond_list(homes, folders, cwd)[0])
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return {"sizes": sizes, "runs": runs, "timings": timings}


def render_scale(result: dict[str, Any]) -> str:
    timings: Timings = result["timings"]
    sizes = result["sizes"]
    lines = [
        "| threads | J1 every thread, 20 folders (median ms) | J1 one folder, `cwd` (median ms) |",
        "|---:|---:|---:|",
    ]
    for size in sizes:
        lines.append(f"| {size:,} | {_ms(timings.median(f'{size} all 20'))} | "
                     f"{_ms(timings.median(f'{size} cwd'))} |")  # fmt: skip
    first, last = timings.median(f"{sizes[0]} all 20"), timings.median(f"{sizes[-1]} all 20")
    if first and last:
        met = "met" if last / first <= SCALE_TARGET else "**not met**"
        lines += ["", f"J1 (every thread) at {sizes[-1]:,} threads is {last / first:.2f}x its "
                  f"figure at {sizes[0]:,} (target ≤ {SCALE_TARGET}x): {met}. Medians of "
                  f"{result['runs']} fresh processes; sessiond from its wheel."]  # fmt: skip
    return "\n".join(lines)


def _ms(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.1f}" if value < 100 else f"{value:,.0f}"


def render(result: dict[str, Any]) -> str:
    timings: Timings = result["timings"]
    threads, messages = f"{result['threads']:,}", f"{result['messages']:,}"
    labels = {
        "J1 all 1": f"J1 open a window: spawn → first `thread/list` page of every thread "
        f"({threads} threads, index present), 1 workspace folder; Codex restarted, no filter",
        "J1 all 20": "J1 the same, 20 workspace folders (git repos) in `initialize`",
        "J1 cwd": "J1 the same, one folder's threads (`cwd` filter, 1 folder); Codex with "
        "the same `cwd` filter",
        "J2": f"J2 click Resume on a {messages}-message thread: spawn → the answer with the "
        f"newest {MESSAGE_LIMIT} messages; Codex: `thread/resume` `excludeTurns` + the newest "
        f"{math.ceil(MESSAGE_LIMIT / MESSAGES_PER_TURN)} turns (`thread/turns/list`)",
        "J3": "J3 hand the agent its context: J2 + every message since the boundary "
        "(`thread/read` pages back); Codex: a full `thread/resume`",
    }
    lines = [
        "| journey | sessiond (median ms) | Codex (median ms) | sessiond / Codex | target | |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name, label in labels.items():
        ours, theirs = timings.median(f"{name} sessiond"), timings.median(f"{name} codex")
        ratio = ours / theirs if ours is not None and theirs else None
        met = "—" if ratio is None else ("met" if ratio <= TARGETS[name] else "**not met**")
        ratio_cell = "—" if ratio is None else f"{ratio:.2f}x"
        lines.append(f"| {label} | {_ms(ours)} | {_ms(theirs)} | {ratio_cell} | "
                     f"≤ {TARGETS[name]}x | {met} |")  # fmt: skip
    lines += ["", "| J1, of which spawn → `initialize` | sessiond (median ms) "
              "| Codex (median ms) |", "|---|---:|---:|"]  # fmt: skip
    for name in ("J1 all 1", "J1 all 20", "J1 cwd"):
        ours, theirs = (timings.median(f"{name} {who} initialize") for who in ("sessiond", "codex"))
        lines.append(f"| {name.removeprefix('J1 ')} | {_ms(ours)} | {_ms(theirs)} |")
    near, deep = timings.median("J4 near"), timings.median("J4 deep")
    assert near is not None and deep is not None
    ok = deep <= J4_RATIO * near and max(near, deep) <= J4_MS
    lines += [
        "",
        "| J4 scroll back: one `thread/read` page of 200, after a resume in a fresh process "
        "(the request alone) | median ms |",
        "|---|---:|",
        f"| near the end (just before the resume's messages) | {_ms(near)} |",
        f"| deep in history (before seq {DEEP_BEFORE:,}) | {_ms(deep)} |",
        f"| deep / near (target ≤ {J4_RATIO:.0f}x, each ≤ {J4_MS:.0f} ms) | "
        f"{deep / near:.2f}x: {'met' if ok else '**not met**'} |",
    ]
    second: Timings | None = result.get("second_window")
    if second is not None:
        lines += ["", "| J1' a second window: connect to the running server (WebSocket, "
                  "token from its discovery file) → `initialize` → first `thread/list` page "
                  f"of every thread ({threads} threads) | median ms | J1, spawn (median ms) "
                  f"| target | |", "|---|---:|---:|---:|---|"]  # fmt: skip
        for folders in FOLDER_COUNTS:
            ours = second.median(f"J1' {folders}")
            spawn = timings.median(f"J1 all {folders} sessiond")
            met = "—" if ours is None else ("met" if ours <= SECOND_WINDOW_MS else "**not met**")
            lines.append(f"| {folders} workspace folder{'s' if folders > 1 else ''} | "
                         f"{_ms(ours)} | {_ms(spawn)} | ≤ {SECOND_WINDOW_MS:.0f} ms | "
                         f"{met} |")  # fmt: skip
        samples = len(second.runs.get(f"J1' {FOLDER_COUNTS[0]}", []))
        lines += ["", f"J1': {samples} connections per row, each a new one."]
    rss = result.get("peak_rss_mib")
    if rss is not None:
        met = "met" if rss <= RSS_TARGET_MIB else "**not met**"
        lines += ["", f"Peak RSS of the server after resuming the {messages}-message thread "
                  f"(J2, the largest of its runs): {rss:.0f} MiB (target ≤ {RSS_TARGET_MIB} "
                  f"MiB): {met}."]  # fmt: skip
    peer = f"`{result['codex']}`" if result["codex"] else "Codex not on PATH: not run"
    install = (
        "from its wheel in a fresh virtual environment (bytecode compiled at install), "
        "spawned as `sessiond`"
        if result["wheel"]
        else "this checkout (no bytecode)"
    )
    lines += ["", f"Medians of {result['runs']} fresh processes per cell; sessiond installed "
              f"{install}; peer: {peer}; preparing both data dirs took "
              f"{result['prepare_s']:.0f} s."]  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-codex", action="store_true")
    parser.add_argument("--checkout", action="store_true", help="this checkout, not a wheel")
    parser.add_argument("--scale", help="J1 alone at these numbers of threads: 1000,100000")
    args = parser.parse_args()
    if args.scale:
        print(render_scale(scale([int(n) for n in args.scale.split(",")], args.runs)))
        return
    result = run(args.threads, args.messages, args.runs, False if args.no_codex else None,
                 wheel=not args.checkout)  # fmt: skip
    print(render(result))
    for key, values in result["timings"].runs.items():
        print(key, [round(v, 1) for v in values])
    for key, values in result["second_window"].runs.items():
        print(key, [round(v, 1) for v in values])


if __name__ == "__main__":
    main()
