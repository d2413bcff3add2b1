"""J1 measured from outside: a client of its own beside bench/journeys.py's, to check it.

    python -m bench.j1_outside [--threads 10000] [--runs 7] [--folders 1,20]

Shares no timing or protocol code with bench/journeys.py (only the rollout writer and
the offline Codex config of bench/codex_peer.py make the data): its own install of this
checkout's wheel, its own data dir of `--threads` Codex rollouts imported with `sessiond
import codex`, the same rollouts under a CODEX_HOME for Codex's app-server (first start
and first list of each untimed, and sessiond's index then opened once more, at rest).
Each round spawns sessiond (`sessiond serve --stdio`, newline JSON: `initialize` with N
workspace folders, then `thread/list` of 50) and Codex (`codex app-server`: `initialize`,
`initialized`, `thread/list` of 50), alternating, and takes the time from spawn to the
list's answer line, read with `os.read` on the pipe.
docs/benchmarks.md ("Opening a window from spawn") reports it beside the bench.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench import codex_peer
from bench.install import install_venv, installed_env


def _answer_of(proc: subprocess.Popen[bytes], msg_id: int, buffer: bytearray) -> dict[str, object]:
    """Read stdout lines until the answer to `msg_id` (notifications skipped)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    while True:
        newline = buffer.find(b"\n")
        if newline == -1:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise RuntimeError(f"process ended before answer {msg_id}")
            buffer += chunk
            continue
        line = bytes(buffer[:newline])
        del buffer[: newline + 1]
        message = json.loads(line)
        if message.get("id") == msg_id:
            if "error" in message:
                raise RuntimeError(f"answer {msg_id}: {message['error']}")
            return message


def _send(proc: subprocess.Popen[bytes], message: dict[str, object]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def _end(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _opened(
    argv: list[str], env: dict[str, str], cwd: Path, messages: list[dict[str, object]]
) -> tuple[float, float, dict[str, object]]:
    """Spawn `argv`; send `messages[0]` (initialize, id 1), then the rest once it is
    answered (a list, id 2, last): (ms to the first answer, ms to the list's, the list)."""
    spawned = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, cwd=cwd)  # fmt: skip
    buffer = bytearray()
    try:
        _send(proc, messages[0])
        _answer_of(proc, 1, buffer)
        initialized = time.perf_counter()
        for message in messages[1:]:
            _send(proc, message)
        page = _answer_of(proc, 2, buffer)
        listed = time.perf_counter()
    finally:
        _end(proc)
    return (initialized - spawned) * 1000, (listed - spawned) * 1000, page


def sessiond_once(command: Path, home: Path, folders: list[Path]) -> tuple[float, float, int]:
    """(ms to `initialize`'s answer, ms to the first page, threads on it), from spawn."""
    params = {"workspaceFolders": [{"path": str(f)} for f in folders]}
    init, listed, page = _opened(
        [str(command), "--home", str(home), "serve", "--stdio"], installed_env(), home.parent,
        [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params},
         {"jsonrpc": "2.0", "id": 2, "method": "thread/list", "params": {"limit": 50}}],
    )  # fmt: skip
    return init, listed, len(page["result"]["threads"])  # type: ignore[index]


def codex_once(codex_home: Path) -> tuple[float, float, int]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "CODEX_API_KEY")}
    env.update(CODEX_HOME=str(codex_home), RUST_LOG="warn")
    client = {"name": "j1_outside", "version": "0"}
    init, listed, page = _opened(
        [codex_peer.executable() or "codex", "app-server"], env, codex_home.parent,
        [{"id": 1, "method": "initialize", "params": {"clientInfo": client}},
         {"method": "initialized"},
         {"id": 2, "method": "thread/list", "params": {"limit": 50}}],
    )  # fmt: skip
    return init, listed, len(page["result"]["data"])  # type: ignore[index]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--folders", default="1,20")
    args = parser.parse_args()
    counts = [int(n) for n in args.folders.split(",")]
    root = Path(tempfile.mkdtemp(prefix="sessiond-j1-outside-"))
    try:
        command = install_venv(root / "install")
        codex_home = root / "codex"
        codex_home.mkdir()
        (codex_home / "config.toml").write_text(codex_peer.CONFIG)
        codex_peer.write_list_threads(codex_home, args.threads)
        home = root / "sessiond"
        subprocess.run(
            [str(command), "--home", str(home), "import", "codex", "--from",
             str(codex_home / "sessions")],
            check=True, capture_output=True, env=installed_env(),
        )  # fmt: skip
        folders = []
        for n in range(max(counts)):
            folder = root / "folders" / f"project-{n}"
            folder.mkdir(parents=True)
            subprocess.run(["git", "init", "-q", str(folder)], check=True)
            folders.append(folder)
        sessiond_once(command, home, folders)  # untimed: the index's first open
        codex_once(codex_home)  # untimed: Codex builds its state DB
        # Untimed again, now that the import's shard directories are older than the 2 s an
        # mtime is not trusted for (restore/usage/index_file.py RACY_NS): the first lists
        # after an import compare every file with its row, once; J1 is an index at rest.
        sessiond_once(command, home, folders)
        rows: dict[str, list[tuple[float, float]]] = {}
        for run in range(args.runs):
            for count in counts if run % 2 == 0 else reversed(counts):
                init, page, n = sessiond_once(command, home, folders[:count])
                assert n == 50, n
                rows.setdefault(f"sessiond, {count} folders", []).append((init, page))
                init, page, n = codex_once(codex_home)
                assert n == 50, n
                rows.setdefault(f"codex, {count}", []).append((init, page))
        print("| J1 from outside | spawn → initialize, median ms | spawn → first page, median ms |")
        print("|---|---:|---:|")
        for name, samples in rows.items():
            init = statistics.median(s[0] for s in samples)
            page = statistics.median(s[1] for s in samples)
            print(f"| {name} | {init:.0f} | {page:.0f} |")
        for name, samples in rows.items():
            print(name, [round(s[1]) for s in samples])
        for count in counts:
            ours = statistics.median(s[1] for s in rows[f"sessiond, {count} folders"])
            theirs = statistics.median(s[1] for s in rows[f"codex, {count}"])
            print(f"{count} folders: sessiond / Codex = {ours / theirs:.2f}x")
        print(f"load average at the end: {os.getloadavg()}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
