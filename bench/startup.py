"""Startup: what a spawn costs, from the `sessiond` a person installs.

    python -m bench.startup [--runs 10] [--threads 10000] [--instructions] [--checkout]
                            [--no-bytecode] [--against DIR]

sessiond is installed from its wheel in a fresh virtual environment, bytecode compiled at
install (bench/install.py), and run as the `sessiond` command pip writes. Every row is a
fresh process, timed from spawn to the answer a person waits for: a server's answer to
`initialize` (or its first `thread/list` page), a command's exit. Each round runs every
row once, in turn (reversed every other round), so the machine's load weighs on all of
them alike; a row is the median of `--runs` rounds. Beside them: the same interpreter
doing nothing (`python -c pass`), and the floor of a server on sessiond's stack
(bench/floor_server.py: the interpreter, asyncio and orjson, answering one request).

`--instructions` also counts each row's instructions once under valgrind (callgrind's
total, the whole process): unlike wall time, the same on a loaded machine.
`--checkout` runs this checkout instead of an install (with PYTHONDONTWRITEBYTECODE=1, its
own modules have no bytecode: every spawn compiles them, the bench's old way);
`--no-bytecode` runs the install with no bytecode for any module (PYTHONPYCACHEPREFIX at an
empty directory, nothing written): what a person gets from an installer that does not
compile (uv's default, `pip --no-compile`) on a machine with PYTHONDONTWRITEBYTECODE=1.
`--against DIR`: another checkout (main's, before a change) installed the same way, on a
copy of the data dir, its rows taken in the same rounds, beside this one's.

The data dir holds `--threads` threads (bench.listing's), its index and search index
built by untimed runs first. The targets (docs/benchmarks.md, "Opening a window from
spawn"): `--version` and `initialize` within 80 ms; `list` 100 ms, `show` 100 ms, and
`search` 150 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TARGETS_MS = {"version": 80.0, "initialize": 80.0, "list": 100.0, "show": 100.0,
              "search": 150.0}  # fmt: skip
RARE = "1234"  # in one thread's first message ("thread 1234: fix the test")


class Peer:
    """A spawned server and a Content-Length client on its pipes."""

    def __init__(
        self, argv: list[str], env: dict[str, str] | None = None, *, exact: bool = False
    ) -> None:
        """`env`: added to this environment with this checkout on PYTHONPATH, or (`exact`)
        the whole environment (an install's: bench/install.py `installed_env`)."""
        if not exact:
            env = {**os.environ, **(env or {}), "PYTHONPATH": str(REPO)}
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            cwd=REPO, env=env,
        )  # fmt: skip
        self._ids = 0

    def request(self, method: str, params: dict[str, Any]) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._ids += 1
        body = json.dumps(
            {"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params}
        ).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()
        while True:
            length = 0
            while (header := self.proc.stdout.readline()) not in (b"\r\n", b"\n"):
                if not header:
                    raise ConnectionError(f"{method}: the server exited")
                name, _, value = header.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            message = json.loads(self.proc.stdout.read(length))
            if message.get("id") == self._ids:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


INITIALIZE = {"protocolVersion": 1, "clientInfo": {"name": "bench"}, "workspaceFolders": []}


def sessiond_argv(home: Path) -> list[str]:
    """This checkout's `sessiond serve --stdio` (bench/import_.py's first page)."""
    return [sys.executable, "-m", "server.cli", "--home", str(home), "serve", "--stdio"]


class Install:
    """How to run sessiond (an install's command, or this checkout) and its interpreter."""

    def __init__(
        self, root: Path, checkout: bool = False, bytecode: bool = True, code: Path = REPO
    ) -> None:
        from bench.install import install_venv, installed_env

        if checkout:
            self.python, self.sessiond = sys.executable, [sys.executable, "-m", "server.cli"]
            self.env = {**os.environ, "PYTHONPATH": str(code)}
        else:
            command = install_venv(root / "install", code)
            self.python, self.sessiond = str(command.parent / "python"), [str(command)]
            self.env = installed_env()
        self.env["SESSIOND_DURABILITY"] = "none"
        if not bytecode:  # looked for in an empty directory, and never written
            (root / "no-bytecode").mkdir()
            self.env.update(PYTHONPYCACHEPREFIX=str(root / "no-bytecode"),
                            PYTHONDONTWRITEBYTECODE="1")  # fmt: skip


def _server(install: Install, home: Path) -> list[str]:
    return [*install.sessiond, "--home", str(home), "serve", "--stdio"]


def time_until(argv: list[str], work: Callable[[Peer], Any], env: dict[str, str]) -> float:
    """Seconds from spawn to the answer `work` waits for (the shutdown is not timed)."""
    began = time.perf_counter()
    peer = Peer(argv, env, exact=True)
    try:
        work(peer)
        return time.perf_counter() - began
    finally:
        peer.close()


def time_exit(argv: list[str], env: dict[str, str]) -> float:
    """Seconds from spawn to exit of a command (its output read and dropped)."""
    began = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, timeout=600)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return time.perf_counter() - began


def initialize(peer: Peer) -> None:
    peer.request("initialize", INITIALIZE)


def first_page(peer: Peer) -> None:
    peer.request("initialize", INITIALIZE)
    threads = peer.request("thread/list", {"limit": 50})["threads"]
    assert len(threads) == 50, len(threads)


def make_threads(home: Path, count: int) -> str:
    """`count` threads (bench.listing's), and the id of the one `show` prints."""
    sys.path.insert(0, str(REPO))
    from bench.listing import write_threads
    from restore.home.layout import Layout

    write_threads(Layout(home), count)
    return next(Layout(home).threads_dir.glob("*/*.jsonl")).stem


def rows(install: Install, root: Path, threads: int) -> dict[str, Callable[[], float]]:
    """Every row: its name, and a function that spawns it once and returns its seconds."""
    empty, home = root / "empty", root / "home"
    thread_id = make_threads(home, threads) if not home.exists() else _a_thread(home)
    env = install.env
    for warm in (["list"], ["search", RARE]):  # the index and the search index, untimed
        time_exit([*install.sessiond, "--home", str(home), *warm], env)
    floor = [install.python, str(REPO / "bench" / "floor_server.py")]
    command = [*install.sessiond, "--home", str(home)]
    return {
        "python": lambda: time_exit([install.python, "-c", "pass"], env),
        "floor": lambda: time_until(floor, initialize, env),
        "version": lambda: time_exit([*install.sessiond, "--version"], env),
        "initialize": lambda: time_until(_server(install, empty), initialize, env),
        "first page": lambda: time_until(_server(install, home), first_page, env),
        "list": lambda: time_exit([*command, "list"], env),
        "show": lambda: time_exit([*command, "show", thread_id], env),
        "search": lambda: time_exit([*command, "search", RARE], env),
    }


def _a_thread(home: Path) -> str:
    return next((home / "threads").glob("*/*.jsonl")).stem


def measure(rows: dict[str, Callable[[], float]], runs: int) -> dict[str, list[float]]:
    """Each row `runs` times, a round taking every row once, in turn (reversed every other
    round); milliseconds."""
    names = list(rows)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for run in range(runs):
        for name in names if run % 2 == 0 else reversed(names):
            samples[name].append(rows[name]() * 1000)
    return samples


def instructions(install: Install, root: Path, home: Path | None = None) -> dict[str, float] | None:
    """Each row once under callgrind: millions of instructions, the whole process (a
    server answers, then its input ends and it exits). None without valgrind."""
    if shutil.which("valgrind") is None:
        return None
    empty = root / "empty"
    home = home or root / "home"
    thread_id = _a_thread(home)
    hello = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE})
    listing = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "thread/list", "params": {}})
    command = [*install.sessiond, "--home", str(home)]
    runs: dict[str, tuple[list[str], str]] = {
        "python": ([install.python, "-c", "pass"], ""),
        "floor": ([install.python, str(REPO / "bench" / "floor_server.py")], hello + "\n"),
        "version": ([*install.sessiond, "--version"], ""),
        "initialize": (_server(install, empty), hello + "\n"),
        "first page": (_server(install, home), f"{hello}\n{listing}\n"),
        "list": ([*command, "list"], ""),
        "show": ([*command, "show", thread_id], ""),
        "search": ([*command, "search", RARE], ""),
    }
    counted = {}
    for name, (argv, stdin) in runs.items():
        out = root / "callgrind.out"
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv],
                       input=stdin.encode(), capture_output=True, env=install.env, cwd=REPO,
                       check=True, timeout=600)  # fmt: skip
        totals = [line for line in out.read_text().splitlines() if line.startswith("totals:")]
        counted[name] = int(totals[0].split()[1]) / 1e6
    return counted


LABELS = {
    "python": "the interpreter alone (`python -c pass`)",
    "floor": "floor: asyncio + orjson answering `initialize` (bench/floor_server.py)",
    "version": "`sessiond --version`",
    "initialize": "`sessiond serve --stdio` → `initialize` answered (empty data dir)",
    "first page": "… → first `thread/list` page ({threads} threads, index present)",
    "list": "`sessiond list` ({threads} threads)",
    "show": "`sessiond show ID` (a thread of 3 items)",
    "search": "`sessiond search WORD` (one hit in {threads} threads)",
}


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}"


def run(
    runs: int, threads: int, counted: bool = False, checkout: bool = False, bytecode: bool = True,
    against: Path | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Every row, this checkout's (and `against`'s, in the same rounds, on the same data
    dir: rows named `... (against)`)."""
    root = Path(tempfile.mkdtemp(prefix="sessiond-startup-"))
    try:
        install = Install(root, checkout, bytecode)
        table = rows(install, root, threads)
        baseline = None
        if against is not None:
            (root / "against").mkdir()
            baseline = Install(root / "against", checkout, bytecode, against)
            # A copy of its own: two versions on one data dir each found the other's last
            # run's changes to take in (a first page of 1-1.5 s every other round).
            shutil.copytree(root / "home", root / "against" / "home", symlinks=True)
            theirs = rows(baseline, root / "against", threads)
            table.update({f"{name} (against)": row for name, row in theirs.items()})
        samples = measure(table, runs)
        ir = instructions(install, root) if counted else None
        if counted and baseline is not None and ir is not None:
            theirs_ir = instructions(baseline, root / "against") or {}
            ir.update({f"{name} (against)": value for name, value in theirs_ir.items()})
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {"runs": runs, "threads": threads, "samples": samples, "instructions": ir,
            "checkout": checkout, "bytecode": bytecode, "load": os.getloadavg(),
            "against": str(against) if against else None}  # fmt: skip


def render(result: dict[str, Any]) -> str:
    samples: dict[str, list[float]] = result["samples"]
    ir: dict[str, float] | None = result["instructions"]
    against = result.get("against")
    head = "| spawn → | median ms | min-max ms |" + (" MIr |" if ir else "")
    if against:
        head += " against: median ms |" + (" MIr |" if ir else "")
    head += " target | |"
    columns = head.count("|") - 1
    lines = [head, "|---|" + "---:|" * (columns - 3) + "---|---|"]
    for name in LABELS:
        values = samples[name]
        median = statistics.median(values)
        target = TARGETS_MS.get(name)
        verdict = "" if target is None else ("met" if median <= target else "**not met**")
        cells = [LABELS[name].format(threads=f"{result['threads']:,}"), f"{median:.0f}",
                 f"{min(values):.0f}-{max(values):.0f}"]  # fmt: skip
        if ir:
            cells.append(f"{ir[name]:.0f}")
        if against:
            cells.append(f"{statistics.median(samples[f'{name} (against)']):.0f}")
            if ir:
                cells.append(f"{ir.get(f'{name} (against)', float('nan')):.0f}")
        cells += [f"≤ {target:.0f} ms" if target else "—", verdict]
        lines.append("| " + " | ".join(cells) + " |")
    load = ", ".join(f"{value:.1f}" for value in result["load"])
    how = "this checkout (no bytecode)" if result["checkout"] else (
        "its wheel in a fresh virtual environment (bytecode compiled at install), run as "
        "the `sessiond` command")  # fmt: skip
    if not result["bytecode"]:
        how += ", with no bytecode for any module (PYTHONPYCACHEPREFIX empty)"
    lines += ["", f"Medians of {result['runs']} rounds, every row once a round; sessiond from "
              f"{how}; {machine()}, Python {platform.python_version()}; load average at the "
              f"end {load}."]  # fmt: skip
    if ir:
        lines.append("MIr: millions of instructions of the whole process (callgrind), once.")
    if against:
        lines.append(f"Against: {against}, installed the same way, its rows in the same rounds.")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--instructions", action="store_true", help="also count them")
    parser.add_argument("--checkout", action="store_true", help="this checkout, not a wheel")
    parser.add_argument("--no-bytecode", action="store_true", help="no module's bytecode")
    parser.add_argument("--against", type=Path, help="another checkout, beside this one")
    args = parser.parse_args()
    result = run(args.runs, args.threads, args.instructions, args.checkout, not args.no_bytecode,
                 args.against)  # fmt: skip
    print(render(result))
    for name, values in result["samples"].items():
        print(name, [round(value, 1) for value in values])
    return 0


if __name__ == "__main__":
    sys.exit(main())
