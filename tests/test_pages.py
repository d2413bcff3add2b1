"""Pages of a thread (restore/stores/embedded/pages.py): forward and backward pages tile the
thread exactly, whatever the page size, the byte budget, damaged lines, snapshots or conversation
boundaries; the offset map is derived state (deleted, corrupt or stale: same answers);
resume's newest messages are the last ones a full replay keeps."""

from __future__ import annotations

import random
import tempfile
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.errors import ErrorKind, ProtocolError
from restore.service import Settings, open_service
from restore.stores.api import ANSWER_OVERHEAD, Durability, Page
from restore.stores.embedded import snapshots
from restore.stores.embedded.jsonl import parse_bytes
from restore.stores.embedded.pages import ThreadPages

SMALL_ANCHORS = 700  # bytes between anchors: many anchors in a small test thread

ops = st.lists(
    st.one_of(
        st.tuples(st.just("message"), st.integers(0, 600)),
        st.tuples(st.just("cost"), st.just(0)),
        st.tuples(st.just("clear"), st.just(0)),
        st.tuples(st.just("compact"), st.just(0)),
        st.tuples(st.just("rewind"), st.integers(1, 30)),
        st.tuples(st.just("snapshot"), st.just(0)),
    ),
    min_size=1,
    max_size=80,
)


class Recorder:
    """A thread built through the real service, op by op."""

    def __init__(self, home: Path) -> None:
        self.service = open_service(Settings(home, durability=Durability.NONE))
        started = self.service.start(cwd=str(home), workspace_folder=None)
        self.thread_id, self.session_id = started.summary.threadId, started.session_id

    @property
    def path(self) -> Path:
        return self.service.layout.thread_path(self.thread_id)

    def apply(self, op: str, arg: int) -> None:
        service, tid = self.service, self.thread_id
        session = service.session_for(tid, self.session_id, "local")
        if op == "message":
            role = random.Random(arg).choice(["user", "assistant"])
            item = {"type": "message", "id": str(uuid.uuid4()), "role": role, "content": "w" * arg}
            service.record(tid, self.session_id, [item])
        elif op == "cost":
            item = {"type": "cost", "id": str(uuid.uuid4()), "model": "m", "inputTokens": 1,
                    "outputTokens": 1, "usd": 0.01}  # fmt: skip
            service.record(tid, self.session_id, [item])
        elif op == "clear":
            self.session_id = service.clear(tid, self.session_id)["sessionId"]
        elif op == "compact":
            service.compact(tid, self.session_id, f"summary at {session.state.seq}")
        elif op == "rewind":
            to_seq = max(1, session.state.seq - arg)
            item = {"type": "rewind_boundary", "id": str(uuid.uuid4()), "toSeq": to_seq,
                    "toTurnId": "t"}  # fmt: skip
            service.append(session, [item])
        elif op == "snapshot":  # close (which writes the snapshot), resume from it
            service.close(tid, self.session_id)
            self.session_id = self.resume(200)["session"]["sessionId"]

    def resume(self, limit: int, max_bytes: int = 8 << 20) -> dict[str, Any]:
        return self.service.resume(
            self.thread_id, cwd=None, accept_drift=True, message_limit=limit, max_bytes=max_bytes
        )

    def close(self) -> None:
        self.service.close_all()


def recorded(home: Path, steps: list[tuple[str, int]]) -> Recorder:
    """A thread of these steps, its session closed (so its snapshot is written)."""
    recorder = Recorder(home)
    for op, arg in steps:
        recorder.apply(op, arg)
    recorder.close()
    return recorder


def damage(path: Path, seed: int, torn: bool) -> None:
    """Garbage lines between records, a BOM or not, and maybe a torn last line."""
    rng = random.Random(seed)
    lines = path.read_bytes().split(b"\n")[:-1]
    for _ in range(rng.randint(0, 4)):
        lines.insert(rng.randint(0, len(lines)), rng.choice([b"{oops", b"[1,2]", b"{}", b"\xff"]))
    if rng.random() < 0.3:
        lines.insert(rng.randint(0, len(lines)), b"")  # a blank line: ignored, not reported
    data = b"\n".join(lines) + b"\n"
    path.write_bytes(data + (b'{"v":1,"seq":' if torn else b""))


def forward(pages: ThreadPages, thread_id: str, limit: int, budget: int) -> tuple[list, list]:
    items: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    after: int | None = None
    while True:
        page = pages.read(thread_id, after=after, limit=limit, max_bytes=budget)
        assert page.items or page.next_seq is None, "an empty page must be the last"
        items += page.items
        skipped += page.skipped
        if page.next_seq is None:
            return items, skipped
        after = page.next_seq


def backward(
    pages: ThreadPages, thread_id: str, limit: int, budget: int, before: int = 2**53
) -> tuple[list, list]:
    items: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    while True:
        page = pages.read(thread_id, before=before, limit=limit, max_bytes=budget)
        assert page.items or page.next_seq is None, "an empty page must be the last"
        assert [i["seq"] for i in page.items] == sorted(i["seq"] for i in page.items)
        items[:0] = page.items
        skipped[:0] = page.skipped
        if page.next_seq is None:
            return items, skipped
        before = page.next_seq


def biggest_line(path: Path) -> int:
    return max(len(orjson.dumps(item)) for item in parse_bytes(path.read_bytes()).items)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=ops,
    seed=st.integers(0, 2**32),
    torn=st.booleans(),
    limit=st.integers(1, 40),
    slack=st.integers(0, 5000),
)
def test_pages_both_ways_tile_the_thread_exactly(
    steps: list[tuple[str, int]], seed: int, torn: bool, limit: int, slack: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        recorder = recorded(Path(tmp), steps)
        damage(recorder.path, seed, torn)
        whole = parse_bytes(recorder.path.read_bytes())
        truth_items, truth_skipped = whole.items, [line.to_wire() for line in whole.skipped]
        # A budget from "the biggest item just fits" up: pages are cut by bytes as well.
        budget = ANSWER_OVERHEAD + biggest_line(recorder.path) + 200 * 5 + slack
        pages = ThreadPages(recorder.service.layout, anchor_bytes=SMALL_ANCHORS)
        assert forward(pages, recorder.thread_id, limit, budget) == (truth_items, truth_skipped)
        assert backward(pages, recorder.thread_id, limit, budget) == (truth_items, truth_skipped)
        # A page starting anywhere has exactly the items a filter of the whole thread gives.
        seqs = [item["seq"] for item in truth_items]
        for cut in {0, *random.Random(seed).choices(range(max(seqs) + 2), k=5)}:
            page = pages.read(recorder.thread_id, after=cut, limit=limit, max_bytes=8 << 20)
            assert page.items == [i for i in truth_items if i["seq"] > cut][:limit]
            page = pages.read(recorder.thread_id, before=cut + 1, limit=limit, max_bytes=8 << 20)
            assert page.items == [i for i in truth_items if i["seq"] < cut + 1][-limit:]


def live_messages(items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """What the next model call sees, computed without the reducers: messages since the last
    clear or compact (the compact's summary first), less what a rewind dropped."""
    live: list[dict[str, Any]] = []
    boundary = 0
    for item in items:
        kind = item["type"]
        if kind == "message":
            live.append(item)
        elif kind == "clear_boundary":
            live, boundary = [], item["seq"]
        elif kind == "compact_boundary":
            live, boundary = [item], item["seq"]
        elif kind == "rewind_boundary":
            live = [m for m in live if m["seq"] <= item["toSeq"]]
    return live, boundary


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=ops, limit=st.integers(1, 30))
def test_the_newest_messages_of_a_resume_are_the_last_ones_a_full_replay_keeps(
    steps: list[tuple[str, int]], limit: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        recorder = recorded(Path(tmp), steps)
        from_snapshot = recorder.resume(limit)
        recorder.close()
        snapshots.discard(recorder.service.layout, recorder.thread_id)
        replayed = recorder.resume(limit)
        recorder.close()
        assert from_snapshot["recovery"]["snapshotUsed"] is True
        assert replayed["recovery"]["snapshotUsed"] is False
        items = parse_bytes(recorder.path.read_bytes()).items
        live, boundary = live_messages(items)
        for report in (from_snapshot, replayed):
            messages = report["messages"]
            assert messages["items"] == live[-limit:]
            assert messages["total"] == len(live)
            assert messages["boundarySeq"] == boundary
            # Paging back from the cursor down to the boundary gives every earlier message.
            earlier: list[dict[str, Any]] = []
            if messages["nextBeforeSeq"] is not None:
                pages = ThreadPages(recorder.service.layout, anchor_bytes=SMALL_ANCHORS)
                earlier, _ = backward(pages, recorder.thread_id, 7, 8 << 20,
                                      messages["nextBeforeSeq"])  # fmt: skip
            wanted = {m["seq"] for m in live}
            assert [i for i in earlier if i["seq"] in wanted] + messages["items"] == live


def read_all(pages: ThreadPages, thread_id: str) -> Page:
    return pages.read(thread_id, before=2**53, limit=10_000, max_bytes=64 << 20)


@pytest.fixture
def big_thread(tmp_path: Path) -> Recorder:
    return recorded(tmp_path, [("message", 50 + n % 300) for n in range(400)])


def test_the_offset_map_is_kept_beside_the_snapshot_and_survives_deletion(
    big_thread: Recorder,
) -> None:
    layout, tid = big_thread.service.layout, big_thread.thread_id
    first = ThreadPages(layout, anchor_bytes=SMALL_ANCHORS)
    deep = first.read(tid, before=50, limit=20, max_bytes=1 << 20)
    assert layout.offsets_path(tid).exists()
    layout.offsets_path(tid).unlink()
    again = ThreadPages(layout, anchor_bytes=SMALL_ANCHORS)
    assert again.read(tid, before=50, limit=20, max_bytes=1 << 20) == deep
    assert read_all(again, tid).items == parse_bytes(big_thread.path.read_bytes()).items


@pytest.mark.parametrize(
    "spoil",
    [
        lambda data: b"not json" + data,
        lambda data: data[: len(data) // 2],
        lambda data: data.replace(b'"offsets":[', b'"offsets":[1,'),
        lambda data: data.replace(b'"v":1', b'"v":99'),
        lambda data: orjson.dumps(
            {**orjson.loads(data), "offsets": [o + 1 for o in orjson.loads(data)["offsets"]]}
        ),
    ],
    ids=["garbage", "truncated", "inconsistent", "other-version", "anchors-off-by-one"],
)
def test_a_corrupt_offset_map_is_rebuilt_with_the_same_answers(
    big_thread: Recorder, spoil: Any
) -> None:
    layout, tid = big_thread.service.layout, big_thread.thread_id
    pages = ThreadPages(layout, anchor_bytes=SMALL_ANCHORS)
    truth = [pages.read(tid, after=after, limit=30, max_bytes=1 << 20) for after in (0, 77, 333)]
    path = layout.offsets_path(tid)
    path.write_bytes(spoil(path.read_bytes()))
    fresh = ThreadPages(layout, anchor_bytes=SMALL_ANCHORS)
    assert [fresh.read(tid, after=a, limit=30, max_bytes=1 << 20) for a in (0, 77, 333)] == truth


def test_a_stale_offset_map_is_rebuilt_when_the_file_was_rewritten(big_thread: Recorder) -> None:
    layout, tid, path = big_thread.service.layout, big_thread.thread_id, big_thread.path
    ThreadPages(layout, anchor_bytes=SMALL_ANCHORS).read(tid, after=0, limit=5, max_bytes=1 << 20)
    # Someone rewrote the file (here: every line shorter), keeping its seqs: the map's
    # offsets now point into the middle of lines.
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    path.write_bytes(b"".join(orjson.dumps({**i, "content": "x"}) + b"\n" for i in lines))
    pages = ThreadPages(layout, anchor_bytes=SMALL_ANCHORS)
    assert read_all(pages, tid).items == parse_bytes(path.read_bytes()).items
    assert (
        pages.read(tid, before=200, limit=3, max_bytes=1 << 20).items
        == [i for i in parse_bytes(path.read_bytes()).items if i["seq"] < 200][-3:]
    )


def test_a_page_follows_appends_made_after_its_map(big_thread: Recorder) -> None:
    layout, tid = big_thread.service.layout, big_thread.thread_id
    pages = ThreadPages(layout, anchor_bytes=SMALL_ANCHORS)
    pages.read(tid, after=0, limit=5, max_bytes=1 << 20)
    report = big_thread.resume(5)
    session = report["session"]["sessionId"]
    for n in range(50):
        big_thread.service.record(
            tid, session, [{"type": "message", "id": f"late-{n}", "role": "user", "content": "z"}]
        )
    newest = pages.read(tid, before=2**53, limit=50, max_bytes=1 << 20)
    assert [i["id"] for i in newest.items] == [f"late-{n}" for n in range(50)]
    big_thread.close()


def test_an_item_too_large_for_any_answer_is_named_and_can_be_paged_past(tmp_path: Path) -> None:
    recorder = recorded(tmp_path, [("message", size) for size in (10, 10, 5000, 10, 10)])
    items = parse_bytes(recorder.path.read_bytes()).items
    big = next(i for i in items if len(i.get("content", "")) == 5000)
    pages, budget = ThreadPages(recorder.service.layout), ANSWER_OVERHEAD + 1000
    # Pages stop short of it, with a cursor...
    page = pages.read(recorder.thread_id, after=0, limit=100, max_bytes=budget)
    assert page.items == [i for i in items if i["seq"] < big["seq"]]
    assert page.next_seq == big["seq"] - 1
    # ... the page that would start with it names it ...
    with pytest.raises(ProtocolError) as raised:
        pages.read(recorder.thread_id, after=page.next_seq, limit=100, max_bytes=budget)
    assert raised.value.kind == ErrorKind.PAYLOAD_TOO_LARGE
    assert raised.value.details["seq"] == big["seq"]
    # ... and the next cursor goes on past it, either way.
    after = pages.read(recorder.thread_id, after=big["seq"], limit=100, max_bytes=budget)
    assert after.items == [i for i in items if i["seq"] > big["seq"]]
    with pytest.raises(ProtocolError):
        pages.read(recorder.thread_id, before=big["seq"] + 1, limit=100, max_bytes=budget)
    before = pages.read(recorder.thread_id, before=big["seq"], limit=100, max_bytes=budget)
    assert before.items == [i for i in items if i["seq"] < big["seq"]]
