"""Tests leave nothing behind: no process outlives the run, and none reaches past loopback.

A pytest plugin, registered by tests/conftest.py as `sessiond-leftovers`. At the start of
the run (before any test process exists):

- every process the run starts carries `SESSIOND_TEST_RUN=<a uuid>` in its environment
  (set in `os.environ`, so inherited; tests/agents/clis.py, which builds the agents'
  environment from nothing, adds it with `marker_env()`), and `SESSIOND_TEST_NODE=<the
  test running when it was started>`: a daemon that double-forked away is still found in
  /proc/*/environ, and named by its test;
- the pytest process becomes a child subreaper (`prctl(PR_SET_CHILD_SUBREAPER)`): a process
  whose parent dies (a double fork) is re-parented to pytest rather than to init, so it is
  still a descendant even when it was started with an environment of its own;
- the run moves into a network namespace of its own (tests/support/only_loopback.py).

After each test, what was tried past loopback is collected (pinned to the test), every
process of the run alive then is noted with the test after which it was first seen, and
the zombies pytest adopted are reaped (never a child pytest started itself: its owner
waits for it and must read its true exit status).

At the end, after the session's fixtures are torn down, every process still alive that
descends from pytest or carries the run's marker (less the PostgreSQL cluster CI started
before the run, `$SESSIOND_TEST_PG`, which CI stops itself) is killed, and the run fails
naming each one: pid, command line, the test that started it. Attempts past loopback fail
the run the same way. `SESSIOND_TEST_NETWORK=host` runs without the namespace, on a
machine that cannot make one (and then nothing proves the run kept to loopback).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Generator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support import pg_cluster
from tests.support.only_loopback import Attempt, Network
from tests.support.processes import command_line

RUN_ENV = "SESSIOND_TEST_RUN"
WORKER_KEY = "sessiond_leftovers"
"""Where an xdist worker hands its guard's findings to the controller (`workeroutput`)."""
TEST_ENV = "SESSIOND_TEST_NODE"
NETWORK_ENV = "SESSIOND_TEST_NETWORK"
PLUGIN = "sessiond-leftovers"
PR_SET_CHILD_SUBREAPER = 36
GRACE = 5.0
"""Seconds a process of the run may take to finish exiting once the last test is torn down
(a server's helper dying with it): one alive after that was left behind."""


def marker_env() -> dict[str, str]:
    """The run's marker variables, for an environment built from nothing."""
    return {name: os.environ[name] for name in (RUN_ENV, TEST_ENV) if name in os.environ}


@dataclass(frozen=True)
class Process:
    """A process as /proc shows it: `started` (clock ticks since boot) tells a reused pid."""

    pid: int
    ppid: int
    state: str
    started: int
    environ: dict[str, str]

    @property
    def key(self) -> tuple[int, int]:
        return (self.pid, self.started)


def processes() -> dict[int, Process]:
    """Every process on the machine that can be read."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            environ: dict[str, str] = {}
            with contextlib.suppress(OSError):
                for pair in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                    name, _, value = pair.decode("utf-8", "replace").partition("=")
                    if name in (RUN_ENV, TEST_ENV):
                        environ[name] = value
            pid = int(entry)
            found[pid] = Process(pid, int(fields[1]), fields[0], int(fields[19]), environ)
    return found


def started_during(test: str) -> list[Process]:
    """The live processes of this run started while `test` ran (by their marker): what a
    test that starts a detaching program checks is gone once it has ended it."""
    run = os.environ.get(RUN_ENV)
    return [p for p in processes().values() if run and p.environ.get(RUN_ENV) == run
            and p.environ.get(TEST_ENV) == test and p.state not in ("Z", "X")]  # fmt: skip


def descendants(table: dict[int, Process], root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for process in table.values():
        children.setdefault(process.ppid, []).append(process.pid)
    found: set[int] = set()
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo += children.get(pid, [])
    return found


def postgres_of(root: str | None, table: dict[int, Process]) -> set[int]:
    """The processes of the PostgreSQL cluster in `root` (its postmaster, from
    `postmaster.pid`, and what it started)."""
    if not root:
        return set()
    try:
        postmaster = int(Path(root, "data", "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return set()
    return {postmaster, *descendants(table, postmaster)} if postmaster in table else set()


def _xdist_controller(config: pytest.Config) -> bool:
    """This process hands the tests to pytest-xdist's workers (`-n N`, N > 0)."""
    workers = getattr(config.option, "numprocesses", None)
    return bool(workers) and not hasattr(config, "workerinput")


class Leftovers:
    """The session's guard: its state, its hooks, and the checks a test may run itself."""

    def __init__(self) -> None:
        self.run = uuid.uuid4().hex
        self.me = os.getpid()
        self.network: Network | None = None
        self.network_error: str | None = None
        self.subreaper = False
        self.at_start: set[tuple[int, int]] = set()
        self.first_seen: dict[tuple[int, int], str] = {}
        self.attempts: list[Attempt | str] = []  # str: a worker's, as it reported it
        self.left: list[str] = []
        self.disabled = False
        self.worker_network = True
        """Under xdist, the controller's: every worker ran in a network of its own."""

    # --- the checks -----------------------------------------------------------------------

    def of_the_run(self, ci_postgres: str | None = None) -> list[Process]:
        """The live processes of this run but pytest itself: descendants of pytest (a
        double-forked one included, re-parented here) and any process carrying the run's
        marker; not those alive before the run started, nor those of the PostgreSQL
        cluster CI started for the run (in `ci_postgres`, by default `$SESSIOND_TEST_PG`;
        "" for none), which CI stops after it: a test that restarts that cluster starts
        its new processes from the run."""
        if ci_postgres is None:
            ci_postgres = os.environ.get(pg_cluster.ENV)
        table = processes()
        mine = descendants(table, self.me)
        mine |= {p.pid for p in table.values() if p.environ.get(RUN_ENV) == self.run}
        mine -= {self.me, *postgres_of(ci_postgres, table)}
        alive = [table[pid] for pid in sorted(mine) if table[pid].state not in ("Z", "X")]
        return [process for process in alive if process.key not in self.at_start]

    def describe(self, process: Process) -> str:
        started = process.environ.get(TEST_ENV) or self.first_seen.get(process.key)
        where = f"started during {started}" if started else "started by the run"
        return f"pid {process.pid} ({where}): {command_line(process.pid)}"

    def end(self, left: Iterable[Process]) -> None:
        """Kill `left` (each only if its pid is still that process) and reap those that
        were re-parented to pytest."""
        for process in left:
            now = processes().get(process.pid)
            if now is not None and now.started == process.started:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGKILL)
        deadline = time.monotonic() + GRACE
        while time.monotonic() < deadline:
            self.reap_adopted()
            table = processes()
            if not any((now := table.get(p.pid)) and now.started == p.started
                       and now.state not in ("Z", "X") for p in left):  # fmt: skip
                # One that died after the reaping above is a zombie of pytest's now: reap it
                # too, or it stays listed as pytest's child.
                self.reap_adopted()
                return
            time.sleep(0.05)

    def reap_adopted(self) -> None:
        """Reap the zombies pytest adopted as subreaper: each child of pytest that is dead,
        unless a live `subprocess.Popen` (asyncio's included) owns it."""
        zombies = [p.pid for p in processes().values() if p.ppid == self.me and p.state == "Z"]
        if not zombies:
            return
        owned = {o.pid for o in gc.get_objects()  # type(): a dead weak proxy raises on isinstance
                 if issubclass(type(o), subprocess.Popen) and o.returncode is None}  # fmt: skip
        for pid in zombies:
            if pid not in owned:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)

    def collect(self) -> None:
        """File what the network guard caught so far with the run's attempts."""
        if self.network is not None:
            self.attempts += self.network.attempts()

    # --- the hooks --------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        if _xdist_controller(config):
            # With `-n N` the workers run the tests, each its own guard (marker, subreaper,
            # network namespace); the controller starts only them, and they end with it.
            self.disabled = True
            return
        os.environ[RUN_ENV] = self.run
        libc = ctypes.CDLL(None, use_errno=True)
        self.subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
        self.at_start = {p.key for p in self.of_the_run()}
        if os.environ.get(NETWORK_ENV) == "host":
            return
        try:
            self.network = Network.enter()
        except OSError as exc:
            self.network_error = str(exc)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, object, object]:
        if self.disabled:
            return (yield)
        os.environ[TEST_ENV] = item.nodeid
        if self.network is not None:
            self.network.test = item.nodeid
        try:
            return (yield)
        finally:
            self.collect()
            if self.network is not None:
                self.network.test = f"(after {item.nodeid})"
            for process in self.of_the_run():
                self.first_seen.setdefault(process.key, item.nodeid)
            self.reap_adopted()

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """After every fixture's teardown (the runner's own sessionfinish tears down the
        session's fixtures before this one runs)."""
        if self.disabled:  # the workers' findings, sent with each one's end
            if (self.left or self.attempts or self.network_error) and (
                session.exitstatus == pytest.ExitCode.OK
            ):
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return
        deadline = time.monotonic() + GRACE
        while (left := self.of_the_run()) and time.monotonic() < deadline:
            self.reap_adopted()
            time.sleep(0.05)
        self.left = [self.describe(process) for process in left]
        self.end(left)
        self.collect()
        failed = self.left or self.attempts or self.network_error
        if failed and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        output = getattr(session.config, "workeroutput", None)
        if output is not None:  # an xdist worker: its controller reports and fails the run
            output[WORKER_KEY] = {"left": self.left, "attempts": [str(a) for a in self.attempts],
                                  "network_error": self.network_error,
                                  "subreaper": self.subreaper,
                                  "network": self.network is not None}  # fmt: skip

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        """xdist's controller: what a worker's guard found."""
        found = getattr(node, "workeroutput", {}).get(WORKER_KEY)
        if not found:
            return
        self.left += found["left"]
        self.attempts += found["attempts"]
        self.network_error = self.network_error or found["network_error"]
        self.subreaper = found["subreaper"]
        self.worker_network = self.worker_network and found["network"]

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        write = terminalreporter.write_line
        if self.left:
            terminalreporter.section("processes left behind (killed now)", red=True)
            for line in self.left:
                write(line)
        if self.attempts:
            terminalreporter.section("reached past 127.0.0.1", red=True)
            for attempt in self.attempts:
                write(str(attempt))
        if self.network_error:
            terminalreporter.section("network guard", red=True)
            write(f"could not give the run a network of its own: {self.network_error}; "
                  f"{NETWORK_ENV}=host runs without it (then nothing proves the run kept "
                  "to 127.0.0.1)")  # fmt: skip
        elif self.network is None and not (self.disabled and self.worker_network):
            write(f"{NETWORK_ENV}=host: this run had the machine's network", yellow=True)
        if not self.subreaper:
            write("not a child subreaper here: a double-forked process without the run's "
                  "marker would go unseen", yellow=True)  # fmt: skip
