"""One suite, both stores: what every backend of restore/stores promises, through the
service the server calls. Runs against the embedded store (real files, real SQLite) and
PostgreSQL (a real cluster: CI's, or one this run starts), never skipped.

Two `ThreadService`s on one store stand for two sessiond processes (two machines, for
PostgreSQL): each holds its own locks and connections.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from protocol.errors import ErrorKind, ProtocolError
from restore.service import Settings, ThreadService, open_service
from restore.stores.api import Durability, ListFilters
from tests.conftest import BOTH_STORES
from tests.support.items import message, named

pytestmark = BOTH_STORES

Services = Callable[..., ThreadService]


@pytest.fixture
def services(home: Path, store_url: str | None) -> Iterator[Services]:
    """Make services on the test's store; all closed at the end."""
    made: list[ThreadService] = []

    def make(durability: Durability = Durability.FSYNC) -> ThreadService:
        service = open_service(Settings(home, store_url, durability))
        made.append(service)
        return service

    yield make
    for service in made:
        service.close_all()


def started(service: ThreadService, cwd: Path, **extra: Any) -> tuple[str, str]:
    thread = service.start(cwd=str(cwd), workspace_folder=extra.pop("folder", None), **extra)
    return thread.summary.threadId, thread.session_id


def all_items(service: ThreadService, thread_id: str) -> list[dict[str, Any]]:
    return service.store.read(thread_id)[0].items


def test_appends_get_consecutive_seqs_and_a_repeated_id_its_original_seq(
    services: Services, tmp_path: Path
) -> None:
    service = services()
    tid, sid = started(service, tmp_path)
    first, _ = service.record(tid, sid, [named("a"), named("b")])
    again, _ = service.record(tid, sid, [named("b"), named("a"), named("c")])
    assert (first.first_seq, first.last_seq, first.duplicates) == (2, 3, 0)
    assert (again.first_seq, again.last_seq, again.duplicates) == (2, 4, 2)
    items = all_items(services(), tid)
    assert [(i["seq"], i["id"]) for i in items[1:]] == [(2, "a"), (3, "b"), (4, "c")]
    assert list(items[1])[:6] == ["v", "seq", "ts", "type", "sessionId", "id"]


def test_a_second_writer_is_busy_and_named_until_the_first_closes(
    services: Services, tmp_path: Path
) -> None:
    first, second = services(), services()
    tid, sid = started(first, tmp_path)
    first.store.name_holder(tid, "alpha (connection 1, pid 7)")
    with pytest.raises(ProtocolError) as busy:
        second.resume(tid, cwd=str(tmp_path), accept_drift=False, message_limit=10)
    assert busy.value.kind is ErrorKind.THREAD_BUSY
    assert busy.value.details["holder"].startswith("alpha (connection 1, pid 7)")
    first.close(tid, sid)
    report = second.resume(tid, cwd=str(tmp_path), accept_drift=False, message_limit=10)
    assert report["status"] == "ready" and report["session"]["resumedFrom"] == sid


def test_a_session_names_its_client_as_it_opens_for_another_process_s_thread_busy(
    services: Services, tmp_path: Path
) -> None:
    """Starting or resuming a session names its owner to the store in the same step (no
    call of its own after the answer): another process's ThreadBusy says who, from the
    first moment it can be asked."""
    first, second = services(), services()
    tid, sid = started(first, tmp_path, owner="alpha (connection 1, pid 7)")
    with pytest.raises(ProtocolError) as busy:
        second.resume(tid, cwd=str(tmp_path), accept_drift=False, message_limit=10)
    assert busy.value.details["holder"].startswith("alpha (connection 1, pid 7)")
    first.close(tid, sid, "alpha (connection 1, pid 7)")
    first.resume(tid, cwd=str(tmp_path), accept_drift=False, message_limit=10, owner="beta")
    with pytest.raises(ProtocolError) as busy:
        second.resume(tid, cwd=str(tmp_path), accept_drift=False, message_limit=10)
    assert busy.value.details["holder"].startswith("beta")


def test_reads_page_both_ways_in_seq_order_and_see_only_what_is_written(
    services: Services, tmp_path: Path
) -> None:
    service = services()
    tid, sid = started(service, tmp_path)
    service.record(tid, sid, [message(f"m{n}") for n in range(25)])
    pages = services().pages
    seen, after = [], 0
    while True:
        page = pages.read(tid, after=after, limit=10, max_bytes=1 << 20)
        assert len(page.items) <= 10 and page.raw == [orjson.dumps(i) for i in page.items]
        seen += [item["seq"] for item in page.items]
        if (after := page.next_seq) is None:
            break
    assert seen == list(range(1, 27))
    back, before = [], 27
    while before is not None:
        page = pages.read(tid, before=before, limit=10, max_bytes=1 << 20)
        assert [i["seq"] for i in page.items] == sorted(i["seq"] for i in page.items)
        back = [item["seq"] for item in page.items] + back
        before = page.next_seq
    assert back == list(range(1, 27))
    with pytest.raises(ProtocolError) as missing:
        pages.read(str(uuid.uuid4()), after=0, limit=10, max_bytes=1 << 20)
    assert missing.value.kind is ErrorKind.THREAD_NOT_FOUND


def test_pages_are_cut_by_bytes_and_an_item_too_large_for_any_answer_is_named(
    services: Services, tmp_path: Path
) -> None:
    service = services()
    tid, sid = started(service, tmp_path)
    service.record(tid, sid, [message("x" * 3000) for _ in range(6)])
    huge, _ = service.record(tid, sid, [message("y" * 20_000)])
    pages = services().pages
    budget = 512 + 3 * 3300  # the answer's overhead, and room for three of the small ones
    forward = pages.read(tid, after=1, limit=100, max_bytes=budget)
    assert [i["seq"] for i in forward.items] == [2, 3, 4] and forward.next_seq == 4
    backward = pages.read(tid, before=huge.first_seq, limit=100, max_bytes=budget)
    assert [i["seq"] for i in backward.items] == [5, 6, 7] and backward.next_seq == 5
    with pytest.raises(ProtocolError) as too_large:
        pages.read(tid, after=7, limit=100, max_bytes=budget)
    assert too_large.value.kind is ErrorKind.PAYLOAD_TOO_LARGE
    assert too_large.value.details["seq"] == huge.first_seq == 8
    past = pages.read(tid, after=8, limit=100, max_bytes=budget)
    assert past.items == [] and past.next_seq is None


def test_resume_carries_the_newest_messages_and_where_to_page_back_from(
    services: Services, tmp_path: Path
) -> None:
    service = services()
    tid, sid = started(service, tmp_path)
    service.record(tid, sid, [message(f"m{n}") for n in range(30)])
    service.close(tid, sid)
    report = services().resume(tid, cwd=str(tmp_path), accept_drift=False, message_limit=5)
    messages = report["messages"]
    assert [m["content"] for m in messages["items"]] == [f"m{n}" for n in range(25, 30)]
    assert messages["total"] == 30 and messages["nextBeforeSeq"] == messages["items"][0]["seq"]
    earlier = services().pages.read(
        tid, before=messages["nextBeforeSeq"], limit=25, max_bytes=1 << 20
    )
    assert [m["content"] for m in earlier.items] == [f"m{n}" for n in range(25)]


def test_list_filters_before_paging_newest_first(services: Services, tmp_path: Path) -> None:
    service = services()
    inside, outside = tmp_path / "ws", tmp_path / "elsewhere"
    (inside / "sub").mkdir(parents=True)
    outside.mkdir()
    wanted = []
    for n in range(7):
        tid, sid = started(service, inside / "sub" if n % 2 else inside, folder=str(inside))
        wanted.append(tid)
        for _ in range(3):  # interleaved: most of the newest rows are outside the folder
            other, other_sid = started(service, outside)
            service.record(other, other_sid, [message("noise")])
        service.record(tid, sid, [message(f"wanted {n}")])
    listing = services()
    found, cursor = [], None
    while True:
        page, cursor = listing.list(
            ListFilters(workspace_folder=str(inside), cursor=cursor, limit=2)
        )
        assert page, "a page came back empty while more results existed"
        found += [summary.threadId for summary in page]
        if cursor is None:
            break
    assert found == wanted[::-1]
    hits, _ = listing.list(ListFilters(search="WANTED 3"))
    assert [s.threadId for s in hits] == [wanted[3]]
    exact, _ = listing.list(ListFilters(cwd=str(inside / "sub")))
    assert {s.threadId for s in exact} == {wanted[n] for n in (1, 3, 5)}


def test_a_clean_close_leaves_a_snapshot_that_the_next_resume_uses(
    services: Services, tmp_path: Path
) -> None:
    service = services()
    tid, sid = started(service, tmp_path)
    service.record(tid, sid, [message(f"m{n}") for n in range(5)])
    service.close(tid, sid)
    report = services().resume(tid, cwd=str(tmp_path), accept_drift=False, message_limit=10)
    assert report["recovery"]["snapshotUsed"] is True
    assert report["continueReason"] == "user"
    assert [m["content"] for m in report["messages"]["items"]] == [f"m{n}" for n in range(5)]


def test_a_resume_after_a_crash_replays_what_the_snapshot_does_not_cover(
    services: Services, tmp_path: Path
) -> None:
    service = services()
    tid, sid = started(service, tmp_path)
    service.record(tid, sid, [message("before")])
    service.close(tid, sid)
    crashed = services()
    report = crashed.resume(tid, cwd=str(tmp_path), accept_drift=False, message_limit=10)
    crashed.record(tid, report["session"]["sessionId"], [message("after")])
    for session in crashed.sessions.open.values():  # it dies: no end, no snapshot; the lock goes
        session.writer.close()
    crashed.sessions.open.clear()
    again = services().resume(tid, cwd=str(tmp_path), accept_drift=False, message_limit=10)
    assert again["continueReason"] == "process_recovery"
    assert [m["content"] for m in again["messages"]["items"]] == ["before", "after"]


def test_archive_hides_and_refuses_resume_delete_removes_everything(
    services: Services, tmp_path: Path
) -> None:
    service = services()
    tid, sid = started(service, tmp_path)
    service.record(tid, sid, [message("keep me")])
    archived = service.archive(tid, True)
    assert archived.archived is True and archived.itemCount == 1

    def listed(archived: bool) -> list[str]:
        page, _ = services().list(ListFilters(archived=archived))
        return [s.threadId for s in page]

    assert listed(False) == [] and listed(True) == [tid]
    with pytest.raises(ProtocolError) as refused:
        services().resume(tid, cwd=str(tmp_path), accept_drift=False, message_limit=10)
    assert refused.value.kind is ErrorKind.THREAD_ARCHIVED
    service.archive(tid, False)
    assert listed(False) == [tid]
    service.delete(tid)
    assert listed(False) == [] and listed(True) == []
    with pytest.raises(ProtocolError) as gone:
        services().pages.read(tid, after=0, limit=10, max_bytes=1 << 20)
    assert gone.value.kind is ErrorKind.THREAD_NOT_FOUND
    assert services().store.load_snapshot(tid)[0] is None


def test_blobs_are_content_addressed_and_never_built_from_other_names(services: Services) -> None:
    store = services().store
    sha = store.put_blob(b"print('hi')\n")
    assert store.put_blob(b"print('hi')\n") == sha
    assert services().store.get_blob(sha) == b"print('hi')\n"
    assert store.get_blob("0" * 64) is None
    assert store.get_blob("../../etc/passwd") is None


def test_group_commit_acknowledges_after_the_shared_commit(
    services: Services, tmp_path: Path
) -> None:
    service = services(Durability.GROUP)
    threads = [started(service, tmp_path) for _ in range(3)]
    for tid, sid in threads:
        service.record(tid, sid, [message(f"in {tid}")], defer_sync=True)
    sync = service.begin_commit()
    if sync is not None:  # files: one fdatasync each, run by the committer
        sync()
    reader = services()
    for tid, _ in threads:
        assert [i["content"] for i in all_items(reader, tid)[1:]] == [f"in {tid}"]
