"""ThreadIndex: `thread/list` semantics (DESIGN §6) and the index as a throwaway accelerator."""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.errors import ErrorKind, ProtocolError
from restore.home.layout import Layout
from restore.stores.api import ListFilters
from restore.stores.cursors import encode_cursor
from restore.stores.embedded import marks
from restore.stores.embedded.files import ThreadStore
from restore.stores.embedded.index import Indexed, ThreadIndex
from restore.summary import ThreadSummary, summarize

REPO = Path(__file__).resolve().parent.parent


def ts(n: int) -> str:
    """A fixed-width UTC timestamp that sorts with n (0 <= n < 60 s)."""
    return f"2026-11-30T01:02:{n // 1_000_000:02d}.{n % 1_000_000:06d}Z"


def write_thread(
    layout: Layout,
    *,
    at: int,
    cwd: str = "/w/a",
    workspace: str | None = "/w/a",
    messages: tuple[str, ...] = ("hello",),
    title: str | None = None,
    archived: bool = False,
    thread_id: str | None = None,
    parent: str | None = None,
) -> str:
    """Write a thread file: session_meta, then user messages, all stamped `at`."""
    thread_id = thread_id or str(uuid.uuid4())
    session = str(uuid.uuid4())
    meta: dict[str, Any] = {"cwd": cwd, "workspaceFolder": workspace, "branch": "main"}
    if title is not None:
        meta["title"] = title
    if parent is not None:
        meta["parentThreadId"] = parent
    items = [{"type": "session_meta", "threadId": thread_id, "source": "startup", **meta}]
    items += [{"type": "message", "role": "user", "content": text} for text in messages]
    lines = [
        {"v": 1, "seq": seq, "ts": ts(at), "sessionId": session, "id": str(uuid.uuid4())} | item
        for seq, item in enumerate(items, start=1)
    ]
    path = layout.thread_path(thread_id, archived=archived)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return thread_id


def append_message(path: Path, at: int, text: str) -> None:
    line = {
        "v": 1,
        "seq": 99,
        "ts": ts(at),
        "type": "message",
        "sessionId": str(uuid.uuid4()),
        "id": str(uuid.uuid4()),
        "role": "user",
        "content": text,
    }
    with path.open("ab") as f:
        f.write(orjson.dumps(line) + b"\n")


def read_summary(path: Path, archived: bool, since: Indexed | None = None) -> Indexed | None:
    """The reader the service gives its index: the store's (`since`: from a row's end)."""
    return ThreadStore(Layout(path.parents[2])).read_summary(path, archived, since)


def summary_of(path: Path, archived: bool) -> ThreadSummary:
    """The truth, independently of the store: parse every line and fold it into a summary."""
    items = []
    for line in path.read_bytes().splitlines():
        try:
            items.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            continue
    return summarize(path.stem, items, archived=archived)


def all_pages(index: ThreadIndex, limit: int, **filters: Any) -> list[list[ThreadSummary]]:
    """Follow cursors to the end, checking the page contract on the way."""
    pages: list[list[ThreadSummary]] = []
    cursor = None
    while True:
        page, cursor = index.list(ListFilters(cursor=cursor, limit=limit, **filters))
        pages.append(page)
        if cursor is None:
            return pages
        assert len(page) == limit, "a page with a cursor must be full"


def ids(summaries: list[ThreadSummary]) -> list[str]:
    return [s.threadId for s in summaries]


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    return Layout(tmp_path / "home")


def open_index(layout: Layout) -> ThreadIndex:
    index = ThreadIndex(layout, read_summary)
    index.ensure_ready()
    return index


def test_list_is_newest_first_and_filters_by_cwd_workspace_archived_and_search(
    layout: Layout,
) -> None:
    old = write_thread(layout, at=10, cwd="/w/a", messages=("Fix the BUG in parser",))
    sub = write_thread(layout, at=20, cwd="/w/a/pkg", workspace=None, messages=("Straße",))
    sibling = write_thread(layout, at=30, cwd="/w/ab", workspace="/w/ab", messages=("bug two",))
    other = write_thread(layout, at=40, cwd="/elsewhere", workspace="/w/a", title="Über bug")
    gone = write_thread(layout, at=50, cwd="/w/a", archived=True, messages=("archived bug",))
    backup = write_thread(layout, at=60, cwd="/w/a.bak", workspace=None, messages=("copy",))
    index = open_index(layout)

    assert ids(index.list()[0]) == [backup, other, sibling, sub, old]
    assert ids(index.list(ListFilters(cwd="/w/a"))[0]) == [old]
    assert ids(index.list(ListFilters(workspace_folder="/w/a"))[0]) == [other, sub, old]
    assert ids(index.list(ListFilters(workspace_folder="/w/ab"))[0]) == [sibling]
    assert ids(index.list(ListFilters(archived=True))[0]) == [gone]
    assert ids(index.list(ListFilters(archived=True, cwd="/w/a"))[0]) == [gone]
    assert ids(index.list(ListFilters(search="bug"))[0]) == [other, sibling, old]
    assert ids(index.list(ListFilters(search="über"))[0]) == [other]
    assert ids(index.list(ListFilters(search="STRASSE"))[0]) == [sub]
    assert ids(index.list(ListFilters(search="bug", workspace_folder="/w/a"))[0]) == [other, old]


def test_search_treats_like_wildcards_literally(layout: Layout) -> None:
    percent = write_thread(layout, at=1, messages=("50% done",))
    underscore = write_thread(layout, at=2, messages=("snake_case",))
    write_thread(layout, at=3, messages=("plain text",))
    index = open_index(layout)
    assert ids(index.list(ListFilters(search="%"))[0]) == [percent]
    assert ids(index.list(ListFilters(search="_"))[0]) == [underscore]


def test_workspace_folder_does_not_treat_wildcards_in_the_folder_as_patterns(
    layout: Layout,
) -> None:
    write_thread(layout, at=1, cwd="/w/ax/sub", workspace=None)
    inside = write_thread(layout, at=2, cwd="/w/a_/sub", workspace=None)
    index = open_index(layout)
    assert ids(index.list(ListFilters(workspace_folder="/w/a_"))[0]) == [inside]
    assert index.list(ListFilters(workspace_folder="/w/a%"))[0] == []


def test_five_matches_among_500_page_as_2_2_1_and_the_last_has_no_cursor(
    layout: Layout,
) -> None:
    for n in range(500):
        write_thread(layout, at=1000 + n, cwd=f"/noise/{n % 7}", workspace=None)
    wanted = [write_thread(layout, at=n * 200 + 7, cwd="/w/target") for n in range(5)]
    index = open_index(layout)

    pages = all_pages(index, 2, cwd="/w/target")

    assert [len(p) for p in pages] == [2, 2, 1]
    assert [t for p in pages for t in ids(p)] == wanted[::-1]
    assert index.list(ListFilters(cwd="/w/target", limit=5))[1] is None


def test_exactly_full_last_page_has_no_cursor(layout: Layout) -> None:
    for n in range(4):
        write_thread(layout, at=n)
    pages = all_pages(open_index(layout), 2)
    assert [len(p) for p in pages] == [2, 2]


CWDS = ["/w/a", "/w/a/sub", "/w/ab", "/w/a-b", "/w/a.b", "/w/a_", "/w/b", "/"]
TEXTS = ["hello", "Straße", "Fix the BUG", "50% done", "snake_case", "Über alles", ""]
thread_specs = st.lists(
    st.fixed_dictionaries(
        {
            "at": st.integers(0, 30),  # few distinct timestamps: ties exercise threadId order
            "cwd": st.sampled_from(CWDS),
            "workspace": st.sampled_from([None, *CWDS]),
            "text": st.sampled_from(TEXTS),
            "title": st.sampled_from([None, "Bug hunt", "notes"]),
            "archived": st.booleans(),
        }
    ),
    max_size=25,
)
filters = st.fixed_dictionaries(
    {},
    optional={
        "cwd": st.sampled_from(CWDS),
        "workspace_folder": st.sampled_from(["/w/a", "/w/a/", "/w", "/", "/w/a_"]),
        "archived": st.booleans(),
        "search": st.sampled_from(["", "bug", "STRASSE", "%", "_", "ÜBER", "hello", "o"]),
    },
)


def expected(rows: list[ThreadSummary], f: dict[str, Any]) -> list[str]:
    """The filter semantics of DESIGN §6, written plainly over the full list."""

    def under(cwd: str | None, folder: str) -> bool:
        return cwd is not None and (cwd == folder or cwd.startswith(folder.rstrip("/") + "/"))

    def keep(s: ThreadSummary) -> bool:
        folder = f.get("workspace_folder")
        needle = (f.get("search") or "").casefold()
        return (
            s.archived == f.get("archived", False)
            and ("cwd" not in f or s.cwd == f["cwd"])
            and (folder is None or s.workspaceFolder == folder or under(s.cwd, folder))
            and any(needle in (text or "").casefold() for text in (s.title, s.preview))
        )

    ordered = sorted(rows, key=lambda s: (s.updatedAt, s.threadId), reverse=True)
    return [s.threadId for s in ordered if keep(s)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=thread_specs, f=filters, limit=st.integers(1, 6))
def test_pages_concatenate_to_the_filtered_ordered_list(
    specs: list[dict[str, Any]], f: dict[str, Any], limit: int
) -> None:
    with tempfile.TemporaryDirectory() as home:
        layout = Layout(Path(home))
        for spec in specs:
            write_thread(
                layout,
                at=spec["at"] + 5,
                cwd=spec["cwd"],
                workspace=spec["workspace"],
                messages=(spec["text"],),
                title=spec["title"],
                archived=spec["archived"],
            )
        index = open_index(layout)
        try:
            truth = [summary_of(p, a) for p, a in layout.iter_thread_files()]
            pages = all_pages(index, limit, **f)
        finally:
            index.close()
    assert all(pages[1:]), "a cursor led to an empty page"
    assert [t for p in pages for t in ids(p)] == expected([s for s in truth if s], f)


def test_cursor_is_stable_when_a_newer_thread_is_inserted_between_pages(layout: Layout) -> None:
    threads = [write_thread(layout, at=n * 10) for n in range(1, 6)]
    index = open_index(layout)
    first, cursor = index.list(ListFilters(limit=2))
    newer = write_thread(layout, at=1000)
    index.upsert(summary_of(layout.thread_path(newer), False), layout.thread_path(newer))
    rest = []
    while cursor is not None:
        page, cursor = index.list(ListFilters(limit=2, cursor=cursor))
        rest += page
    assert ids(first) + ids(rest) == threads[::-1]
    assert ids(index.list(ListFilters(limit=1))[0]) == [newer]


def test_rows_round_trip_every_summary_field(layout: Layout) -> None:
    thread_id = write_thread(layout, at=5)
    path = layout.thread_path(thread_id)
    full = ThreadSummary(
        threadId=thread_id,
        title="t",
        preview="p",
        cwd="/w/a",
        workspaceFolder="/w",
        branch="main",
        headSha="abc",
        createdAt=ts(1),
        updatedAt=ts(5),
        itemCount=3,
        archived=True,
        forkedFrom={"threadId": str(uuid.uuid4()), "seq": 7},
        costUsd=1.25,
        origin={"agent": "codex", "sessionId": "s-1", "path": "/r/rollout.jsonl"},
        parentThreadId=str(uuid.uuid4()),
        parentOperationId="call-1",
        childCount=0,
        lastSeq=9,
        latestSessionId=str(uuid.uuid4()),
        sessionKey="direct:ana",
        previousThreadId=str(uuid.uuid4()),
        nextThreadId=str(uuid.uuid4()),
        resetReason="idle",
    )
    # A field added to ThreadSummary without a column would make this test fail.
    defaults = ThreadSummary(threadId=thread_id)
    fields = dataclasses.fields(ThreadSummary)
    untouched = [f.name for f in fields if getattr(full, f.name) == getattr(defaults, f.name)]
    assert untouched == ["threadId"]
    index = open_index(layout)
    index.upsert(full, path)
    # The child count is the listing's (no column): a row read alone has none.
    assert index.get(thread_id) == dataclasses.replace(full, childCount=None)
    assert index.list(ListFilters(archived=True, parent_thread_id=full.parentThreadId))[0] == [full]
    assert index.list(ListFilters(archived=True))[0] == [full]  # its parent is not here: at the top
    parent = ThreadSummary(threadId=full.parentThreadId, archived=True, updatedAt="2026-01-01")
    parent_path = layout.thread_path(full.parentThreadId)
    parent_path.parent.mkdir(parents=True, exist_ok=True)
    parent_path.write_bytes(b"")
    index.upsert(parent, parent_path)
    listed = index.list(ListFilters(archived=True))[0]  # a child is listed under its parent only
    assert [row.threadId for row in listed] == [full.parentThreadId]
    index.remove(full.parentThreadId)
    index.remove(thread_id)
    assert index.get(thread_id) is None


def test_ensure_ready_reports_opened_then_ready(layout: Layout) -> None:
    write_thread(layout, at=1)
    first = ThreadIndex(layout, read_summary)
    assert first.ensure_ready() == "rebuilt"
    assert first.ensure_ready() == "ready"
    first.close()
    again = ThreadIndex(layout, read_summary)
    assert again.ensure_ready() == "opened"


def test_constructing_the_index_opens_no_database(layout: Layout) -> None:
    ThreadIndex(layout, read_summary)
    assert not layout.index_path.exists()


def built(layout: Layout) -> list[str]:
    for n in range(3):
        write_thread(layout, at=n, archived=n == 0)
    index = open_index(layout)
    listed = ids(index.list()[0]) + ids(index.list(ListFilters(archived=True))[0])
    index.close()
    return listed


def test_deleted_index_is_rebuilt_with_the_same_threads(layout: Layout) -> None:
    listed = built(layout)
    layout.index_path.unlink()
    index = ThreadIndex(layout, read_summary)
    assert index.ensure_ready() == "rebuilt"
    assert ids(index.list()[0]) + ids(index.list(ListFilters(archived=True))[0]) == listed


def test_garbage_index_is_kept_aside_and_rebuilt(layout: Layout) -> None:
    listed = built(layout)
    garbage = b"this is not sqlite\x00\xff" * 500
    layout.index_path.write_bytes(garbage)
    index = ThreadIndex(layout, read_summary)
    assert index.ensure_ready() == "rebuilt"
    assert ids(index.list()[0]) + ids(index.list(ListFilters(archived=True))[0]) == listed
    aside = list(layout.home.glob("index.sqlite3.corrupt-*"))
    assert [p.read_bytes() for p in aside] == [garbage]


@pytest.mark.parametrize("damage", ["PRAGMA user_version = 999", "DROP TABLE threads"])
def test_wrong_schema_is_rebuilt(layout: Layout, damage: str) -> None:
    listed = built(layout)
    with sqlite3.connect(layout.index_path) as conn:
        conn.execute(damage)
    conn.close()
    index = ThreadIndex(layout, read_summary)
    assert index.ensure_ready() == "rebuilt"
    assert ids(index.list()[0]) + ids(index.list(ListFilters(archived=True))[0]) == listed
    assert index.ensure_ready() == "ready"


def test_progress_is_reported_during_rebuild_and_ends_at_total(layout: Layout) -> None:
    for n in range(250):
        write_thread(layout, at=n)
    calls: list[tuple[int, int]] = []
    ThreadIndex(layout, read_summary).ensure_ready(lambda done, total: calls.append((done, total)))
    assert calls[0] == (0, 250)
    assert calls[-1] == (250, 250)
    assert len(calls) >= 3
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)


def test_reconcile_picks_up_appends_made_behind_the_index(layout: Layout) -> None:
    thread_id = write_thread(layout, at=1, messages=("one",))
    index = open_index(layout)
    assert index.get(thread_id).itemCount == 1  # type: ignore[union-attr]
    index.close()
    append_message(layout.thread_path(thread_id), at=2, text="two")

    reopened = ThreadIndex(layout, read_summary)
    assert reopened.ensure_ready() == "opened"
    row = reopened.get(thread_id)
    assert row is not None and row.itemCount == 2 and row.updatedAt == ts(2)


def test_reconcile_drops_threads_whose_file_is_gone(layout: Layout) -> None:
    kept = write_thread(layout, at=1)
    gone = write_thread(layout, at=2)
    open_index(layout).close()
    layout.thread_path(gone).unlink()
    assert ids(open_index(layout).list()[0]) == [kept]


def test_reconcile_follows_a_thread_moved_to_archived(layout: Layout) -> None:
    thread_id = write_thread(layout, at=1)
    open_index(layout).close()
    live = layout.thread_path(thread_id)
    archived = layout.thread_path(thread_id, archived=True)
    archived.parent.mkdir(parents=True)
    live.rename(archived)
    index = open_index(layout)
    assert index.list()[0] == []
    assert ids(index.list(ListFilters(archived=True))[0]) == [thread_id]


def test_reconcile_rereads_only_changed_files(layout: Layout) -> None:
    ids_ = [write_thread(layout, at=n) for n in range(5)]
    open_index(layout).close()
    append_message(layout.thread_path(ids_[2]), at=9, text="more")
    read: list[Path] = []

    def counting(path: Path, archived: bool, since: Indexed | None) -> Indexed | None:
        read.append(path)
        return read_summary(path, archived, since)

    assert ThreadIndex(layout, counting).ensure_ready() == "opened"
    assert read == [layout.thread_path(ids_[2])]


@pytest.mark.parametrize(
    "cursor",
    [
        "not base64 !!",
        "e30",  # {}
        encode_cursor("a", "b")[:-3],
        "WzEsMl0",  # [1,2]
        "WyJhIl0",  # ["a"]
    ],
)
def test_malformed_cursor_is_invalid_params(layout: Layout, cursor: str) -> None:
    write_thread(layout, at=1)
    with pytest.raises(ProtocolError) as raised:
        open_index(layout).list(ListFilters(cursor=cursor))
    assert raised.value.kind == ErrorKind.INVALID_PARAMS


def test_limit_is_clamped(layout: Layout) -> None:
    for n in range(3):
        write_thread(layout, at=n)
    index = open_index(layout)
    page, cursor = index.list(ListFilters(limit=0))
    assert len(page) == 1 and cursor is not None
    assert len(index.list(ListFilters(limit=10_000))[0]) == 3


def test_filtered_pages_use_an_index_not_a_table_scan(layout: Layout) -> None:
    write_thread(layout, at=1)
    index = open_index(layout)
    cursor = encode_cursor(ts(5), str(uuid.uuid4()))
    with sqlite3.connect(layout.index_path) as conn:
        for f in ({}, {"cwd": "/w/a"}, {"archived": True}, {"workspace_folder": "/w"}):
            query = {"cwd": None, "workspace_folder": None, "archived": False, "search": None}
            sql, params = index._list_query(ListFilters(**(query | f), cursor=cursor), 50)
            plan = " ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params))
            assert "USING INDEX" in plan and "SCAN" not in plan and "TEMP B-TREE" not in plan, plan
    conn.close()


def test_importing_the_index_does_not_import_sqlite3() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import restore.stores.embedded.index, sys; print('sqlite3' in sys.modules)",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "False"


def test_a_grown_file_is_read_from_where_its_row_ends(layout: Layout) -> None:
    thread_id = write_thread(layout, at=1, messages=("first words", "second"))
    open_index(layout).close()
    path = layout.thread_path(thread_id)
    # An edit before the row's last line (same length) would show in a read from byte 0:
    # files are append-only, so what the row covers is not read again.
    path.write_bytes(path.read_bytes().replace(b"first words", b"FIRST WORDS"))
    append_message(path, at=2, text="third")
    row = open_index(layout).get(thread_id)
    assert row is not None and row.preview == "first words"
    assert row.itemCount == 3 and row.updatedAt == ts(2)


def test_a_file_whose_last_covered_line_changed_is_read_whole(layout: Layout) -> None:
    thread_id = write_thread(layout, at=1, messages=("one", "two"))
    open_index(layout).close()
    path = layout.thread_path(thread_id)
    path.write_bytes(path.read_bytes().replace(b'"one"', b'"ONE"').replace(b'"two"', b'"TWO"'))
    append_message(path, at=2, text="three")
    row = open_index(layout).get(thread_id)
    assert row == summary_of(path, False)
    assert row is not None and row.preview == "ONE"


def test_a_torn_tail_is_left_out_of_the_row_until_it_is_whole(layout: Layout) -> None:
    thread_id = write_thread(layout, at=1, messages=("one",))
    path = layout.thread_path(thread_id)
    append_message(path, at=2, text="two")
    whole = path.read_bytes()
    cut = whole.rindex(b"\n", 0, len(whole) - 1) + 30
    path.write_bytes(whole[:cut])  # the last record, cut short by a crash
    index = open_index(layout)
    assert index.get(thread_id).itemCount == 1  # type: ignore[union-attr]
    index.close()
    path.write_bytes(whole)  # the writer finished it (or a repair and a new append)
    row = open_index(layout).get(thread_id)
    assert row is not None and row.itemCount == 2 and row.updatedAt == ts(2)


def test_an_index_of_the_version_before_sub_agents_is_rebuilt_with_them(layout: Layout) -> None:
    """Schema 5 added the parent of a sub-agent's thread: an index of schema 4 (its rows
    have no parent, every thread looks top-level) is rebuilt from the thread files, which
    hold it, the first time it is opened."""
    parent = write_thread(layout, at=1)
    child = write_thread(layout, at=2, parent=parent)
    index = open_index(layout)
    index.close()
    with sqlite3.connect(layout.index_path) as old:  # as sessiond 0.x left it
        old.execute("UPDATE threads SET parentThreadId = NULL")
        old.execute("PRAGMA user_version = 4")
    old.close()
    reopened = ThreadIndex(layout, read_summary)
    assert reopened.ensure_ready() == "rebuilt"
    (top,) = reopened.list()[0]
    assert (top.threadId, top.childCount) == (parent, 1)
    assert ids(reopened.list(ListFilters(parent_thread_id=parent))[0]) == [child]
    reopened.close()


# --- the first open of a process: what it reads again, and what it does not -------------


def age_shards(layout: Layout) -> None:
    """Shard directories as an hour-old data dir has them (mtimes older than the clock's
    racy window, so the index trusts them)."""
    old = time.time() - 3600
    for base in (layout.threads_dir, layout.archived_dir):
        for shard in base.iterdir() if base.is_dir() else []:
            os.utime(shard, (old, old))


def counting_index(layout: Layout) -> tuple[ThreadIndex, list[Path]]:
    read: list[Path] = []

    def counting(path: Path, archived: bool, since: Indexed | None) -> Indexed | None:
        read.append(path)
        return read_summary(path, archived, since)

    return ThreadIndex(layout, counting), read


def test_first_open_reads_only_the_threads_a_dead_writer_marked(layout: Layout) -> None:
    threads = [write_thread(layout, at=n) for n in range(40)]
    age_shards(layout)
    open_index(layout).close()
    crashed, edited = threads[3], threads[7]
    # What a writer killed after its append leaves: the mark it held, held by nobody.
    os.close(marks.hold(layout, crashed))
    append_message(layout.thread_path(crashed), at=50, text="written before the kill")
    append_message(layout.thread_path(edited), at=51, text="no writer: nobody marked it")

    index, read = counting_index(layout)
    assert index.ensure_ready() == "opened"
    assert read == [layout.thread_path(crashed)]
    row = index.get(crashed)
    assert row is not None and row.itemCount == 2 and row.updatedAt == ts(50)
    assert list(layout.writers_dir.iterdir()) == []  # read into the index: the mark went
    index.close()

    again, read = counting_index(layout)
    assert again.ensure_ready() == "opened" and read == []  # nothing left behind


def test_a_live_writers_mark_is_read_again_and_kept(layout: Layout) -> None:
    thread_id = write_thread(layout, at=1)
    age_shards(layout)
    open_index(layout).close()
    held = marks.hold(layout, thread_id)  # a writer alive (in another process, say)
    try:
        append_message(layout.thread_path(thread_id), at=2, text="not in its row yet")
        index, read = counting_index(layout)
        index.ensure_ready()
        assert read == [layout.thread_path(thread_id)]
        assert index.get(thread_id).itemCount == 2  # type: ignore[union-attr]
        assert layout.writer_mark_path(thread_id).exists()
    finally:
        marks.release(layout, thread_id, held)
    assert not layout.writer_mark_path(thread_id).exists()


def test_files_created_or_removed_behind_the_index_are_found_by_their_shard(
    layout: Layout,
) -> None:
    kept = [write_thread(layout, at=n) for n in range(30)]
    age_shards(layout)
    open_index(layout).close()
    gone = kept.pop(5)
    layout.thread_path(gone).unlink()
    new = write_thread(layout, at=40)  # a copied-in file, say: no writer, no mark

    index, read = counting_index(layout)
    listed = ids(index.list(ListFilters(limit=100))[0])
    assert read == [layout.thread_path(new)]
    assert sorted(listed) == sorted([*kept, new])


def test_after_a_reboot_every_file_is_compared(layout: Layout) -> None:
    threads = [write_thread(layout, at=n) for n in range(10)]
    age_shards(layout)
    open_index(layout).close()
    append_message(layout.thread_path(threads[2]), at=20, text="synced, its row lost")
    # The index of a previous boot: a power loss may have lost rows the files kept.
    with sqlite3.connect(layout.index_path) as conn:
        conn.execute("UPDATE meta SET value = 'a-previous-boot' WHERE key = 'boot'")
    conn.close()

    index, read = counting_index(layout)
    index.ensure_ready()
    assert read == [layout.thread_path(threads[2])]
    assert index.get(threads[2]).updatedAt == ts(20)  # type: ignore[union-attr]


def test_an_index_damaged_after_its_open_is_rebuilt_on_use(layout: Layout) -> None:
    listed = built(layout)
    age_shards(layout)
    open_index(layout).close()
    with layout.index_path.open("r+b") as f:  # every page after the header: garbage
        f.seek(4096)
        f.write(os.urandom(layout.index_path.stat().st_size - 4096))
    index = ThreadIndex(layout, read_summary)
    assert ids(index.list()[0]) + ids(index.list(ListFilters(archived=True))[0]) == listed
    assert list(layout.home.glob("index.sqlite3.corrupt-*"))


def test_a_writer_mark_lives_until_the_threads_row_is_written(layout: Layout) -> None:
    from restore.stores.embedded.store import EmbeddedStore

    layout.home.mkdir(mode=0o700)  # a server makes it at its first request (home/state.py)
    store = EmbeddedStore(layout)
    store.index.ensure_ready()
    thread_id = str(uuid.uuid4())
    mark = layout.writer_mark_path(thread_id)
    meta = {"type": "session_meta", "id": str(uuid.uuid4()), "threadId": thread_id,
            "source": "startup", "cwd": "/w/a"}  # fmt: skip
    writer = store.create(thread_id, "s1", meta)
    assert mark.exists()
    assert marks.probe(layout).alive == [thread_id]  # held: a writer alive
    writer.append([{"type": "message", "id": str(uuid.uuid4()), "role": "user",
                    "content": "closed before its row is written"}], "s1")  # fmt: skip
    writer.close()
    assert mark.exists()  # what a kill -9 now would leave: the next first list reads it
    found = marks.probe(layout)
    assert list(found.dead) == [thread_id]
    for fd in found.dead.values():  # looked at, not taken: left for the store's own flush
        os.close(fd)
    store.flush()
    assert not mark.exists()
    assert store.index.get(thread_id).itemCount == 1  # type: ignore[union-attr]

    again = store.open_writer(thread_id)  # a row already current: the mark goes at close
    again.close()
    assert list(layout.writers_dir.iterdir()) == []
    store.close()


def test_a_writer_taking_over_a_dead_writers_mark_does_not_take_its_name(
    layout: Layout,
) -> None:
    """A held mark names its holder (for other processes' ThreadBusy); a dead writer's
    mark still says who it was. The next writer empties it as it takes it over, so until
    it names itself a ThreadBusy says "another process", never the dead writer's client
    (whose pid may well be alive: the server lives on, only its session ended)."""
    from restore.stores.embedded.store import EmbeddedStore

    layout.home.mkdir(mode=0o700)
    first, second = EmbeddedStore(layout), EmbeddedStore(layout)
    thread_id = str(uuid.uuid4())
    meta = {"type": "session_meta", "id": str(uuid.uuid4()), "threadId": thread_id,
            "source": "startup", "cwd": "/w/a"}  # fmt: skip
    first.create(thread_id, "s1", meta).close()
    mark = layout.writer_mark_path(thread_id)
    mark.write_bytes(orjson.dumps({"holder": "ghost (connection 1)", "pid": os.getpid()}))
    taken = second.open_writer(thread_id)
    assert mark.read_bytes() == b""
    with pytest.raises(ProtocolError) as busy:
        first.open_writer(thread_id)
    assert busy.value.details["holder"] == "another process"
    second.name_holder(thread_id, "alpha (connection 2)")
    with pytest.raises(ProtocolError) as busy:
        first.open_writer(thread_id)
    assert busy.value.details["holder"] == "alpha (connection 2)"
    assert not (layout.locks_dir / f"{thread_id}.holder").exists()  # no file made for it
    taken.close()
    first.close()
    second.close()


def test_a_probe_holds_a_bounded_number_of_dead_marks(layout: Layout) -> None:
    """Thousands of dead writers (a server killed with its sessions open) are read again,
    but only `PROBE_HELD` of their marks are locked, a descriptor each, and removed."""
    layout.writers_dir.mkdir(parents=True)
    left = sorted(str(uuid.uuid4()) for _ in range(marks.PROBE_HELD + 6))
    for thread_id in left:
        layout.writer_mark_path(thread_id).touch()
    found = marks.probe(layout)
    assert len(found.dead) == marks.PROBE_HELD
    assert sorted(found.thread_ids) == left
    found.clear()
    assert sorted(p.name for p in layout.writers_dir.iterdir()) == sorted(found.alive)
