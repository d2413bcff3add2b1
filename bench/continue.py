"""`thread/continue` from a warm server over 100,000 threads and 10,000 session keys.

    python -m bench.continue [--keys 10000] [--chain 10] [--samples 2000]

The home holds `keys x chain` threads written directly in the documented format
(docs/storage.md): each key a reset chain of `chain` threads (each replaced one naming its
successor, the newest current), a few records each. One real server process (`serve
--stdio`, the pipe, group commit) is warmed by a `thread/list` (its index built from the
files, timed apart); then one request at a time, timed at the client from send to answer
(`--durability none` shows what is left without the disk's syncs):

- **goes on**: a message for a key whose current thread this client holds: the policy is
  judged and the session goes on (the per-message call of a harness);
- **resume**: a key whose thread nobody holds: a session is opened on it (a resume's
  report, the environment probed in a folder outside any git repository, as a chat
  harness runs); closed again after, untimed;
- **reset**: a key whose thread the policy finds stale (`idle`): a new thread, linked to
  the old one, carrying model and permissions.

The set-up's own writes (the home's ~100 MB of files, then the index built from them)
are synced before anything is timed (`os.sync`): a person's threads were written long
before, while a home written seconds ago is still in the page cache, and the kernel's
writeback of it (some 30 s later, in the middle of the timed calls) would hold every
journal commit, so every sync a call makes, behind it: a measure of the set-up, not of
the server (a reset's p99 went from ~7 ms to ~4 on this account alone).

Keys are picked at random. Reported: p50 and p99 in ms, how many were timed, and the
server's own CPU time per call of each kind (user + system, from /proc: what the call
costs the server whatever the machine's load; the rest of its time is waiting for the
disk's syncs and for a core), and the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

from bench.rpc import PipelinedServer
from restore.home.layout import Layout

TARGET_P99_MS = 5.0


def _line(seq: int, ts: str, kind: str, session: str, **fields: Any) -> bytes:
    return orjson.dumps(
        {"v": 1, "seq": seq, "ts": ts, "type": kind, "sessionId": session,
         "id": str(uuid.uuid4()), **fields}
    ) + b"\n"  # fmt: skip


def write_home(layout: Layout, keys: int, chain: int, cwd: str) -> list[str]:
    """`keys` reset chains of `chain` threads each; the keys."""
    names = [f"direct:peer-{n:05d}" for n in range(keys)]
    for k, key in enumerate(names):
        ids = [str(uuid.uuid4()) for _ in range(chain)]
        for position, thread_id in enumerate(ids):
            session = str(uuid.uuid4())
            ts = f"2026-01-01T{position:02d}:{k % 60:02d}:00.000000Z"  # long ago: stale
            meta: dict[str, Any] = {"threadId": thread_id, "source": "startup", "reason": "user",
                                    "cwd": cwd, "sessionKey": key, "model": "m-1",
                                    "permissions": {"approvalMode": "on-request"}}  # fmt: skip
            if position:
                meta.update(source="reset", reason="idle", resetReason="idle",
                            previousThreadId=ids[position - 1])  # fmt: skip
            lines = [
                _line(1, ts, "session_meta", session, **meta),
                _line(2, ts, "message", session, role="user", content=f"hello {k}/{position}"),
                _line(3, ts, "message", session, role="assistant", content="hi " * 20),
            ]
            if position < chain - 1:
                lines.append(_line(4, ts, "thread_successor", session,
                                   nextThreadId=ids[position + 1], resetReason="idle"))  # fmt: skip
            path = layout.thread_path(thread_id)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"".join(lines))
    return names


def _ms(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1000, p99 * 1000


def raw_sync(directory: Path, runs: int = 500) -> tuple[float, float]:
    """p50 and p99 of one small write + fdatasync in `directory`, the disk's floor under
    any call that must be durable before it is answered (a session's start is)."""
    samples = []
    fd = os.open(directory / "sync-probe", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for _ in range(runs):
            began = time.perf_counter()
            os.write(fd, b"x" * 200 + b"\n")
            os.fdatasync(fd)
            samples.append(time.perf_counter() - began)
    finally:
        os.close(fd)
    return _ms(samples)


def cpu_seconds(pid: int) -> float:
    """The process's user + system CPU time so far (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _timed(server: PipelinedServer, params: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    began = time.perf_counter()
    answer = server.request("thread/continue", params)
    return time.perf_counter() - began, answer


def run(
    keys: int = 10_000, chain: int = 10, samples: int = 2000, durability: str = "group"
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        home, cwd = Path(tmp) / "home", Path(tmp) / "chat"
        cwd.mkdir()
        names = write_home(Layout(home), keys, chain, str(cwd))
        os.sync()  # the set-up's writes on disk before anything is timed (above)
        server = PipelinedServer(home, env={"SESSIOND_DURABILITY": durability})
        try:
            server.request("initialize", {"clientInfo": {"name": "bench"}})
            began = time.perf_counter()
            server.request("thread/list", {"limit": 1})  # the index, built from the files
            build_s = time.perf_counter() - began
            os.sync()
            rng = random.Random(37)
            held = rng.sample(names, min(200, keys))
            never = {"reset": "none"}
            for key in held:  # this client's sessions on these keys' threads
                answer = server.request("thread/continue", {"sessionKey": key, "cwd": str(cwd),
                                                            "policy": never})  # fmt: skip
                assert answer["reason"] == "resume", answer
            pid, cpu = server.proc.pid, {}
            goes_on = []
            began_cpu = cpu_seconds(pid)
            for _ in range(samples):
                params = {"sessionKey": rng.choice(held), "cwd": str(cwd), "policy": never}
                took, answer = _timed(server, params)
                assert answer["reason"] == "resume" and not answer["sessionOpened"], answer
                goes_on.append(took)
            cpu["goes_on"] = (cpu_seconds(pid) - began_cpu) / samples
            others = [key for key in names if key not in set(held)]
            rng.shuffle(others)
            resumed, closing = [], 0.0
            began_cpu = cpu_seconds(pid)
            for key in others[: samples // 2]:
                params = {"sessionKey": key, "cwd": str(cwd), "policy": never}
                took, answer = _timed(server, params)
                assert answer["reason"] == "resume" and answer["sessionOpened"], answer
                resumed.append(took)
                closing -= cpu_seconds(pid)
                server.request("thread/close", {"threadId": answer["thread"]["threadId"],
                                                "sessionId": answer["sessionId"]})  # fmt: skip
                closing += cpu_seconds(pid)
            cpu["resume"] = (cpu_seconds(pid) - began_cpu - closing) / max(1, len(resumed))
            reset, closing = [], 0.0
            began_cpu = cpu_seconds(pid)
            for key in others[samples // 2 : samples]:
                params = {"sessionKey": key, "cwd": str(cwd),
                          "policy": {"reset": "idle", "idleMinutes": 60}}  # fmt: skip
                took, answer = _timed(server, params)
                assert answer["reason"] == "reset", answer
                reset.append(took)
                closing -= cpu_seconds(pid)
                server.request("thread/close", {"threadId": answer["thread"]["threadId"],
                                                "sessionId": answer["sessionId"]})  # fmt: skip
                closing += cpu_seconds(pid)
            cpu["reset"] = (cpu_seconds(pid) - began_cpu - closing) / max(1, len(reset))
        finally:
            server.close()
        sync = raw_sync(Path(tmp))
    return {"threads": keys * chain, "keys": keys, "build_s": build_s, "sync": sync,
            "durability": durability,
            "goes_on": _ms(goes_on), "resume": _ms(resumed), "reset": _ms(reset),
            "cpu_ms": {k: v * 1000 for k, v in cpu.items()},
            "counts": (len(goes_on), len(resumed), len(reset))}  # fmt: skip


def render(result: dict[str, Any]) -> str:
    rows = [
        f"`thread/continue` from a warm server, {result['threads']:,} threads, "
        f"{result['keys']:,} keys, `--durability {result['durability']}` (index built from "
        f"the files first: {result['build_s']:.1f} s):",
        "",
        "| call | p50 ms | p99 ms | server CPU ms/call | timed | target p99 ≤ 5 ms |",
        "|---|---:|---:|---:|---:|---|",
    ]
    names = {"goes_on": "goes on (the client holds the key's thread)",
             "resume": "resume (a session opened on the key's thread)",
             "reset": "reset (a new linked thread replaces a stale one)"}  # fmt: skip
    for index, (field, label) in enumerate(names.items()):
        p50, p99 = result[field]
        verdict = "met" if p99 <= TARGET_P99_MS else "not met"
        cpu = result["cpu_ms"][field]
        rows.append(f"| {label} | {p50:.2f} | {p99:.2f} | {cpu:.2f} | "
                    f"{result['counts'][index]:,} | {verdict} |")  # fmt: skip
    p50, p99 = result["sync"]
    rows.append(
        f"| (the disk: one write + fdatasync, same run) | {p50:.2f} | {p99:.2f} | | 500 | |"
    )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--chain", type=int, default=10)
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--durability", default="group", choices=("fsync", "group", "none"))
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print(render(run(args.keys, args.chain, args.samples, args.durability)))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
