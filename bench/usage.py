"""Usage reports: `sessiond usage daily` against `ccusage daily` on the same transcripts.

    python -m bench.usage [--sessions 10000] [--runs 5] [--replies 40] [--result-bytes 2000]

Half the sessions are Claude Code transcripts written as Claude Code 2.x writes them (a
user prompt, then `--replies` replies, each streamed as two `assistant` lines sharing its
message id and usage, the cache split included — a text block, then a tool call — and the
tool's output of `--result-bytes` on the next `user` line twice, in its `tool_result` block
and in `toolUseResult`: docs/import.md), spread over 60 days and 20 projects, two models;
the other half Codex rollouts (bench.import_'s, which `codex app-server` accepts: 12
turns, with token counts as Codex writes them: the running total and the call's own).
Real sessions have dozens to hundreds of calls and outputs of kilobytes: the defaults are
the small end of that. sessiond is this checkout's wheel installed in a fresh virtual
environment, bytecode compiled (bench/install.py: what a person runs), and imports them
once (untimed: an import is what `--follow` or the extension keeps current); then each
round times, from spawn to exit, in turn (reversed every other round so the machine's load
weighs on both alike):
- `sessiond usage daily --json`, which answers from the index, and
- `ccusage daily --json --offline` (the pinned ccusage, tests/agents: a native binary,
  several threads), which parses the transcripts (a traced run wrote no cache file).
Wall time and CPU time (user + system of every thread: the steadier on a loaded
machine), medians of `--runs` rounds and their ratios; the target (issue 38): sessiond
≥ 20x faster. Both answers are checked to have the same token totals first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from bench import import_

EPOCH = datetime(2026, 9, 1, tzinfo=UTC)
REPLIES = 40
RESULT_BYTES = 2000
MODELS = ("claude-sonnet-4-5-20250929", "claude-opus-4-1-20250805")


def write_claude(
    projects: Path, sessions: int, replies: int = REPLIES, result_bytes: int = RESULT_BYTES
) -> int:
    """`sessions` Claude Code transcripts under `projects`; returns the line count."""
    lines = 0
    for n in range(sessions):
        session_id, cwd, data = claude_session(n, replies, result_bytes)
        folder = projects / cwd.replace("/", "-")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{session_id}.jsonl").write_bytes(data)
        lines += data.count(b"\n")
    return lines


def claude_session(n: int, replies: int, result_bytes: int) -> tuple[str, str, bytes]:
    """The `n`th session: its id, its cwd and its transcript (`replies` model calls, each a
    tool call whose result is `result_bytes` long: a test's output, a file read)."""
    session_id, cwd = str(uuid.uuid4()), f"/work/project-{n % 20}"
    clock = EPOCH + timedelta(days=n % 60, minutes=(n * 7) % 1440)
    model = MODELS[n % 2]
    parent: str | None = None
    out = []

    def entry(kind: str, message: dict[str, Any], **extra: Any) -> None:
        nonlocal parent, clock
        clock += timedelta(seconds=9)
        uid = str(uuid.uuid4())
        out.append(orjson.dumps({
            "parentUuid": parent, "isSidechain": False, "userType": "external",
            "cwd": cwd, "sessionId": session_id, "version": "2.1.332",
            "gitBranch": "main", "type": kind, "message": message, "uuid": uid,
            "timestamp": f"{clock:%Y-%m-%dT%H:%M:%S}.000Z", **extra,
        }) + b"\n")  # fmt: skip
        parent = uid

    entry("user", {"role": "user", "content": f"session {n}: fix the failing test"})
    output = ("ok tests/test_module.py::test_case PASSED\n" * (result_bytes // 42 + 1))[
        :result_bytes
    ]
    for reply in range(replies):
        call = f"toolu_{uuid.uuid4().hex[:24]}"
        written = 900 + 13 * reply
        usage = {"input_tokens": 3 + reply, "cache_creation_input_tokens": written,
                 "cache_read_input_tokens": 12_000 + 800 * reply,
                 "output_tokens": 120 + 7 * reply, "service_tier": "standard",
                 "cache_creation": {"ephemeral_1h_input_tokens": 0,
                                    "ephemeral_5m_input_tokens": written}}  # fmt: skip
        message_id, request = f"msg_{uuid.uuid4().hex[:24]}", f"req_{uuid.uuid4().hex[:20]}"
        # Claude Code writes each content block of a reply as a line of its own, every one
        # with the reply's id and usage (counted once: by message id and request id).
        blocks = [{"type": "text", "text": f"Running the tests again ({reply}): " + "the "
                   "failure is in the fixture's teardown, so the next step is to read it."},
                  {"type": "tool_use", "id": call, "name": "Bash",
                   "input": {"command": "python -m pytest tests/test_module.py -x -q",
                             "description": "Run the module's tests"}}]  # fmt: skip
        for block in blocks:
            message = {"model": model, "id": message_id, "type": "message",
                       "role": "assistant", "stop_reason": None, "usage": usage,
                       "content": [block]}  # fmt: skip
            entry("assistant", message, requestId=request)
        result = {"type": "tool_result", "tool_use_id": call, "content": output}
        # ...and a tool's output twice: in the result block and in `toolUseResult`.
        entry("user", {"role": "user", "content": [result]},
              toolUseResult={"stdout": output, "stderr": "", "interrupted": False,
                             "isImage": False})  # fmt: skip
    return session_id, cwd, b"".join(out)


def write_codex(codex_home: Path, sessions: int) -> int:
    """bench.import_'s rollouts, with token counts as Codex writes them: the session's
    running total and the call's own (`last_token_usage`), cached input included."""
    lines = import_.write_rollouts(codex_home, sessions)
    for path in (codex_home / "sessions").rglob("*.jsonl"):
        out, total = [], {"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0,
                          "reasoning_output_tokens": 0, "total_tokens": 0}  # fmt: skip
        for line in path.read_bytes().splitlines(keepends=True):
            record = orjson.loads(line)
            payload = record.get("payload") or {}
            if payload.get("type") == "token_count":
                turn = len(out) % 97 + 1
                last = {"input_tokens": 9000 + 50 * turn, "cached_input_tokens": 7000,
                        "output_tokens": 200 + turn, "reasoning_output_tokens": 0,
                        "total_tokens": 9200 + 51 * turn}  # fmt: skip
                total = {key: total[key] + last[key] for key in total}
                payload["info"]["total_token_usage"] = dict(total)
                payload["info"]["last_token_usage"] = last
                line = orjson.dumps(record) + b"\n"
            out.append(line)
        path.write_bytes(b"".join(out))
    return lines


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, dict[str, Any]]:
    """Spawn → exit: wall seconds, CPU seconds (user + system, every thread of the
    process: on a loaded machine the steadier of the two), and the JSON it printed."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        began = time.perf_counter()
        child = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        took = time.perf_counter() - began
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if child.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed: {err.read()[-2000:].decode(errors='replace')}")
        return took, usage.ru_utime + usage.ru_stime, json.loads(out.read())


def run(
    sessions: int, runs: int, replies: int = REPLIES, result_bytes: int = RESULT_BYTES
) -> dict[str, Any]:
    from bench.install import install_venv, installed_env
    from tests.agents.install import bin_dir

    ccusage = bin_dir() / "ccusage"
    with tempfile.TemporaryDirectory(prefix="sessiond-bench-usage-") as tmp:
        root = Path(tmp)
        sessiond = str(install_venv(root / "install"))  # what a person runs: bytecode, no .pth
        user, home = root / "user", root / "sessiond"
        claude, codex_home = user / ".claude", user / ".codex"
        lines = write_claude(claude / "projects", sessions // 2, replies, result_bytes)
        size = sum(path.stat().st_size for path in user.rglob("*.jsonl"))
        lines += write_codex(codex_home, sessions - sessions // 2)
        env = installed_env({"TZ": "UTC"})
        for agent, source in (("claude", claude / "projects"), ("codex", codex_home / "sessions")):
            subprocess.run([sessiond, "--home", str(home), "import", agent, "--from",
                            str(source)], env=env, check=True, capture_output=True)  # fmt: skip
        ours_argv = [sessiond, "--home", str(home), "usage", "daily", "--json", "--timezone",
                     "UTC"]  # fmt: skip
        theirs_argv = [str(ccusage), "daily", "--json", "--offline", "--timezone", "UTC"]
        theirs_env = {**env, "HOME": str(user), "CLAUDE_CONFIG_DIR": str(claude),
                      "CODEX_HOME": str(codex_home), "LOG_LEVEL": "0"}  # fmt: skip
        *_, ours = timed(ours_argv, env)  # warm: bytecode, the page cache, ccusage's cache
        *_, theirs = timed(theirs_argv, theirs_env)
        same = ours["totals"]["totalTokens"] == theirs["totals"]["totalTokens"]
        times: dict[str, list[float]] = {"sessiond": [], "ccusage": []}
        cpu: dict[str, list[float]] = {"sessiond": [], "ccusage": []}
        for n in range(runs):
            order = [("sessiond", ours_argv, env), ("ccusage", theirs_argv, theirs_env)]
            for name, argv, run_env in order if n % 2 == 0 else order[::-1]:
                wall, used, _ = timed(argv, run_env)
                times[name].append(wall)
                cpu[name].append(used)
        medians = {name: statistics.median(values) for name, values in times.items()}
        cpu_medians = {name: statistics.median(values) for name, values in cpu.items()}
        size += sum(path.stat().st_size for path in codex_home.rglob("*.jsonl"))
        return {"sessions": sessions, "lines": lines, "runs": runs, "bytes": size,
                "replies": replies, "resultBytes": result_bytes,
                "calls": ours["totals"]["calls"], "days": len(ours["rows"]),
                "sameTokens": same, "oursTokens": ours["totals"]["totalTokens"],
                "theirsTokens": theirs["totals"]["totalTokens"],
                "medians": medians, "ratio": medians["ccusage"] / medians["sessiond"],
                "cpuMedians": cpu_medians,
                "cpuRatio": cpu_medians["ccusage"] / cpu_medians["sessiond"],
                "times": times, "cpu": cpu, "load": os.getloadavg()}  # fmt: skip


def render(result: dict[str, Any]) -> str:
    wall, cpu = result["medians"], result["cpuMedians"]
    return (
        f"{result['sessions']:,} sessions ({result['lines']:,} lines, "
        f"{result['bytes'] / 1e6:,.0f} MB, {result['calls']:,} model "
        f"calls over {result['days']} days), {result['runs']} rounds, medians from spawn "
        f"(load average {result['load'][0]:.1f}):\n"
        f"| command | wall | CPU (user + system) |\n|---|---|---|\n"
        f"| `sessiond usage daily --json` | {wall['sessiond'] * 1000:,.0f} ms "
        f"| {cpu['sessiond'] * 1000:,.0f} ms |\n"
        f"| `ccusage daily --json --offline` | {wall['ccusage'] * 1000:,.0f} ms "
        f"| {cpu['ccusage'] * 1000:,.0f} ms |\n"
        f"ratio: sessiond {result['ratio']:.1f}x faster by wall time, {result['cpuRatio']:.1f}x "
        f"by CPU time (target ≥ 20x); same token totals: {result['sameTokens']} "
        f"({result['oursTokens']:,} / {result['theirsTokens']:,})\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--replies", type=int, default=REPLIES, help="model calls per Claude Code session"
    )
    parser.add_argument(
        "--result-bytes", type=int, default=RESULT_BYTES, help="each tool result's length"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.sessions, args.runs, args.replies, args.result_bytes)
    print(json.dumps(result, indent=1) if args.json else render(result))


if __name__ == "__main__":
    main()
