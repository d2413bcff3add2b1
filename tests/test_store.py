"""The thread store on real files: idempotency, locking, tolerant reads (faults: tests/faults/)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import uuid
from pathlib import Path

import pytest

from protocol.errors import ErrorKind, ProtocolError
from restore.home.layout import Layout
from restore.ids import is_thread_id, validate_thread_id
from restore.stores.api import Durability
from restore.stores.embedded.files import MARK_AHEAD_BYTES
from restore.stores.embedded.jsonl import LineMark, parse_bytes
from restore.stores.embedded.store import EmbeddedStore
from tests.support.items import make_store, message, named, session_meta


def test_lines_carry_the_documented_envelope_in_order(tmp_path: Path) -> None:
    tid = str(uuid.uuid4())
    writer = make_store(tmp_path).create(tid, "s1", session_meta(tid))
    writer.append([named("a")], "s1")
    first, second = writer.path.read_bytes().splitlines()
    assert first.startswith(b'{"v":1,"seq":1,"ts":"')
    assert list(parse_bytes(second + b"\n").items[0])[:6] == [
        "v",
        "seq",
        "ts",
        "type",
        "sessionId",
        "id",
    ]


def test_second_writer_in_the_same_process_is_busy(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    tid = str(uuid.uuid4())
    writer = store.create(tid, "s1", session_meta(tid))
    with pytest.raises(ProtocolError) as busy:
        store.open_writer(tid)
    assert busy.value.kind is ErrorKind.THREAD_BUSY
    writer.close()
    store.open_writer(tid).close()


def test_duplicate_ids_are_reported_with_their_original_seq(tmp_path: Path) -> None:
    tid = str(uuid.uuid4())
    writer = make_store(tmp_path).create(tid, "s1", session_meta(tid))
    first = writer.append([named("a"), named("b")], "s1")
    again = writer.append([named("b"), named("a"), named("c")], "s1")
    assert (first.first_seq, first.last_seq, first.duplicates) == (2, 3, 0)
    assert (again.first_seq, again.last_seq, again.duplicates) == (2, 4, 2)
    assert [i["id"] for i in parse_bytes(writer.path.read_bytes()).items[1:]] == ["a", "b", "c"]


def test_reader_keeps_unknown_item_types_from_newer_versions() -> None:
    data = (
        b'{"v":2,"seq":1,"ts":"t","type":"hologram","id":"h","sessionId":"s"}\n'
        b'{"v":1,"seq":2,"ts":"t","type":"message","id":"m","sessionId":"s"}\n'
    )
    parsed = parse_bytes(data)
    assert [i["type"] for i in parsed.items] == ["hologram", "message"]
    assert parsed.skipped == []


def test_complete_last_line_without_newline_is_kept_and_finished(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    tid = str(uuid.uuid4())
    writer = store.create(tid, "s1", session_meta(tid))
    writer.append([named("a")], "s1")
    writer.close()
    writer.path.write_bytes(writer.path.read_bytes().rstrip(b"\n"))
    reopened = store.open_writer(tid)
    reopened.append([named("b")], "s1")
    items = parse_bytes(reopened.path.read_bytes()).items
    assert [i["id"] for i in items[1:]] == ["a", "b"]


@pytest.mark.parametrize(
    "value", ["../x", "x" * 36, None, 5, "6F1E5A70-0000-4000-8000-00000000000G"]
)
def test_ids_are_validated_before_any_path_is_built(value: object) -> None:
    with pytest.raises(ProtocolError) as bad:
        validate_thread_id(value)
    assert bad.value.kind is ErrorKind.INVALID_ID


def test_group_commit_close_waits_for_the_sync_on_its_descriptor(tmp_path: Path) -> None:
    """The committer syncs the writer's descriptor: closing must wait for that sync, or
    the committer could sync a closed descriptor, or a number that names another file."""
    store = make_store(tmp_path, Durability.GROUP)
    tid = str(uuid.uuid4())
    writer = store.create(tid, "s1", session_meta(tid))
    writer.append([named("a")], "s1", defer_sync=True)
    pending = writer.begin_sync()
    assert pending is not None and writer.begin_sync() is None  # nothing more owed
    closer = threading.Thread(target=writer.close)
    closer.start()
    closer.join(timeout=0.5)
    assert closer.is_alive(), "close returned while a sync of its descriptor was pending"
    pending.run()  # not EBADF: the descriptor is still open
    closer.join()
    store.open_writer(tid).close()  # not ThreadBusy
    contents, _ = store.read(tid)
    assert [item["id"] for item in contents.items][1:] == ["a"]


def test_group_commit_redoes_a_failed_sync_before_acknowledging_a_retry(
    tmp_path: Path,
) -> None:
    from restore.service import Settings, open_service

    service = open_service(Settings(tmp_path, durability=Durability.GROUP))
    started = service.start(cwd=str(tmp_path), workspace_folder=None)
    tid, sid = started.summary.threadId, started.session_id
    item = named("once")
    service.record(tid, sid, [item], defer_sync=True)
    sync = service.begin_commit()
    assert sync is not None
    [pending] = service.store.group_commit.syncs  # type: ignore[attr-defined]
    pending._fd = 1 << 20  # the disk "fails": fdatasync on a closed descriptor, EBADF
    with pytest.raises(ProtocolError) as failed:
        sync()
    assert failed.value.kind is ErrorKind.STORAGE_ERROR
    result, _ = service.record(tid, sid, [item], defer_sync=True)  # the client retries
    assert result.duplicates == 1 and not result.stored
    retry_sync = service.begin_commit()
    assert retry_sync is not None, "the retry would be acknowledged without any sync"
    retry_sync()
    assert service.begin_commit() is None
    service.close_all()


def parking_store(home: Path, durability: Durability = Durability.FSYNC) -> EmbeddedStore:
    """An embedded store that keeps one writer's file open: the others are parked."""
    store = EmbeddedStore(Layout(home), durability)
    store.open_limit = 1
    return store


def open_descriptors(path: Path) -> int:
    """This process's descriptors on `path`."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(FileNotFoundError):
            count += os.readlink(f"/proc/self/fd/{fd}") == str(path)
    return count


def test_a_parked_writer_lets_its_file_go_and_takes_it_back_to_append(tmp_path: Path) -> None:
    store = parking_store(tmp_path)
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    writer = store.create(first, "s1", session_meta(first))
    other = store.create(second, "s2", session_meta(second))
    assert writer.parked and not other.parked
    assert open_descriptors(writer.path) == 0
    assert open_descriptors(Layout(tmp_path).writer_mark_path(first)) == 0
    writer.append([named("a")], "s1")  # taken back; the other one parked in turn
    assert not writer.parked and other.parked
    assert open_descriptors(writer.path) == 1
    assert [i["id"] for i in store.read(first)[0].items][1:] == ["a"]
    assert writer.checkpoint() is not None and other.checkpoint() is not None
    writer.close()
    other.close()  # closed parked: nothing left open, nothing held
    assert open_descriptors(other.path) == 0
    store.open_writer(second).close()
    store.close()


def test_a_long_last_lines_mark_is_the_files_and_a_parked_writer_takes_its_file_back(
    tmp_path: Path,
) -> None:
    """A line past MARK_AHEAD_BYTES is hashed as it is written, from the bytes written (not
    read back on the store thread): its mark is still the file's own, so derived state
    verifies against it and a parked writer reopens its file by it, then appends on."""
    store = parking_store(tmp_path)
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    writer = store.create(first, "s1", session_meta(first))
    other = store.create(second, "s2", session_meta(second))
    writer.append([message("x" * MARK_AHEAD_BYTES, item_id="long")], "s1")
    mark = writer.mark()
    assert mark is not None and mark.end - mark.start > MARK_AHEAD_BYTES
    fd = os.open(writer.path, os.O_RDONLY)
    try:
        assert mark == LineMark.of(fd, mark.start, mark.end) and mark.holds(fd)
    finally:
        os.close(fd)
    other.append([named("b")], "s2")  # the long line's writer parked, its mark kept
    assert writer.parked
    writer.append([named("a")], "s1")  # reopened: the file proved by that mark
    assert [i["id"] for i in store.read(first)[0].items][1:] == ["long", "a"]
    assert writer.mark() != mark  # the short line's mark, read from the file
    writer.close()
    other.close()
    store.close()


def test_a_parked_writers_thread_is_busy_for_every_other_writer(tmp_path: Path) -> None:
    """Its claim keeps it: another writer of the same store, or of another store (as a
    second process would be), is ThreadBusy though the file's flock is free."""
    store = parking_store(tmp_path)
    tid = str(uuid.uuid4())
    writer = store.create(tid, "s1", session_meta(tid))
    newer = str(uuid.uuid4())
    store.create(newer, "s2", session_meta(newer)).close()
    assert writer.parked
    with open(writer.path, "rb") as raw:
        fcntl.flock(raw, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the file's own lock is free
    for other in (store, EmbeddedStore(Layout(tmp_path))):
        with pytest.raises(ProtocolError) as busy:
            other.open_writer(tid)
        assert busy.value.kind is ErrorKind.THREAD_BUSY
    with pytest.raises(ProtocolError) as moving:
        store.set_archived(tid, True)
    assert moving.value.kind is ErrorKind.THREAD_BUSY
    writer.append([named("still mine")], "s1")
    writer.close()
    EmbeddedStore(Layout(tmp_path)).open_writer(tid).close()
    store.close()


def test_a_parked_writer_whose_file_changed_is_busy_and_writes_nothing(tmp_path: Path) -> None:
    """A writer that takes no claims (an earlier sessiond) appended while it was parked:
    the writer is lost (ThreadBusy, then closed) and leaves the file as the other left it;
    no snapshot is taken from what it knew."""
    store = parking_store(tmp_path)
    tid = str(uuid.uuid4())
    writer = store.create(tid, "s1", session_meta(tid))
    writer.append([named("a")], "s1")
    newer = str(uuid.uuid4())
    store.create(newer, "s2", session_meta(newer))
    assert writer.parked
    foreign = b'{"v":1,"seq":3,"ts":"t","type":"message","sessionId":"o","id":"theirs"}\n'
    with open(writer.path, "ab") as other:
        other.write(foreign)
    before = writer.path.read_bytes()
    with pytest.raises(ProtocolError) as lost:
        writer.append([named("b")], "s1")
    assert lost.value.kind is ErrorKind.THREAD_BUSY
    assert writer.closed and writer.checkpoint() is None
    with pytest.raises(ProtocolError) as again:
        writer.revalidate()
    assert again.value.kind is ErrorKind.THREAD_BUSY
    assert writer.path.read_bytes() == before
    writer.close()
    resumed = store.open_writer(tid)  # the thread is free for a new session
    assert resumed.last_seq == 3
    resumed.close()
    store.close()


def test_a_writer_owing_a_group_commit_is_synced_before_it_is_parked(tmp_path: Path) -> None:
    """Its descriptor is the one the sync must go through: parked, it owes nothing."""
    store = parking_store(tmp_path, Durability.GROUP)
    tid = str(uuid.uuid4())
    writer = store.create(tid, "s1", session_meta(tid))
    writer.append([named("deferred")], "s1", defer_sync=True)
    assert writer.unsynced
    newer = str(uuid.uuid4())
    store.create(newer, "s2", session_meta(newer))  # parks it
    assert writer.parked and not writer.unsynced
    assert store.begin_commit() is None  # nothing left to sync: the park did
    writer.append([named("next")], "s1", defer_sync=True)
    sync = store.begin_commit()
    assert sync is not None and not writer.parked
    sync()
    assert [i["id"] for i in store.read(tid)[0].items][1:] == ["deferred", "next"]
    store.close()


@pytest.mark.parametrize(
    "value",
    [
        str(uuid.UUID(int=0)),
        "6f1e5a70-0000-4000-8000-00000000000a",
        "6F1E5A70-0000-4000-8000-00000000000A",  # valid, but no file of the store's is named so
        "6f1e5a70-0000-4000-8000-00000000000a\n",
        "6f1e5a70000040008000-00000000000a-----",
        "{6f1e5a70-0000-4000-8000-0000000000}",
        "x" * 36,
        "",
    ],
)
def test_a_file_name_is_a_thread_id_exactly_when_it_is_the_canonical_form(value: str) -> None:
    """The watcher's one-match test (`is_thread_id`) takes what `validate_thread_id`
    returns and nothing else: no thread file is skipped, no other file looked at."""
    try:
        canonical = validate_thread_id(value) == value
    except ProtocolError:
        canonical = False
    assert is_thread_id(value) is canonical
    assert is_thread_id(str(uuid.uuid4()))
