"""The thread store on real files: idempotency, locking, tolerant reads (faults: tests/faults/)."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest

from protocol.errors import ErrorKind, ProtocolError
from restore.ids import validate_thread_id
from restore.stores.api import Durability
from restore.stores.embedded.jsonl import parse_bytes
from tests.support.items import make_store, named, session_meta


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
