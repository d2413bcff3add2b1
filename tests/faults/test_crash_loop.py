"""Randomized crash loop: kill -9 while a client streams `thread/record`, then check.

A client pipelines `thread/record` requests to a few threads (new items, retries of items
whose answer was lost, re-deliveries of acknowledged ones, now and then a new thread) while
the test SIGKILLs the server at a random moment. After every kill: `sessiond doctor
--repair` and then `sessiond doctor` are clean, a fresh server lists and reads every thread,
every acknowledged item is in its thread exactly once (an unacknowledged one may or may not
be there, never twice), and every thread resumes.

On PostgreSQL the same loop runs against a real cluster, which is also stopped with
`pg_ctl -m immediate` at random moments and started again while the server runs: records
in flight are answered StorageError (retryable, never acknowledged), and the service picks
the database up again by itself.

CI runs a short loop. The long one is behind a flag:
`SESSIOND_CRASH_LOOP_KILLS=1000 pytest -s tests/faults/test_crash_loop.py`
(`SESSIOND_CRASH_LOOP_SEED` replays a seed's choices; timing still varies run to run).
"""

from __future__ import annotations

import contextlib
import io
import os
import platform
import random
import signal
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from server.cli.main import main as sessiond_main
from tests.conftest import BOTH_STORES
from tests.faults.helpers import sessiond
from tests.support import pg_cluster
from tests.support.rpc_client import HANG_GUARD, ServerProcess

KILLS = int(os.environ.get("SESSIOND_CRASH_LOOP_KILLS", "15"))
# A bound, not a performance limit: the loop stops by itself after this long.
TIME_BUDGET = float(os.environ.get("SESSIOND_CRASH_LOOP_SECONDS", "45" if KILLS <= 50 else "3600"))
WINDOW = 4  # record requests in flight at once
MAX_THREADS = 6
MAX_REQUESTS_PER_RUN = 5_000  # the kill always comes first; this only bounds the loop


@dataclass
class Thread:
    thread_id: str
    session_id: str | None = None
    acked: set[str] = field(default_factory=set)
    unacked: set[str] = field(default_factory=set)
    unchecked: set[str] = field(default_factory=set)
    """Acknowledged since the last verification."""
    seen: set[str] = field(default_factory=set)
    verified_seq: int = 0


Request = tuple[int, "Thread | None", list[str]]  # (message id, thread or a start, item ids)


@dataclass
class Stats:
    seed: int
    kills: int = 0
    restarts: int = 0
    """PostgreSQL stopped with -m immediate and started again under a live server."""
    refused: int = 0
    """Records answered StorageError while the database was down (not acknowledged)."""
    requests_acked: int = 0
    items_acked: int = 0
    unacked_found: int = 0
    unacked_absent: int = 0
    items_verified: int = 0
    threads: int = 0
    seconds: float = 0.0

    def line(self) -> str:
        return (
            f"crash loop: seed={self.seed} kills={self.kills} restarts={self.restarts} "
            f"refused={self.refused} threads={self.threads} "
            f"items acknowledged={self.items_acked} (in {self.requests_acked} requests) "
            f"items verified={self.items_verified} unacknowledged present={self.unacked_found} "
            f"absent={self.unacked_absent} seconds={self.seconds:.0f} "
            f"machine={platform.machine()} {platform.system()} {os.cpu_count()} cpus "
            f"date={datetime.now(UTC):%Y-%m-%d}"
        )


def _doctor_in_process(home: Path, store: str | None, *args: str) -> tuple[int, str]:
    """The `sessiond doctor` command itself, run in this process to save a startup per kill."""
    out = io.StringIO()
    where = ["--home", str(home), *(["--store", store] if store else [])]
    with contextlib.redirect_stdout(out):
        code = sessiond_main([*where, "doctor", *args])
    return code, out.getvalue()


class CrashLoop:
    def __init__(
        self,
        home: Path,
        work: Path,
        seed: int,
        durability: str = "fsync",
        store: str | None = None,
        cluster: pg_cluster.Cluster | None = None,
    ) -> None:
        self.home = home
        self.store = store
        self.cluster = cluster  # PostgreSQL: also restarted with -m immediate now and then
        self.env = {
            "SESSIOND_DURABILITY": durability,
            **({"SESSIOND_STORE": store} if store else {}),
        }
        self.work = work
        self.rng = random.Random(seed)
        self.stats = Stats(seed)
        self.threads: dict[str, Thread] = {}
        self.spare: ServerProcess | None = None

    # --- servers -----------------------------------------------------------------------

    def server(self) -> ServerProcess:
        """A started server; the next one is spawned early so its startup overlaps work.

        An uninitialized server touches no data file (the no-warmup promise), so it can wait
        while the previous one is killed and the data dir is repaired.
        """
        server = self.spare or ServerProcess(self.home, env=self.env)
        self.spare = ServerProcess(self.home, env=self.env)
        server.initialize()
        return server

    def close(self) -> None:
        if self.spare is not None:
            self.spare.close()

    # --- one run: repair, verify, resume, stream until killed ------------------------------

    def run_once(self) -> None:
        """Repair and check what the last kill left, then record until this server dies."""
        self.repair()
        server = self.server()
        killer: threading.Timer | None = None
        try:
            self.check_threads(server)
            if self.rng.random() < 0.15:  # sometimes during resume, not only while recording
                killer = self._arm(server, self.rng.uniform(0.0, 0.2))
            if self._resume_all(server):
                restart = None
                if self.cluster is not None and self.rng.random() < 0.3:
                    restart = self._restart_database(server, self.rng.uniform(0.005, 0.05))
                else:
                    killer = killer or self._arm(server, self.rng.uniform(0.005, 0.06))
                self._stream(server)
                if restart is not None:
                    restart.join()
            server.proc.wait(timeout=HANG_GUARD)
            assert server.proc.returncode == -signal.SIGKILL, server.stderr()
            self._wait_eof(server)
        finally:
            if killer is not None:
                killer.cancel()
            server.close()
        self.stats.kills += 1

    def _restart_database(self, server: ServerProcess, delay: float) -> threading.Thread:
        """Stop PostgreSQL with -m immediate (a crash, for it) while records stream in,
        start it again, let the server pick it up by itself and stream on, then kill it."""
        assert self.cluster is not None
        cluster = self.cluster
        after = self.rng.uniform(0.5, 2.5)

        def restart() -> None:
            time.sleep(delay)
            cluster.stop("immediate")
            time.sleep(0.05)
            cluster.start()
            self.stats.restarts += 1
            time.sleep(after)
            server.proc.send_signal(signal.SIGKILL)

        thread = threading.Thread(target=restart)
        thread.start()
        return thread

    def _arm(self, server: ServerProcess, delay: float) -> threading.Timer:
        timer = threading.Timer(delay, server.proc.send_signal, (signal.SIGKILL,))
        timer.start()
        return timer

    def _resume_all(self, server: ServerProcess) -> bool:
        """Resume every thread (each must be ready); False when the server died meanwhile."""
        for thread in self.threads.values():
            thread.session_id = None
        try:
            for thread in self.threads.values():
                report = self._resume(server, thread.thread_id)
                assert report["status"] == "ready", report
                assert report["recovery"]["skippedLines"] == []
                assert report["lastDurableSeq"] > thread.verified_seq
                thread.session_id = report["session"]["sessionId"]
        except (ConnectionError, OSError):
            return False
        return True

    def _resume(self, server: ServerProcess, thread_id: str) -> dict[str, Any]:
        """A resume; on PostgreSQL a killed server's lock goes when its backend notices the
        closed connection, and a restarted database is back a moment later: wait for both."""
        deadline = time.monotonic() + HANG_GUARD
        while True:
            reply = server.response(server.request_async("thread/resume", {"threadId": thread_id}))
            if "result" in reply:
                return reply["result"]
            kind = reply["error"].get("data", {}).get("kind")
            waiting = self.store is not None and kind in ("ThreadBusy", "StorageError")
            assert waiting and time.monotonic() < deadline, reply
            time.sleep(0.05)

    def _request(self, server: ServerProcess) -> Request:
        """Send one request: mostly new items, some retries and re-deliveries."""
        if len(self.threads) < MAX_THREADS and self.rng.random() < 0.02:
            return server.request_async("thread/start", {"cwd": str(self.work)}), None, []
        thread = self.rng.choice([t for t in self.threads.values() if t.session_id])
        items: list[dict[str, Any]] = []
        for _ in range(self.rng.randint(1, 3)):
            size = 16_000 if self.rng.random() < 0.01 else self.rng.randint(1, 200)
            items.append({"id": str(uuid.uuid4()), "content": "x" * size})
        if thread.unacked and self.rng.random() < 0.3:  # the client retries a lost answer
            items.append({"id": self.rng.choice(sorted(thread.unacked)), "content": "retry"})
        if thread.acked and self.rng.random() < 0.05:  # and sometimes delivers twice
            items.append({"id": self.rng.choice(sorted(thread.acked)), "content": "again"})
        wire = [{"type": "message", "role": "user", **item} for item in items]
        msg_id = server.request_async(
            "thread/record",
            {"threadId": thread.thread_id, "sessionId": thread.session_id, "items": wire},
        )
        ids = [item["id"] for item in items]
        thread.unacked.update(i for i in ids if i not in thread.acked)
        return msg_id, thread, ids

    def _stream(self, server: ServerProcess) -> None:
        pending: list[Request] = []
        for _ in range(MAX_REQUESTS_PER_RUN):
            try:
                while len(pending) < WINDOW:
                    pending.append(self._request(server))
                reply = server.response(pending[0][0])
            except (ConnectionError, OSError):
                break
            self._acknowledge(pending.pop(0), reply)
        self._wait_eof(server)
        for request in pending:  # answers that made it out before the kill still count
            if request[0] in server.responses:
                self._acknowledge(request, server.responses.pop(request[0]))

    def _acknowledge(self, request: Request, reply: dict[str, Any]) -> None:
        _, thread, ids = request
        if self.store is not None and "error" in reply:
            # The database was down (or just back): never acknowledged, so never counted.
            data = reply["error"].get("data", {})
            assert data.get("kind") == "StorageError" and data.get("retryable"), reply
            self.stats.refused += 1
            return
        assert "error" not in reply, reply
        result = reply["result"]
        if thread is None:  # a thread/start
            tid = result["thread"]["threadId"]
            self.threads[tid] = Thread(tid, result["sessionId"])
            return
        already = sum(1 for i in ids if i in thread.acked)
        assert result["duplicates"] >= already, (result, already)
        new = [i for i in ids if i not in thread.acked]
        thread.acked.update(new)
        thread.unchecked.update(new)
        thread.unacked.difference_update(ids)
        self.stats.requests_acked += 1
        self.stats.items_acked += len(new)

    @staticmethod
    def _wait_eof(server: ServerProcess) -> None:
        deadline = time.monotonic() + HANG_GUARD
        with server._lock:
            while not server.eof and time.monotonic() < deadline:
                server._lock.wait(timeout=1)
        assert server.eof, "the killed server's output never closed"

    # --- after a kill: repair, then check on a fresh server -------------------------------

    def repair(self) -> None:
        code, out = _doctor_in_process(self.home, self.store, "--repair")
        assert code == 0, out
        code, out = _doctor_in_process(self.home, self.store)
        assert code == 0 and out.rstrip().endswith("clean"), out

    def check_threads(self, server: ServerProcess) -> None:
        """Every thread is listed and reads; what was acknowledged is there exactly once.

        Files only grow (a repair cuts only a torn last line, never a complete one), so
        each check reads just the items after the last checked seq.
        """
        listed: set[str] = set()
        cursor = None
        while True:
            page = server.request("thread/list", {"limit": 200, "cursor": cursor})
            listed.update(t["threadId"] for t in page["threads"])
            if (cursor := page["nextCursor"]) is None:
                break
        assert set(self.threads) <= listed
        for thread in self.threads.values():
            after = thread.verified_seq
            while True:
                read = server.request(
                    "thread/read", {"threadId": thread.thread_id, "afterSeq": after, "limit": 5000}
                )
                assert read["skippedLines"] == []
                for item in read["items"]:
                    assert item["seq"] == after + 1, ("gap or reorder", item["seq"], after)
                    after = item["seq"]
                    assert item["id"] not in thread.seen, ("stored twice", item["id"])
                    thread.seen.add(item["id"])
                if read["nextAfterSeq"] is None:
                    break
            thread.verified_seq = after
            missing = thread.unchecked - thread.seen
            assert not missing, f"acknowledged items lost: {sorted(missing)[:5]}"
            self.stats.items_verified += len(thread.unchecked)
            thread.unchecked.clear()

    def final_check(self) -> None:
        """After the last kill: the doctor as its own process, then a full reread."""
        where = ["--store", self.store] if self.store else []
        for args in (["doctor", "--repair"], ["doctor"]):
            doctor = sessiond(self.home, *where, *args)
            assert doctor.returncode == 0, doctor.stdout + doctor.stderr
        server = self.server()
        try:
            self.check_threads(server)
            assert self._resume_all(server)
            for thread in self.threads.values():
                counts: Counter[str] = Counter()
                after = 0
                while True:
                    read = server.request(
                        "thread/read", {"threadId": thread.thread_id, "afterSeq": after}
                    )
                    counts.update(item["id"] for item in read["items"])
                    if (after := read["nextAfterSeq"]) is None:
                        break
                assert all(counts[i] == 1 for i in thread.acked)
                assert max(counts.values()) == 1
                self.stats.unacked_found += sum(1 for i in thread.unacked if counts[i])
                self.stats.unacked_absent += sum(1 for i in thread.unacked if not counts[i])
            assert server.shutdown() == 0
        finally:
            server.close()


def _seed() -> int:
    if "SESSIOND_CRASH_LOOP_SEED" in os.environ:
        return int(os.environ["SESSIOND_CRASH_LOOP_SEED"])
    return int.from_bytes(os.urandom(4), "big")


# `group` acknowledges from the committer thread, after a sync of a duplicate descriptor:
# its own path from append to answer, so it gets its own kills.
@BOTH_STORES
@pytest.mark.parametrize("durability", ["fsync", "group"])
def test_acknowledged_items_survive_random_kill_9_exactly_once(
    home: Path, tmp_path: Path, durability: str, store_url: str | None,
    request: pytest.FixtureRequest,
) -> None:  # fmt: skip
    seed = _seed()
    work = tmp_path / "work"
    work.mkdir()
    cluster = request.getfixturevalue("postgres") if store_url else None
    loop = CrashLoop(home, work, seed, durability, store_url, cluster)
    began = time.monotonic()
    try:
        server = loop.server()
        for _ in range(3):
            started = server.request("thread/start", {"cwd": str(work)})
            loop.threads[started["thread"]["threadId"]] = Thread(started["thread"]["threadId"])
        server.kill9()
        while loop.stats.kills < KILLS and time.monotonic() - began < TIME_BUDGET:
            loop.run_once()
        loop.final_check()
    except BaseException as exc:
        raise AssertionError(
            f"crash loop ({durability}, {'postgres' if store_url else 'embedded'}) failed with "
            f"seed {seed} after {loop.stats.kills} kills "
            f"(replay: SESSIOND_CRASH_LOOP_SEED={seed}): {exc!r}"
        ) from exc
    finally:
        loop.close()
        loop.stats.seconds = time.monotonic() - began
        loop.stats.threads = len(loop.threads)
        print(loop.stats.line())
    assert loop.stats.kills >= 1
    assert loop.stats.items_verified == loop.stats.items_acked
    if cluster is not None:
        assert loop.stats.restarts >= 1, "the database was never restarted under the loop"
