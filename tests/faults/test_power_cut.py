"""A power cut, not only kill -9: what an acknowledged record survives.

kill -9 keeps the kernel's page cache, so it never tests `--durability fsync|group`'s
promise (every acknowledged item survives power loss). Here the data dir lives on a FUSE
filesystem that keeps only what was synced, as POSIX says (tests/support/powercut_fs.py:
file bytes at fsync/fdatasync, names at an fsync of their directory, plus a random part of
what the kernel could have written back by itself, torn writes included). A real server
records under load (a pipeline of `thread/record` to several threads, new threads now
and then); at a random moment the power is cut and the server killed with it; the
filesystem is remounted showing only the durable state and a fresh server, under a new
boot id (a power cut reboots), must show every acknowledged item, at the seq it was
acknowledged with, once. Under `--durability none` nothing is promised but the store must
still work: `doctor --repair` handles the torn tails, thread files read, and the index
rebuilds itself to list exactly the threads on disk.

The first tests prove the filesystem itself loses what was not synced (so the rest cannot
pass vacuously). Where FUSE cannot be used the tests skip, saying why (in CI they fail).
`SESSIOND_POWER_CUTS` sets the cuts per mode (default 20); `SESSIOND_POWER_CUT_SEED`
replays a seed's choices (timing still varies run to run).
"""

from __future__ import annotations

import errno
import os
import random
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from restore.stores.embedded.jsonl import parse_bytes
from tests.faults.helpers import sessiond
from tests.support.powercut import PowerCutDisk, power_cut_disk
from tests.support.rpc_client import HANG_GUARD, ServerProcess
from tests.support.wait import eventually

CUTS = int(os.environ.get("SESSIOND_POWER_CUTS", "20"))
WINDOW = 8  # records in flight at once
MAX_THREADS = 16


def _seed() -> int:
    if "SESSIOND_POWER_CUT_SEED" in os.environ:
        return int(os.environ["SESSIOND_POWER_CUT_SEED"])
    return int.from_bytes(os.urandom(4), "big")


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write(path: Path, data: bytes, *, sync: bool, append: bool = False) -> None:
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
    fd = os.open(path, flags, 0o600)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


# --- the filesystem itself -----------------------------------------------------------------


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[PowerCutDisk]:
    with power_cut_disk(tmp_path / "power") as mounted:
        yield mounted


def test_the_disk_keeps_what_was_synced_and_loses_the_rest(disk: PowerCutDisk) -> None:
    """A write is kept only once its file is synced; a name only once its directory is
    (and the directory's own name, up to a synced one)."""
    home = disk.mount
    (home / "dir").mkdir()
    _fsync(home)
    _write(home / "dir" / "kept", b"synced\n", sync=True)
    _write(home / "dir" / "kept", b"not synced\n", sync=False, append=True)
    _write(home / "dir" / "empty", b"bytes never synced\n", sync=False)
    _write(home / "dir" / "replaced", b"old\n", sync=True)
    _write(home / "dir" / "doomed", b"stays\n", sync=True)
    _fsync(home / "dir")
    _write(home / "dir" / "nameless", b"synced, its name never\n", sync=True)
    _write(home / "dir" / ".new", b"new\n", sync=True)
    os.replace(home / "dir" / ".new", home / "dir" / "replaced")  # no fsync of dir
    (home / "dir" / "doomed").unlink()  # nor here
    (home / "orphan").mkdir()  # its name is never synced, its content is
    _write(home / "orphan" / "file", b"synced\n", sync=True)
    _fsync(home / "orphan")
    assert (home / "dir" / "kept").read_bytes() == b"synced\nnot synced\n"

    disk.cut()
    with pytest.raises(OSError) as dead:
        (home / "dir" / "kept").read_bytes()
    assert dead.value.errno == errno.EIO  # the disk is gone until the remount
    disk.remount()

    assert sorted(p.name for p in home.iterdir()) == ["dir"]
    assert sorted(p.name for p in (home / "dir").iterdir()) == [
        "doomed",
        "empty",
        "kept",
        "replaced",
    ]
    assert (home / "dir" / "kept").read_bytes() == b"synced\n"
    assert (home / "dir" / "empty").read_bytes() == b""
    assert (home / "dir" / "replaced").read_bytes() == b"old\n"
    assert (home / "dir" / "doomed").read_bytes() == b"stays\n"


def test_synced_renames_and_removals_survive_and_a_clean_stop_keeps_everything(
    disk: PowerCutDisk,
) -> None:
    home = disk.mount
    (home / "a").mkdir()
    (home / "b").mkdir()
    _fsync(home)
    _write(home / "a" / "moved", b"moved\n", sync=True)
    _write(home / "a" / "gone", b"gone\n", sync=True)
    _fsync(home / "a")
    os.rename(home / "a" / "moved", home / "b" / "moved")
    _fsync(home / "b")  # one directory's sync carries the whole rename
    (home / "a" / "gone").unlink()
    _fsync(home / "a")
    disk.cut()
    disk.remount()
    assert list((home / "a").iterdir()) == []
    assert (home / "b" / "moved").read_bytes() == b"moved\n"

    _write(home / "b" / "unsynced", b"kept by a clean shutdown\n", sync=False)
    disk.remount()  # no cut: a clean shutdown syncs everything
    assert (home / "b" / "unsynced").read_bytes() == b"kept by a clean shutdown\n"


def test_write_back_keeps_a_prefix_of_unsynced_appends_sometimes_torn(tmp_path: Path) -> None:
    """What the kernel may have written back on its own: a prefix of the unsynced
    appends, cut at any byte; never more, never a byte of something else."""
    lengths = set()
    with power_cut_disk(tmp_path / "power", seed=7, writeback=True) as disk:
        log = disk.mount / "log"
        _write(log, b"", sync=True)
        _fsync(disk.mount)
        synced = b""
        for cut in range(8):
            lines = b"".join(b"line %d.%d\n" % (cut, n) for n in range(50))
            for n in range(0, len(lines), 10):
                _write(log, lines[n : n + 10], sync=False, append=True)
            disk.cut()
            disk.remount()
            found = log.read_bytes()
            assert found.startswith(synced) and (synced + lines).startswith(found)
            lengths.add(len(found) - len(synced))
            synced = found
    assert len(lengths) > 2, lengths  # the write-back really varies
    assert any(n % 10 for n in lengths), lengths  # and tears writes


# --- what only a power cut leaves (no FUSE needed) ---------------------------------------


def test_doctor_repair_of_a_torn_first_line_leaves_a_clean_home(home: Path) -> None:
    """kill -9 cannot tear the single write of a thread's first line; a power cut can. The
    repair cuts the torn line off, which leaves an empty file: the same run moves it aside
    (the torn bytes kept in recovered/), so one `doctor --repair` makes the home clean."""
    thread_id = str(uuid.uuid4())
    path = home / "threads" / thread_id[:2] / f"{thread_id}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"v":1,"seq":1,"ts":"2026-11-30T01:02:03.456789Z","type":"sess')
    repaired = sessiond(home, "doctor", "--repair")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    doctor = sessiond(home, "doctor")
    assert doctor.returncode == 0 and doctor.stdout.rstrip().endswith("clean"), doctor.stdout
    assert not path.exists()
    kept = {p.name: p.read_bytes() for p in (home / "recovered").iterdir()}
    torn = [name for name in kept if name.startswith(f"{thread_id}.0.")]
    assert sorted(kept) == sorted([f"{thread_id}.empty", *torn]) and len(torn) == 1, kept
    assert kept[torn[0]].endswith(b'"type":"sess')


# --- sessiond on it: one cut at a chosen moment ------------------------------------------


def _server(
    disk: PowerCutDisk, durability: str = "fsync", env: dict[str, str] | None = None
) -> ServerProcess:
    """A server on the mount, booted anew (a new boot id)."""
    server = ServerProcess(
        disk.mount, env={"SESSIOND_DURABILITY": durability, **(env or {})}, prefix=disk.reboot()
    )
    server.initialize()
    return server


def _list_all(server: ServerProcess) -> set[str]:
    listed: set[str] = set()
    cursor = None
    while True:
        page = server.request("thread/list", {"limit": 200, "cursor": cursor})
        listed.update(t["threadId"] for t in page["threads"])
        if (cursor := page["nextCursor"]) is None:
            return listed


def _read_all(server: ServerProcess, thread_id: str) -> dict[int, str]:
    found: dict[int, str] = {}
    after = 0
    while True:
        read = server.request(
            "thread/read", {"threadId": thread_id, "afterSeq": after, "limit": 10_000}
        )
        # a cut leaves at most a torn last line: never a damaged line before good ones
        assert all(line["reason"] == "torn_tail" for line in read["skippedLines"]), read
        for item in read["items"]:
            found[item["seq"]] = item["id"]
        if (after := read["nextAfterSeq"]) is None:
            return found


@pytest.mark.parametrize("durability", ["fsync", "group"])
def test_a_new_thread_survives_a_power_cut_right_after_its_answer(
    disk: PowerCutDisk, tmp_path: Path, durability: str
) -> None:
    """The thread file's whole path must be durable: its name in its shard directory, and
    the shard directory's name (new for most new threads) in `threads/`."""
    server = _server(disk, durability)
    try:
        started = server.request("thread/start", {"cwd": str(tmp_path)})
        thread_id, session_id = started["thread"]["threadId"], started["sessionId"]
        items = [
            {"type": "message", "role": "user", "id": f"item-{n}", "content": "kept"}
            for n in range(3)
        ]
        recorded = server.request(
            "thread/record", {"threadId": thread_id, "sessionId": session_id, "items": items}
        )
        disk.cut()
    finally:
        server.close()
    disk.remount()
    server = _server(disk, durability)
    try:
        assert thread_id in _list_all(server)
        found = _read_all(server, thread_id)
        assert [found[seq] for seq in range(recorded["firstSeq"], recorded["lastSeq"] + 1)] == [
            "item-0",
            "item-1",
            "item-2",
        ]
        assert server.shutdown() == 0
    finally:
        server.close()


def test_a_torn_tail_copied_aside_survives_a_power_cut(disk: PowerCutDisk, tmp_path: Path) -> None:
    """Before a writer cuts a torn tail off (durably), the copy it keeps in `recovered/`
    must be durable too, name included: else the cut loses the torn bytes."""
    server = _server(disk)
    try:
        started = server.request("thread/start", {"cwd": str(tmp_path)})
        thread_id = started["thread"]["threadId"]
        assert server.shutdown() == 0
    finally:
        server.close()
    path = disk.mount / "threads" / thread_id[:2] / f"{thread_id}.jsonl"
    _write(path, b'{"v":1,"seq":2,"torn', sync=True, append=True)
    server = _server(disk)
    try:
        report = server.request("thread/resume", {"threadId": thread_id})
        assert report["recovery"]["tornTailRecovered"] is True
        disk.cut()
    finally:
        server.close()
    disk.remount()
    assert not path.read_bytes().endswith(b"torn")
    aside = list((disk.mount / "recovered").glob(f"{thread_id}.*.torn"))
    assert [p.read_bytes() for p in aside] == [b'{"v":1,"seq":2,"torn']


def test_a_reset_s_link_lost_to_a_power_cut_is_written_again(
    disk: PowerCutDisk, tmp_path: Path
) -> None:
    """A `thread/continue` reset syncs its new thread, not the replaced thread's successor
    item (derived: the new thread names the one it replaces). Cut right after, the item is
    gone; the key still continues the new thread, and the item is written again."""
    clock = tmp_path / "clock"
    clock.write_text("0")
    env = {"SESSIOND_TEST_CLOCK": str(clock)}
    idle = {"sessionKey": "direct:ana", "cwd": str(tmp_path),
            "policy": {"reset": "idle", "idleMinutes": 1}}  # fmt: skip
    server = _server(disk, "group", env)
    try:
        first = server.request("thread/continue", idle)
        old = first["thread"]["threadId"]
        server.request("thread/close", {"threadId": old, "sessionId": first["sessionId"]})
        clock.write_text("61")
        reset = server.request("thread/continue", idle)
        new = reset["thread"]["threadId"]
        assert reset["reason"] == "reset" and reset["previousThreadId"] == old
        eventually(lambda: server.request("thread/read", {"threadId": old})["items"][-1]["type"]
                   == "thread_successor", "the successor item written")  # fmt: skip
        disk.cut()
    finally:
        server.close()
    disk.remount()
    server = _server(disk, "group", env)
    try:
        types = [i["type"] for i in server.request("thread/read", {"threadId": old})["items"]]
        assert "thread_successor" not in types  # lost: it was never synced on its own
        again = server.request("thread/continue", idle)
        assert (again["reason"], again["thread"]["threadId"]) == ("resume", new)
        items = server.request("thread/read", {"threadId": old})["items"]
        assert items[-1]["type"] == "thread_successor" and items[-1]["nextThreadId"] == new
        assert server.shutdown() == 0
    finally:
        server.close()


# --- sessiond on it: under load, cut at random moments -------------------------------------


@dataclass
class Thread:
    thread_id: str
    session_id: str | None = None
    acked: dict[int, str] = field(default_factory=dict)
    """seq → item id, of every acknowledged item."""
    started: bool = False
    """Its thread/start was answered: its file is owed."""


@dataclass
class Stats:
    seed: int
    durability: str
    cuts: int = 0
    threads: int = 0
    items_acked: int = 0
    items_lost: int = 0
    refused: int = 0
    """Records answered with an error after the power went (never acknowledged)."""
    torn: int = 0
    """Torn tails the cuts left (repaired by a resume, or by doctor --repair)."""
    seconds: float = 0.0

    def line(self) -> str:
        return (
            f"power cut ({self.durability}): seed={self.seed} cuts={self.cuts} "
            f"threads={self.threads} items acknowledged={self.items_acked} "
            f"lost={self.items_lost} refused after the cut={self.refused} "
            f"torn tails={self.torn} "
            f"seconds={self.seconds:.0f}"
        )


Request = tuple[int, "Thread | None", list[str]]


class PowerCutLoop:
    """Record under load, cut the power at a random moment, remount, check, again."""

    def __init__(self, disk: PowerCutDisk, work: Path, durability: str, seed: int) -> None:
        self.disk = disk
        self.home = disk.mount
        self.work = work
        self.durability = durability
        self.rng = random.Random(seed)
        self.stats = Stats(seed, durability)
        self.threads: dict[str, Thread] = {}
        self.power_off = threading.Event()
        self.flowing = threading.Event()
        """Set by the first answer of a run."""

    @property
    def promised(self) -> bool:
        return self.durability != "none"

    def server(self) -> ServerProcess:
        return _server(self.disk, self.durability)

    def run_once(self) -> None:
        """Check what the last cut left, then record until the power goes."""
        self.power_off.clear()
        if not self.promised:
            self.repair()
        server = self.server()
        cutter = None
        try:
            self.check(server)
            self.resume_all(server)
            self.flowing.clear()
            cutter = threading.Thread(target=self._cut, args=(server, self.rng.uniform(0, 0.8)))
            cutter.start()
            self._stream(server)
        finally:
            if cutter is not None:
                self.flowing.set()  # a run that failed before any answer: cut at once
                cutter.join()
            server.close()
        self.disk.remount()
        self.stats.cuts += 1

    def _cut(self, server: ServerProcess, delay: float) -> None:
        """The machine dies, `delay` seconds into the load (counted from its first answer:
        a fresh process's first record pays for its start): the disk first, the server
        with it."""
        self.flowing.wait(HANG_GUARD)
        time.sleep(delay)
        self.power_off.set()
        self.disk.cut()
        server.proc.kill()

    # --- load --------------------------------------------------------------------------

    def _request(self, server: ServerProcess) -> Request:
        live = [t for t in self.threads.values() if t.session_id]
        if not live or (len(self.threads) < MAX_THREADS and self.rng.random() < 0.03):
            return server.request_async("thread/start", {"cwd": str(self.work)}), None, []
        thread = self.rng.choice(live)
        ids = [str(uuid.uuid4()) for _ in range(self.rng.randint(1, 3))]
        items = [
            {
                "type": "message",
                "role": "user",
                "id": i,
                "content": "x" * (9_000 if self.rng.random() < 0.02 else self.rng.randint(1, 300)),
            }
            for i in ids
        ]
        msg_id = server.request_async(
            "thread/record",
            {"threadId": thread.thread_id, "sessionId": thread.session_id, "items": items},
        )
        return msg_id, thread, ids

    def _stream(self, server: ServerProcess) -> None:
        pending: list[Request] = []
        while True:
            try:
                while len(pending) < WINDOW:
                    pending.append(self._request(server))
                reply = server.response(pending[0][0])
            except (ConnectionError, OSError):
                break
            self._acknowledge(pending.pop(0), reply)
        _wait_eof(server)
        for request in pending:  # answers that made it out before the kill count
            if request[0] in server.responses:
                self._acknowledge(request, server.responses.pop(request[0]))

    def _acknowledge(self, request: Request, reply: dict[str, Any]) -> None:
        _, thread, ids = request
        self.flowing.set()
        if "error" in reply:
            # Only once the disk is gone (EIO): then it is not acknowledged, so not owed.
            assert self.power_off.is_set(), reply
            self.stats.refused += 1
            return
        result = reply["result"]
        if thread is None:
            tid = result["thread"]["threadId"]
            self.threads[tid] = Thread(tid, result["sessionId"], started=True)
            return
        assert result["duplicates"] == 0, result
        assert result["lastSeq"] - result["firstSeq"] == len(ids) - 1, result
        for seq, item_id in enumerate(ids, result["firstSeq"]):
            thread.acked[seq] = item_id
        self.stats.items_acked += len(ids)

    # --- after the cut -----------------------------------------------------------------

    def repair(self) -> None:
        """`--durability none`: torn tails and empty files are what doctor --repair is for."""
        prefix = self.disk.reboot()
        repaired = sessiond(self.home, "doctor", "--repair", prefix=prefix)
        assert repaired.returncode == 0, repaired.stdout + repaired.stderr
        self.stats.torn += repaired.stdout.count("torn tail repaired")
        doctor = sessiond(self.home, "doctor", prefix=prefix)
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr

    def check(self, server: ServerProcess) -> None:
        """The index lists exactly the threads the files hold; every thread reads; every
        acknowledged item is at its seq, once (under `none`: counted when lost)."""
        listed = _list_all(server)
        on_disk = self._threads_on_disk()
        assert listed == on_disk, (sorted(listed - on_disk), sorted(on_disk - listed))
        for thread in list(self.threads.values()):
            if thread.thread_id not in on_disk:
                assert not (self.promised and thread.started), f"thread lost: {thread.thread_id}"
                self.stats.items_lost += len(thread.acked)
                del self.threads[thread.thread_id]
                continue
            found = _read_all(server, thread.thread_id)
            assert sorted(found) == list(range(1, len(found) + 1)), "gap in the seqs"
            ids = list(found.values())
            assert len(ids) == len(set(ids)), "an item stored twice"
            lost = {seq: i for seq, i in thread.acked.items() if found.get(seq) != i}
            if self.promised:
                assert not lost, f"acknowledged items lost in {thread.thread_id}: {lost}"
            self.stats.items_lost += len(lost)
            # what survived is what the next session builds on
            thread.acked = {seq: i for seq, i in thread.acked.items() if seq not in lost}
        for thread_id in on_disk - set(self.threads):  # made, never acknowledged
            self.threads[thread_id] = Thread(thread_id)

    def _threads_on_disk(self) -> set[str]:
        """Threads whose file holds a record, read from the mount."""
        found = set()
        for path in (self.home / "threads").glob("*/*.jsonl"):
            if parse_bytes(path.read_bytes()).items:
                found.add(path.stem)
        return found

    def resume_all(self, server: ServerProcess) -> None:
        for thread in self.threads.values():
            report = server.request("thread/resume", {"threadId": thread.thread_id})
            assert report["status"] == "ready", report
            self.stats.torn += bool(report["recovery"].get("tornTailRecovered"))
            thread.session_id = report["session"]["sessionId"]

    def final_check(self) -> None:
        self.repair()
        server = self.server()
        try:
            self.check(server)
            assert server.shutdown() == 0
        finally:
            server.close()


def _wait_eof(server: ServerProcess) -> None:
    deadline = time.monotonic() + HANG_GUARD
    with server._lock:
        while not server.eof and time.monotonic() < deadline:
            server._lock.wait(timeout=1)
    assert server.eof, "the killed server's output never closed"


@pytest.mark.parametrize("durability", ["fsync", "group", "none"])
def test_random_power_cuts_while_recording(tmp_path: Path, durability: str) -> None:
    seed = _seed()
    work = tmp_path / "work"
    work.mkdir()
    began = time.monotonic()
    cuts = CUTS if durability != "none" else max(CUTS // 4, 5)
    with power_cut_disk(tmp_path / "power", seed, writeback=True) as disk:
        loop = PowerCutLoop(disk, work, durability, seed)
        try:
            while loop.stats.cuts < cuts:
                loop.run_once()
            loop.final_check()
        except BaseException as exc:
            raise AssertionError(
                f"power cut ({durability}) failed with seed {seed} after {loop.stats.cuts} "
                f"cuts (replay: SESSIOND_POWER_CUT_SEED={seed}): {exc!r}\n"
                f"filesystem: {disk.cuts[-3:]}"
            ) from exc
        finally:
            loop.stats.seconds = time.monotonic() - began
            loop.stats.threads = len(loop.threads)
            print(loop.stats.line())
    assert loop.stats.cuts >= cuts
    if loop.promised:
        assert loop.stats.items_lost == 0
        assert loop.stats.items_acked > 0
