"""Codex app-server as a peer: the listing and resume workloads, on equivalent rollouts.

    python -m bench.codex_peer [--sizes 1000,10000,100000] [--runs 7] [--timeout 60]
                               [--codex-only]

Needs `codex` on PATH (`npm install --prefix /tmp/codex-peer @openai/codex`, then
`PATH=/tmp/codex-peer/node_modules/.bin:$PATH`). Everything runs offline in a temporary
CODEX_HOME whose config.toml names a model provider on 127.0.0.1 and turns the plugin
and app syncs off, so listing and resuming need neither a login nor the network.

Listing: the threads of bench.listing (1k/10k/100k, three items each: session_meta, the
user's message, the assistant's answer, 20 workspace folders) as Codex rollout files;
`thread/list` for one folder's first page (50, newest first), checked against the ids we
expect. Resume: one thread with bench.resume's item mix, mapped to the rollout lines Codex
writes for them; `thread/resume` (full turns, the default, and `excludeTurns`), each run on
a fresh copy of the thread because Codex keeps a resumed thread loaded for 30 minutes.
"""

from __future__ import annotations

import argparse
import itertools
import os
import queue
import re
import shutil
import signal
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import orjson

from bench import listing, resume
from bench.listing import FOLDERS, PAGE

INSTALL = "npm install --prefix /tmp/codex-peer @openai/codex@0.171.0"
PROVIDER = "bench"
CONFIG = f"""\
# Written by bench.codex_peer: a provider on 127.0.0.1 and no plugin or app syncs, so
# listing and resuming need no login and make no network call.
model = "bench-model"
model_provider = "{PROVIDER}"

[model_providers.{PROVIDER}]
name = "{PROVIDER}"
base_url = "http://127.0.0.1:9/v1"
wire_api = "responses"

[features]
plugins = false
remote_plugin = false
apps = false
in_app_updates = false
"""
LIST_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
RESUME_EPOCH = datetime(2026, 3, 1, tzinfo=UTC)
RESUME_LOG = "warn,codex_rollout::recorder=debug"  # one line per rollout load: see check_loaded
BIG = 100_000  # from this size on, fewer runs: each one is seconds of Codex's time


class CodexTimeout(Exception):
    """A request that did not answer within the cap: reported as a cell, never waited out."""


class CodexError(RuntimeError):
    """Codex answered with a JSON-RPC error, or with the wrong threads."""


INSTALLED = Path("/tmp/codex-peer/node_modules/.bin/codex")


def executable() -> str | None:
    """`codex` on PATH, else where `INSTALL` puts it; None when neither has it."""
    return shutil.which("codex") or (str(INSTALLED) if INSTALLED.exists() else None)


def available() -> bool:
    """Whether the peer can be measured at all: `codex` on PATH or installed by `INSTALL`."""
    return executable() is not None


def version() -> str:
    """`codex --version`, e.g. `codex-cli 0.171.0`: the table says which Codex it measured."""
    done = subprocess.run([executable() or "codex", "--version"], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    return done.stdout.strip() or done.stderr.strip()


# --- rollouts ---------------------------------------------------------------------------


def iso(moment: datetime) -> str:
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


def line(ts: str, kind: str, payload: dict[str, Any]) -> bytes:
    return orjson.dumps({"timestamp": ts, "type": kind, "payload": payload}) + b"\n"


def rollout_path(home: Path, created: datetime, thread_id: str) -> Path:
    """Where Codex keeps a rollout: sessions/YYYY/MM/DD/rollout-<timestamp>-<id>.jsonl."""
    day = home / "sessions" / f"{created:%Y}" / f"{created:%m}" / f"{created:%d}"
    return day / f"rollout-{created:%Y-%m-%dT%H-%M-%S}-{thread_id}.jsonl"


def session_meta(
    thread_id: str, created: datetime, cwd: str, git: dict[str, Any] | None = None
) -> bytes:
    """The first line of every rollout, as Codex writes it for an interactive CLI session
    (`git`: `{commit_hash, branch, repository_url}`, as Codex records it in a repo)."""
    ts = iso(created)
    return line(ts, "session_meta", {
        "id": thread_id, "timestamp": ts, "cwd": cwd, "originator": "codex_cli_rs",
        "cli_version": "0.0.0", "source": "cli", "model_provider": PROVIDER,
        "base_instructions": None, **({"git": git} if git else {}),
    })  # fmt: skip


def turn_context(ts: str, cwd: str, model: str, approval: str, sandbox: str) -> bytes:
    """The per-turn context line: where, with which model, under which policies."""
    return line(ts, "turn_context", {
        "cwd": cwd, "approval_policy": approval, "sandbox_policy": {"type": sandbox},
        "model": model, "effort": "medium", "summary": "auto",
    })  # fmt: skip


def token_count(ts: str, input_tokens: int, output_tokens: int, cached: int = 0) -> bytes:
    """A running total of the session's tokens (Codex repeats the total, not the call's)."""
    usage = {"input_tokens": input_tokens, "cached_input_tokens": cached,
             "output_tokens": output_tokens, "reasoning_output_tokens": 0,
             "total_tokens": input_tokens + output_tokens}  # fmt: skip
    info = {"total_token_usage": usage, "last_token_usage": usage, "model_context_window": None}
    return line(ts, "event_msg", {"type": "token_count", "rate_limits": None, "info": info})


def message_lines(ts: str, role: str, text: str) -> bytes:
    """A message as Codex records it: in the model's history (response_item) and in the
    transcript (event_msg: user_message / agent_message, what `thread/resume` rebuilds turns from).
    """
    content = [{"type": "input_text" if role == "user" else "output_text", "text": text}]
    event: dict[str, Any] = {"type": "agent_message", "message": text}
    if role == "user":
        event = {"type": "user_message", "message": text, "kind": "plain"}
    item = {"type": "message", "role": role, "content": content}
    return line(ts, "response_item", item) + line(ts, "event_msg", event)


def tool_lines(ts: str, call_id: str, name: str, arguments: dict[str, Any], output: str) -> bytes:
    call = {"type": "function_call", "name": name, "call_id": call_id,
            "arguments": orjson.dumps(arguments).decode()}  # fmt: skip
    result = {"type": "function_call_output", "call_id": call_id, "output": output}
    return line(ts, "response_item", call) + line(ts, "response_item", result)


def write_list_threads(home: Path, count: int) -> list[str]:
    """bench.listing's threads as rollouts; thread n is n seconds newer than thread n-1.

    Returns the ids by n. Plain writes (no subprocess, no JSON library per field) keep
    100k files to seconds; mtime is set to the creation time so Codex's updated_at agrees.
    """
    ids = []
    made: set[Path] = set()
    for n in range(count):
        thread_id = str(uuid.uuid4())
        created = LIST_EPOCH + timedelta(seconds=n)
        ts = iso(created)
        path = rollout_path(home, created, thread_id)
        if path.parent not in made:
            path.parent.mkdir(parents=True, exist_ok=True)
            made.add(path.parent)
        with open(path, "wb") as out:
            out.write(session_meta(thread_id, created, f"/work/project-{n % FOLDERS}"))
            out.write(message_lines(ts, "user", f"thread {n}: fix the test"))
            out.write(message_lines(ts, "assistant", "done " * 50))
        stamp = created.timestamp()
        os.utime(path, (stamp, stamp))
        ids.append(thread_id)
    return ids


def expected_page(ids: list[str], folder: int) -> list[str]:
    """The first page for a folder, newest first: what sessiond's index returns there too."""
    return [ids[n] for n in range(len(ids) - 1, -1, -1) if n % FOLDERS == folder][:PAGE]


@dataclass
class ResumeBody:
    """Everything after session_meta for one resume thread, and what Codex must give back."""

    data: bytes
    lines: int
    turns: int  # Codex opens a turn at each user message
    turn_items: int  # user and assistant messages: the items Codex rebuilds into turns


def resume_body(size: int) -> ResumeBody:
    """bench.resume's mix of `size` items, each mapped to the rollout lines Codex writes for it.

    message → response_item message + event_msg (user_message / agent_message); cost →
    event_msg token_count; operation, todos (update_plan) and file_edit (apply_patch) →
    response_item function_call + function_call_output.
    """
    parts: list[bytes] = []
    turns = turn_items = 0
    for n in range(size):
        item = resume._item(n)
        ts = iso(RESUME_EPOCH + timedelta(milliseconds=n))
        kind = item["type"]
        if kind == "message" and item["role"] == "user":
            parts.append(message_lines(ts, "user", item["content"]))
            turns += 1
            turn_items += 1
        elif kind == "message":
            parts.append(message_lines(ts, "assistant", item["content"]))
            turn_items += 1
        elif kind == "cost":
            parts.append(token_count(ts, item["inputTokens"], item["outputTokens"]))
        elif kind == "operation":
            parts.append(tool_lines(ts, item["operationId"], "shell",
                               {"command": ["bash", "-lc", "make test"]}, "ok"))  # fmt: skip
        elif kind == "todos":
            plan = [{"step": step["content"], "status": step["status"]} for step in item["items"]]
            parts.append(tool_lines(ts, f"plan{n}", "update_plan", {"plan": plan}, "Plan updated"))
        elif kind == "file_edit":
            patch = f"*** Begin Patch\n*** Update File: {item['path']}\n@@\n-a\n+b\n*** End Patch\n"
            parts.append(tool_lines(ts, f"edit{n}", "apply_patch", {"input": patch}, "Done"))
        else:
            raise ValueError(f"no Codex mapping for a {kind} item")
    data = b"".join(parts)
    return ResumeBody(data, data.count(b"\n"), turns, turn_items)


def write_resume_thread(home: Path, cwd: Path, body: ResumeBody, copy: int) -> str:
    """One copy of the resume thread under a fresh id (a resumed thread stays loaded)."""
    thread_id = str(uuid.uuid4())
    created = RESUME_EPOCH + timedelta(seconds=copy)
    path = rollout_path(home, created, thread_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as out:
        out.write(session_meta(thread_id, created, str(cwd)))
        out.write(body.data)
    return thread_id


# --- the app-server ---------------------------------------------------------------------


class AppServer:
    """`codex app-server` on stdio: newline-delimited JSON-RPC, `initialize` then `initialized`.

    A reader thread drains stdout (notifications included) so Codex never blocks on a full
    pipe; an answer is timed when its line arrives, before the client parses it.
    """

    def __init__(self, home: Path, log_filter: str = "warn") -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "CODEX_API_KEY")}
        env.update(CODEX_HOME=str(home), RUST_LOG=log_filter)
        self.log_path = home.parent / f"{home.name}.stderr"
        self._log: IO[bytes] = open(self.log_path, "wb")  # noqa: SIM115 - closed in close()
        self.spawned = time.perf_counter()
        self.proc = subprocess.Popen(
            [executable() or "codex", "app-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._log, cwd=home.parent, env=env, start_new_session=True,
        )  # fmt: skip
        self._ids = itertools.count(1)
        self._answers: queue.Queue[tuple[float, bytes]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            arrived = time.perf_counter()
            if not line.startswith(b'{"method"'):  # notifications are not waited for
                self._answers.put((arrived, line))
        self._answers.put((time.perf_counter(), b""))

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(orjson.dumps(message) + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any], timeout: float) -> tuple[float, Any]:
        """Seconds from sending to the answer's line, and the result; errors raise."""
        msg_id = next(self._ids)
        sent = time.perf_counter()
        self._send({"id": msg_id, "method": method, "params": params})
        deadline = sent + timeout
        while True:
            try:
                arrived, line = self._answers.get(timeout=max(0.0, deadline - time.perf_counter()))
            except queue.Empty:
                raise CodexTimeout(f"{method}: no answer in {timeout:.0f} s") from None
            if not line:
                raise CodexError(f"codex exited during {method}: {self.stderr_tail()}")
            message = orjson.loads(line)
            if message.get("id") != msg_id or "method" in message:
                continue
            if "error" in message:
                raise CodexError(f"{method}: {message['error']}")
            return arrived - sent, message["result"]

    def initialize(self, timeout: float) -> float:
        """Seconds from spawn to the `initialize` answer (Codex opens its state DB there)."""
        client = {"name": "sessiond_bench", "version": "0.1.0"}
        self.request("initialize", {"clientInfo": client}, timeout)
        ready = time.perf_counter() - self.spawned
        self._send({"method": "initialized"})
        return ready

    def stderr(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stderr_tail(self) -> str:
        return self.stderr()[-2000:]

    def close(self, kill: bool = False) -> bool:
        """Stop Codex: end of stdin is its shutdown. True when it exited by itself.

        After a request timed out (`kill`), or when it lingers 10 s after stdin closed, the
        process group (the npm launcher and its native child) is killed instead.
        """
        stopped = False
        try:
            if not kill:
                if self.proc.stdin is not None:
                    self.proc.stdin.close()
                self.proc.wait(timeout=10)
                stopped = True
        except (subprocess.TimeoutExpired, BrokenPipeError):
            pass
        finally:
            if not stopped:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            self._log.close()
        return stopped


# --- workloads --------------------------------------------------------------------------


def _list_params(folder: int) -> dict[str, Any]:
    return {"limit": PAGE, "cwd": f"/work/project-{folder}"}


def _check_page(result: dict[str, Any], ids: list[str], folder: int) -> None:
    got = [thread["id"] for thread in result["data"]]
    if got != expected_page(ids, folder):
        raise CodexError(f"thread/list for folder {folder}: {len(got)} threads, not the "
                         f"{len(expected_page(ids, folder))} expected ones")  # fmt: skip


def run_list(size: int, calls: int, timeout: float) -> dict[str, Any]:
    """First start, first page, steady p50s and a restart with Codex's state DB in place.

    Steady calls alternate the default `thread/list` (which also scans rollouts to repair
    its DB) with `useStateDbOnly` (its index alone), `calls` of each.
    """
    row: dict[str, Any] = {"kind": "list", "threads": size, "calls": calls, "timed_out": None}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "codex"
        home.mkdir()
        (home / "config.toml").write_text(CONFIG)
        began = time.perf_counter()
        ids = write_list_threads(home, size)
        row["generate_s"] = time.perf_counter() - began
        server = AppServer(home)
        try:
            row["first_start_s"] = server.initialize(timeout)
            first, result = server.request("thread/list", _list_params(0), timeout)
            _check_page(result, ids, 0)
            row["first_list_ms"] = first * 1000
            times: dict[bool, list[float]] = {False: [], True: []}
            for n in range(1, 2 * calls + 1):  # interleaved: default, then state DB only
                folder, db_only = (n // 2) % FOLDERS, n % 2 == 0
                params = {**_list_params(folder), "useStateDbOnly": db_only}
                elapsed, result = server.request("thread/list", params, timeout)
                _check_page(result, ids, folder)
                times[db_only].append(elapsed)
            row["list_p50"] = statistics.median(times[False]) * 1000
            row["db_only_p50"] = statistics.median(times[True]) * 1000
            noop = [server.request("thread/loaded/list", {}, timeout)[0] for _ in range(5)]
            row["noop_ms"] = statistics.median(noop) * 1000
        except CodexTimeout as timed_out:
            row.update(timed_out=str(timed_out), timeout_s=timeout)
        finally:
            row["clean_exit"] = server.close(kill=row["timed_out"] is not None)
        if row["timed_out"] is None:  # the second start finds the state DB built
            server = AppServer(home)
            try:
                server.initialize(timeout)
                _, result = server.request("thread/list", _list_params(1), timeout)
                _check_page(result, ids, 1)
                row["restart_ms"] = (time.perf_counter() - server.spawned) * 1000
            except CodexTimeout:
                row["restart_ms"] = None
            finally:
                row["clean_exit"] &= server.close(kill=row.get("restart_ms") is None)
    return row


def _git_repo(path: Path) -> None:
    path.mkdir()
    for args in (["init", "-q", "-b", "main"], ["-c", "user.email=b@b", "-c", "user.name=b",
                 "commit", "-q", "--allow-empty", "-m", "init"]):  # fmt: skip
        subprocess.run(["git", *args], cwd=path, check=True)


def run_resume(size: int, runs: int, timeout: float) -> dict[str, Any]:
    """`thread/resume` of a thread of `size` items, full turns and `excludeTurns`, medians."""
    row: dict[str, Any] = {"kind": "resume", "items": size, "runs": runs, "timed_out": None}
    with tempfile.TemporaryDirectory() as tmp:
        repo, home = Path(tmp) / "repo", Path(tmp) / "codex"
        _git_repo(repo)
        home.mkdir()
        (home / "config.toml").write_text(CONFIG)
        body = resume_body(size)
        row.update(lines=body.lines + 1, mib=len(body.data) / 2**20)
        copies = [write_resume_thread(home, repo, body, k) for k in range(1 + 2 * runs)]
        server = AppServer(home, RESUME_LOG)
        timings: dict[bool, list[float]] = {False: [], True: []}
        try:
            row["first_start_s"] = server.initialize(timeout)
            for n, thread_id in enumerate(copies):
                exclude = n % 2 == 0 and n > 0  # copy 0 warms the OS cache and Codex's code paths
                params = {"threadId": thread_id, "excludeTurns": exclude}
                elapsed, result = server.request("thread/resume", params, timeout)
                thread = result["thread"]
                if thread["id"] != thread_id:
                    raise CodexError(f"thread/resume answered thread {thread['id']}")
                turns = thread["turns"]
                items = sum(len(turn["items"]) for turn in turns)
                want = (0, 0) if exclude else (body.turns, body.turn_items)
                if (len(turns), items) != want:
                    raise CodexError(f"thread/resume gave {len(turns)} turns, {items} items; "
                                     f"expected {want}")  # fmt: skip
                if n > 0:
                    timings[exclude].append(elapsed)
            row["resume_ms"] = statistics.median(timings[False]) * 1000
            row["exclude_ms"] = statistics.median(timings[True]) * 1000
        except CodexTimeout as timed_out:
            row.update(timed_out=str(timed_out), timeout_s=timeout)
        finally:
            row["clean_exit"] = server.close(kill=row["timed_out"] is not None)
        if row["timed_out"] is None:
            check_loaded(server.stderr(), body.lines + 1, len(copies))
    return row


def check_loaded(log: str, lines: int, resumes: int) -> None:
    """Codex parsed every line we wrote: its recorder logs each load with its parse errors.

    An unparseable line is skipped silently (a TRACE message), so without this check a
    mapping mistake would make the rollout shorter, and the timing cheaper, unnoticed.
    """
    loads = re.findall(r"Resumed rollout with (\d+) items.*?parse errors: (\d+)", log)
    if len(loads) < resumes:
        raise CodexError(f"{len(loads)} rollout loads logged for {resumes} resumes")
    bad = [(int(n), int(e)) for n, e in loads if int(n) != lines or int(e) != 0]
    if bad:
        raise CodexError(f"Codex loaded (items, parse errors) {bad[:3]}; wrote {lines} lines")


def run(sizes: list[int], runs: int, timeout: float = 60.0) -> list[dict[str, Any]]:
    """Both workloads at every size, one Codex process per size and workload.

    Listing makes 20 calls of each kind per size (10 from 100k on); resume takes `runs`
    runs per mode (at most 3 from 100k on, where each run reads the whole rollout). Each
    request is capped at `timeout` seconds: a timed-out size is a cell, not a hang.
    """
    name = version()
    rows = []
    for size in sizes:
        rows.append(run_list(size, 20 if size < BIG else 10, timeout))
    for size in sizes:
        rows.append(run_resume(size, runs if size < BIG else min(runs, 3), timeout))
    for row in rows:
        row["version"] = name
    return rows


# --- report -----------------------------------------------------------------------------


def _by(rows: list[dict[str, Any]], key: str) -> dict[int, dict[str, Any]]:
    return {row[key]: row for row in rows}


def _ratio(peer: float | None, ours: float | None) -> str:
    if peer is None or not ours:
        return "—"
    ratio = peer / ours
    return f"{ratio:.1f}x" if ratio < 10 else f"{ratio:,.0f}x"


def _ms(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 100 else f"{value:,.0f}"


def render(rows: list[dict[str, Any]], sessiond_list_rows: list[dict[str, Any]],
           sessiond_resume_rows: list[dict[str, Any]]) -> str:  # fmt: skip
    """Codex's ms beside sessiond's (from bench.listing / bench.resume rows), and the ratio."""
    listed = [r for r in rows if r["kind"] == "list"]
    resumed = [r for r in rows if r["kind"] == "resume"]
    ours_list, ours_resume = _by(sessiond_list_rows, "threads"), _by(sessiond_resume_rows, "items")
    name = rows[0]["version"] if rows else "codex"
    noop = [r["noop_ms"] for r in listed if r.get("noop_ms") is not None]
    calls = ", ".join(f"{r['calls']} at {r['threads']:,}" for r in listed if not r["timed_out"])
    lines = [
        f"`{name}` (`codex app-server`, JSON-RPC over stdio: v2 `thread/list` and "
        "`thread/resume`), offline, on generated rollouts equivalent to the workloads above; "
        f"each answer is checked. Listing calls of each kind: {calls or 'none'} threads. "
        "Codex's times include a stdio round trip and JSON (a no-op request, "
        f"`thread/loaded/list`, answers in {_ms(statistics.median(noop) if noop else None)} ms); "
        "sessiond's are the in-process calls of the Listing and Resume tables. On its first "
        "start over a CODEX_HOME, Codex indexes every rollout into its SQLite state DB before "
        "it answers `initialize`; a restart finds the DB built.",
        "",
        "| threads | sessiond index p50 (ms) | Codex `thread/list` p50 (ms) | Codex / sessiond | "
        "Codex `thread/list`, `useStateDbOnly` p50 (ms) | Codex / sessiond | "
        "Codex first start: spawn → `initialize` (s) / first page (ms) | "
        "Codex restart: spawn → first page (ms) | sessiond index build (s) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in listed:
        ours = ours_list.get(r["threads"], {})
        ours_ms, build = ours.get("index_p50"), ours.get("build_s")
        build_cell = "—" if build is None else f"{build:.1f}"
        if r["timed_out"]:
            started = r.get("first_start_s")
            start_cell = f"> {r['timeout_s']:.0f}" if started is None else f"{started:.1f}"
            lines.append(f"| {r['threads']:,} | {_ms(ours_ms)} | timed out after "
                         f"{r['timeout_s']:.0f} s | — | — | — | {start_cell} | — | "
                         f"{build_cell} |")  # fmt: skip
            continue
        lines.append(
            f"| {r['threads']:,} | {_ms(ours_ms)} | {_ms(r['list_p50'])} | "
            f"{_ratio(r['list_p50'], ours_ms)} | {_ms(r['db_only_p50'])} | "
            f"{_ratio(r['db_only_p50'], ours_ms)} | "
            f"{r['first_start_s']:.1f} / {_ms(r['first_list_ms'])} | "
            f"{_ms(r.get('restart_ms'))} | {build_cell} |"
        )
    lines += _footnotes(listed, "threads")
    lines += [
        "",
        "| items | sessiond snapshot + tail (median ms) | Codex `thread/resume` (median ms) | "
        "Codex / sessiond | Codex `thread/resume`, `excludeTurns` (median ms) | Codex / sessiond "
        "| rollout lines (MiB) | Codex runs |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in resumed:
        ours_ms = ours_resume.get(r["items"], {}).get("snapshot_ms")
        size_cell = f"{r['lines']:,} ({r['mib']:.1f})"
        if r["timed_out"]:
            lines.append(f"| {r['items']:,} | {_ms(ours_ms)} | timed out after "
                         f"{r['timeout_s']:.0f} s | — | — | — | {size_cell} | — |")  # fmt: skip
            continue
        lines.append(
            f"| {r['items']:,} | {_ms(ours_ms)} | {_ms(r['resume_ms'])} | "
            f"{_ratio(r['resume_ms'], ours_ms)} | {_ms(r['exclude_ms'])} | "
            f"{_ratio(r['exclude_ms'], ours_ms)} | {size_cell} | {r['runs']} |"
        )
    lines += _footnotes(resumed, "items")
    return "\n".join(lines)


def _footnotes(rows: list[dict[str, Any]], unit: str) -> list[str]:
    """What timed out, and any Codex that had to be killed rather than stopping by itself."""
    notes = [f"At {r[unit]:,} {unit}: {r['timed_out']}; the process was killed."
             for r in rows if r["timed_out"]]  # fmt: skip
    notes += [f"At {r[unit]:,} {unit}: Codex did not exit within 10 s of stdin closing; killed."
              for r in rows if not r["timed_out"] and not r.get("clean_exit", True)]  # fmt: skip
    return ["", *notes] if notes else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=60.0, help="cap per Codex request (s)")
    parser.add_argument("--codex-only", action="store_true", help="skip sessiond's own runs")
    args = parser.parse_args()
    if not available():
        raise SystemExit(f"`codex` is not on PATH: {INSTALL}, then put "
                         "/tmp/codex-peer/node_modules/.bin on PATH")  # fmt: skip
    sizes = [int(s) for s in args.sizes.split(",")]
    began = time.perf_counter()
    rows = run(sizes, args.runs, args.timeout)
    took = time.perf_counter() - began
    ours: tuple[list[dict[str, Any]], ...] = ([], [])
    if not args.codex_only:
        ours = (listing.run(sizes), resume.run(sizes, args.runs))
    print(render(rows, *ours))
    print(f"\nCodex's part took {took:.0f} s.")
    for row in rows:
        print({k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()})


if __name__ == "__main__":
    main()
