"""Open sessions do not cost a descriptor each: a server keeps a bounded number of thread
files open (restore/stores/embedded/store.py), parks the others, and a parked session's
thread stays its own (its claim: restore/stores/embedded/claims.py) and is verified before
its next append (restore/stores/embedded/files.py)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import sys
import tempfile
import uuid
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.faults.helpers import Spawn, record, sessiond, start, thread_file
from tests.support.items import message
from tests.support.rpc_client import RpcError, ServerProcess

LIMIT = 1024
"""The common default of `ulimit -n`."""
SESSIONS = 20_000
WINDOW = 48
"""Requests in flight at once (the server refuses more than 64 per connection)."""


def descriptor_limit(limit: int) -> list[str]:
    """A prefix that runs the server with at most `limit` descriptors (`ulimit -n`)."""
    code = (
        "import os, resource, sys; "
        f"resource.setrlimit(resource.RLIMIT_NOFILE, ({limit}, {limit})); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    return [sys.executable, "-c", code]


def no_git(base: Path) -> dict[str, str]:
    """A PATH without git: every thread/start probes its cwd with git (two processes, a
    few ms each), 20,000 probes would be this test's whole cost, and they keep no
    descriptor."""
    empty = base / "no-git"
    empty.mkdir(exist_ok=True)
    return {"PATH": str(empty)}


@contextlib.contextmanager
def memory_home(tmp_path: Path) -> Iterator[Path]:
    """A data dir in /dev/shm when it has room (removed after), else under `tmp_path`:
    20,000 threads' creations are 40,000 syncs, minutes on a shared virtual disk, and
    syncs are not what this test is about (the tests below sync on the disk)."""
    shm = Path("/dev/shm")
    roomy = shm.is_dir() and shutil.disk_usage(shm).free > 2 << 30
    base = Path(tempfile.mkdtemp(prefix="sessiond-fds-", dir=shm)) if roomy else tmp_path
    try:
        home = base / "home"
        home.mkdir()
        yield home
    finally:
        if roomy:
            shutil.rmtree(base, ignore_errors=True)


def pipelined(server: ServerProcess, calls: Iterable[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Every call's answer (its result, or the RpcError), in order, `WINDOW` in flight."""
    answers: list[Any] = []
    waiting: deque[int] = deque()

    def collect() -> None:
        reply = server.response(waiting.popleft())
        answers.append(RpcError(reply["error"]) if "error" in reply else reply["result"])

    for method, params in calls:
        if len(waiting) >= WINDOW:
            collect()
        waiting.append(server.request_async(method, params))
    while waiting:
        collect()
    return answers


def refused(answers: list[Any]) -> str:
    """'' when every call succeeded; else how many failed, and the first failure."""
    errors = [a for a in answers if isinstance(a, RpcError)]
    return f"{len(errors)} of {len(answers)} refused, the first: {errors[0]}" if errors else ""


def open_files(server: ServerProcess, under: Path) -> int:
    """The server's descriptors on files under `under`."""
    count = 0
    for fd in os.listdir(f"/proc/{server.proc.pid}/fd"):
        with contextlib.suppress(FileNotFoundError):
            count += os.readlink(f"/proc/{server.proc.pid}/fd/{fd}").startswith(f"{under}/")
    return count


def records(sessions: list[tuple[str, str]], text: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """One record per session, its item's id `<text>-<n>`."""
    for n, (tid, sid) in enumerate(sessions):
        item = {"type": "message", "id": f"{text}-{n}", "role": "user", "content": f"{text} {n}"}
        yield "thread/record", {"threadId": tid, "sessionId": sid, "items": [item]}


def listed(server: ServerProcess) -> set[str]:
    """Every live thread's id, page by page."""
    found: set[str] = set()
    cursor = None
    while True:
        page = server.request("thread/list", {"limit": 200, "cursor": cursor})
        found.update(t["threadId"] for t in page["threads"])
        if (cursor := page["nextCursor"]) is None:
            return found


def lines_of(home: Path, tid: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in thread_file(home, tid).read_bytes().splitlines()]


def test_twenty_thousand_open_sessions_under_ulimit_1024(tmp_path: Path) -> None:
    """Before: each open session kept its thread file and its writer mark open, and from
    the 508th on, thread/start was `StorageError: cannot mark …/writers: Too many open
    files` (every record too, once the limit was reached)."""
    with memory_home(tmp_path) as home:
        cwd = home.parent / "work"
        cwd.mkdir()
        env = {"SESSIOND_DURABILITY": "group", **no_git(home.parent)}
        server = ServerProcess(home, prefix=descriptor_limit(LIMIT), env=env)
        try:
            server.initialize()
            started = pipelined(server, [("thread/start", {"cwd": str(cwd)})] * SESSIONS)
            assert not refused(started), refused(started)
            sessions = [(s["thread"]["threadId"], s["sessionId"]) for s in started]
            # Every session is open; an eighth of the limit in thread files and marks is.
            assert open_files(server, home / "threads") <= LIMIT // 8
            assert open_files(server, home / "writers") <= LIMIT // 8
            assert open_files(server, home / "claims") <= 64
            # The first listing reads what 20,000 writers left behind, in bounded steps.
            assert listed(server) == {tid for tid, _ in sessions}

            # Each parked session is written again (its file taken back and verified), in
            # the order they started; then the earliest and a spread of others once more.
            first = pipelined(server, records(sessions, "first"))
            assert not refused(first), refused(first)
            again = sessions[:1000] + sessions[1000::97]
            second = pipelined(server, records(again, "again"))
            assert not refused(second), refused(second)
            assert {a["firstSeq"] for a in first} == {2}
            assert {a["firstSeq"] for a in second} == {3}
            assert open_files(server, home / "threads") <= LIMIT // 8

            # Read back over the wire: exactly what was acknowledged, in order.
            for n in (0, 1, 999, 1000, 5000, SESSIONS - 1):
                tid, _ = sessions[n]
                items = server.request("thread/read", {"threadId": tid, "limit": 10})["items"]
                wanted = [f"first-{n}"]
                if sessions[n] in again:
                    wanted.append(f"again-{again.index(sessions[n])}")
                assert [i["id"] for i in items[1:]] == wanted
                assert [i["seq"] for i in items] == list(range(1, len(items) + 1))
            # A session closed and resumed goes on, beside the 19,999 others still open.
            tid, sid = sessions[SESSIONS // 2]
            server.request("thread/close", {"threadId": tid, "sessionId": sid})
            resumed = server.request("thread/resume", {"threadId": tid})
            assert resumed["status"] == "ready" and resumed["session"]["resumedFrom"] == sid
            record(server, tid, resumed["session"]["sessionId"], message("resumed"))
            server.kill9()  # with 20,000 sessions open and their rows not written

            # Every acknowledged record is in its file, once, in order.
            for n, (tid, _) in enumerate(sessions):
                ids = [line["id"] for line in lines_of(home, tid)]
                assert ids[1] == f"first-{n}", tid
                assert len(ids) == len(set(ids))
            # The next server's first listing reads the 20,000 threads whose writer died,
            # holding a bounded number of their marks at a time.
            after = ServerProcess(home, prefix=descriptor_limit(LIMIT), env=env)
            try:
                after.initialize()
                assert listed(after) == {tid for tid, _ in sessions}
                tid, sid = sessions[0]
                resumed = after.request("thread/resume", {"threadId": tid})
                assert resumed["status"] == "ready" and resumed["session"]["resumedFrom"] == sid
                assert after.shutdown() == 0
            finally:
                after.close()
        finally:
            server.close()


def test_every_session_of_a_small_limit_ends_cleanly(spawn: Spawn, home: Path) -> None:
    """Shutdown ends each of 300 sessions, most of them parked, with its end record and a
    snapshot (the next resume continues from it, `reason: user`), under `ulimit -n 256`."""
    cwd = home.parent / "work"
    cwd.mkdir()
    env = {"SESSIOND_DURABILITY": "group", **no_git(home.parent)}
    server = spawn(prefix=descriptor_limit(256), env=env)
    server.initialize()
    started = pipelined(server, [("thread/start", {"cwd": str(cwd)})] * 300)
    assert not refused(started), refused(started)
    sessions = [(s["thread"]["threadId"], s["sessionId"]) for s in started]
    answers = pipelined(server, records(sessions, "only"))
    assert not refused(answers), refused(answers)
    assert server.shutdown() == 0
    for tid, sid in sessions:
        last = lines_of(home, tid)[-1]
        assert (last["type"], last["event"], last["targetSessionId"]) == (
            "lifecycle",
            "SessionEnd",
            sid,
        )
    again = spawn(prefix=descriptor_limit(256), env=env)
    again.initialize()
    for tid, sid in sessions[:: len(sessions) // 5]:
        resumed = again.request("thread/resume", {"threadId": tid})
        assert resumed["status"] == "ready", resumed
        assert resumed["session"]["resumedFrom"] == sid
        assert resumed["continueReason"] == "user"  # its snapshot says it ended cleanly


def holds_open(server: ServerProcess, path: Path) -> bool:
    targets = set()
    for fd in os.listdir(f"/proc/{server.proc.pid}/fd"):
        with contextlib.suppress(FileNotFoundError):
            targets.add(os.readlink(f"/proc/{server.proc.pid}/fd/{fd}"))
    return str(path) in targets


def parked_server(spawn: Spawn, home: Path) -> tuple[ServerProcess, str, str]:
    """A server that keeps one thread file open, with two sessions: the first is parked."""
    server = spawn(env={"SESSIOND_OPEN_THREADS": "1"})
    server.initialize()
    tid, sid = start(server, home.parent / "work")
    assert holds_open(server, thread_file(home, tid))
    start(server, home.parent / "work")
    assert not holds_open(server, thread_file(home, tid)), "the first session's file is open"
    return server, tid, sid


def test_a_parked_session_keeps_its_thread_from_another_process(spawn: Spawn, home: Path) -> None:
    """The one-writer guarantee does not depend on the file being open: while the first
    server's session is parked, a second server is ThreadBusy (naming the first's client)
    and its record StaleSession; the first goes on writing, seqs contiguous."""
    first, tid, sid = parked_server(spawn, home)
    second = spawn()
    second.initialize()
    with pytest.raises(RpcError) as busy:
        second.request("thread/resume", {"threadId": tid})
    assert busy.value.kind == "ThreadBusy"
    assert f"pid {first.proc.pid}" in busy.value.data["holder"]
    with pytest.raises(RpcError) as stale:
        record(second, tid, sid, message("intruder"))
    assert stale.value.kind == "StaleSession"
    for n in range(5):
        record(first, tid, sid, message(f"m{n}"))
        assert holds_open(first, thread_file(home, tid))
        start(first, home.parent / "work")  # and parked again
        assert not holds_open(first, thread_file(home, tid))
    lines = lines_of(home, tid)
    assert [line["seq"] for line in lines] == list(range(1, 7))
    assert "intruder" not in thread_file(home, tid).read_text()
    first.request("thread/close", {"threadId": tid, "sessionId": sid})
    resumed = second.request("thread/resume", {"threadId": tid})
    assert resumed["session"]["resumedFrom"] == sid


def test_a_parked_session_never_writes_beside_a_writer_that_takes_no_claims(
    spawn: Spawn, home: Path
) -> None:
    """A writer that knows only the file's flock (an earlier sessiond) can take a parked
    session's file. The session then never writes beside it: ThreadBusy while the other
    holds the file, ThreadBusy once it wrote there; the other's line is intact, and a
    resume goes on after it."""
    server, tid, sid = parked_server(spawn, home)
    path = thread_file(home, tid)
    foreign = {"v": 1, "seq": 2, "ts": "2026-01-01T00:00:00.000000Z", "type": "message",
               "sessionId": "older", "id": str(uuid.uuid4()), "role": "user",
               "content": "written by an older sessiond"}  # fmt: skip
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the session's file is not locked
        with pytest.raises(RpcError) as busy:
            record(server, tid, sid, message("while it writes"))
        assert busy.value.kind == "ThreadBusy"
        assert "another process is writing the thread" in busy.value.message
        os.write(fd, json.dumps(foreign).encode() + b"\n")
    finally:
        os.close(fd)
    with pytest.raises(RpcError) as gone:
        record(server, tid, sid, message("after it wrote"))
    assert gone.value.kind in ("ThreadBusy", "StaleSession")
    assert [line["id"] for line in lines_of(home, tid)][1:] == [foreign["id"]]

    # The same once the session was parked clean and the other wrote after it let go.
    resumed = server.request("thread/resume", {"threadId": tid})
    sid = resumed["session"]["sessionId"]
    record(server, tid, sid, message("resumed"))
    start(server, home.parent / "work")  # parks it
    size = path.stat().st_size
    with path.open("ab") as other:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        other.write(json.dumps({**foreign, "seq": 5, "id": "second"}).encode() + b"\n")
    with pytest.raises(RpcError) as lost:
        record(server, tid, sid, message("after the second"))
    assert lost.value.kind == "ThreadBusy"
    assert "wrote the thread while this session was idle" in lost.value.message
    assert path.read_bytes()[size:].count(b"\n") == 1  # only the other's line


def test_a_kill_after_parking_loses_no_acknowledged_record(spawn: Spawn, home: Path) -> None:
    """Group commit, two files open for ten sessions written in turn (each record takes a
    parked file back and parks another, synced first): a kill -9 mid-stream loses
    nothing acknowledged, and a restarted server resumes every thread."""
    env = {"SESSIOND_DURABILITY": "group", "SESSIOND_OPEN_THREADS": "2"}
    server = spawn(env=env)
    server.initialize()
    sessions = [start(server, home.parent / "work") for _ in range(10)]
    acknowledged: list[tuple[str, str]] = []
    waiting: deque[tuple[int, str, str]] = deque()
    for n in range(1000):
        if len(waiting) >= WINDOW:  # keep a window in flight, the kill lands inside it
            msg_id, tid, item_id = waiting.popleft()
            reply = server.response(msg_id)
            assert "result" in reply, reply
            acknowledged.append((tid, item_id))
            if len(acknowledged) == 250:
                break
        tid, sid = sessions[n % len(sessions)]
        params = {"threadId": tid, "sessionId": sid, "items": [message(item_id=f"r{n}")]}
        waiting.append((server.request_async("thread/record", params), tid, f"r{n}"))
    # Of ten, two (a third while one is taken back before another is let go).
    assert open_files(server, home / "threads") <= 3
    server.kill9()
    acknowledged += [(tid, item_id) for msg_id, tid, item_id in waiting
                     if "result" in server.responses.get(msg_id, {})]  # fmt: skip
    after = spawn(env=env)
    after.initialize()
    for tid, _ in sessions:
        ids = [line["id"] for line in lines_of(home, tid)]
        assert len(ids) == len(set(ids))
        mine = [item for t, item in acknowledged if t == tid]
        assert [i for i in ids if i in set(mine)] == mine  # all there, in order
        resumed = after.request("thread/resume", {"threadId": tid})
        assert resumed["status"] == "ready"
        record(after, tid, resumed["session"]["sessionId"], message("after the kill"))
    doctor = sessiond(home, "doctor")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr


def test_a_bad_open_threads_setting_is_named(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SESSIOND_OPEN_THREADS", "lots")
    listed = sessiond(home, "list")
    assert listed.returncode == 2
    assert listed.stderr.strip() == (
        "sessiond: InvalidParams: SESSIOND_OPEN_THREADS must be a whole number of at least 1,"
        " not 'lots'"
    )
