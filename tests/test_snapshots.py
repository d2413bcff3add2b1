"""Snapshot + tail must restore exactly what a full replay restores."""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from restore.engine.subsystems import ThreadState
from restore.service import Settings, ThreadService, open_service
from restore.stores.api import Durability
from restore.stores.embedded import snapshots
from restore.stores.snapshots import EVERY_ITEMS

op_ids = st.sampled_from(["a", "b", "c"])
item_strategy = st.one_of(
    st.builds(lambda c, r: {"type": "message", "role": r, "content": c},
              st.text(max_size=8), st.sampled_from(["user", "assistant"])),
    st.just({"type": "clear_boundary", "endedSessionId": "s"}),
    st.builds(lambda s: {"type": "compact_boundary", "summary": s}, st.text(max_size=8)),
    st.builds(lambda n: {"type": "rewind_boundary", "toSeq": n, "toTurnId": "t"},
              st.integers(0, 40)),
    st.builds(lambda n: {"type": "todos", "items": [
        {"id": str(i), "content": "x", "status": "pending"} for i in range(n)]},
        st.integers(0, 3)),
    st.builds(lambda i, o, u, m: {"type": "cost", "model": m, "inputTokens": i,
                                  "outputTokens": o, "usd": u},
              st.integers(0, 1000), st.integers(0, 1000),
              st.floats(0, 5, allow_nan=False).map(lambda f: round(f, 3)),
              st.sampled_from(["m1", "m2"])),
    st.builds(lambda op, state, effect, persisted: {
        "type": "operation", "operationId": op, "tool": "t", "effect": effect, "state": state,
        "resultPersisted": persisted},
        op_ids, st.sampled_from(["planned", "started", "committed", "failed"]),
        st.sampled_from(["read", "idempotent", "side_effect"]), st.booleans()),
    st.builds(lambda p, a, who: {"type": "file_edit", "path": p, "beforeSha": None,
                                 "afterSha": a, "author": who},
              st.sampled_from(["a.py", "b.py"]), st.sampled_from(["1" * 64, "2" * 64]),
              st.sampled_from(["agent", "user"])),
    st.builds(lambda n, p: {"type": "verifier", "name": n, "passed": p, "total": 9,
                            "headSha": "h"}, st.sampled_from(["tests", "lint"]),
              st.integers(0, 9)),
    st.builds(lambda m: {"type": "permissions", "approvalMode": m},
              st.sampled_from(["on-request", "bypassPermissions"])),
    st.builds(lambda m: {"type": "model_override", "model": m}, st.sampled_from(["x", "y"])),
    st.builds(lambda n, c: {"type": "prompt_section", "name": n, "content": c},
              st.sampled_from(["a", "b"]), st.text(max_size=5)),
    st.just({"type": "session_meta", "cwd": "/w", "branch": "main", "source": "resume"}),
)  # fmt: skip


def _numbered(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**item, "seq": n, "id": f"i{n}", "turnId": "t"} for n, item in
            enumerate(items, start=1)]  # fmt: skip


def _json(state: ThreadState) -> Any:
    return orjson.loads(orjson.dumps(state.to_json()))


@given(st.lists(item_strategy, max_size=60), st.data())
def test_snapshot_plus_tail_equals_full_replay(raw: list[dict[str, Any]], data: Any) -> None:
    items = _numbered(raw)
    point = data.draw(st.integers(0, len(items)))
    full = ThreadState().apply_all([dict(i) for i in items])
    at_point = ThreadState().apply_all([dict(i) for i in items[:point]])
    restored = ThreadState.from_json(_json(at_point)).apply_all([dict(i) for i in items[point:]])
    assert _json(restored) == _json(full)


def _service(home: Path) -> ThreadService:
    return open_service(Settings(home, durability=Durability.NONE))


def _resume(service: ThreadService, thread_id: str) -> dict[str, Any]:
    report = service.resume(thread_id, cwd=None, accept_drift=False, message_limit=200)
    service.close(thread_id, report["session"]["sessionId"])
    return report


def _comparable(report: dict[str, Any]) -> Any:
    return [s for s in report["subsystems"]], report["pendingOperations"], report["messages"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(item_strategy, max_size=40), st.lists(item_strategy, max_size=40))
def test_resume_from_snapshot_matches_resume_from_full_replay(
    before: list[dict[str, Any]], after: list[dict[str, Any]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home, work = Path(tmp) / "home", Path(tmp) / "work"
        work.mkdir()
        service = _service(home)
        started = service.start(cwd=str(work), workspace_folder=None)
        tid, sid = started.summary.threadId, started.session_id
        client_types = {"message", "todos", "cost", "file_edit", "verifier", "permissions",
                        "model_override", "prompt_section"}  # fmt: skip
        session = service.session_for(tid, sid, "local")
        service.append(session, [{**i, "id": str(uuid.uuid4())} for i in before
                                 if i["type"] in client_types])  # fmt: skip
        service.close(tid, sid)  # writes the snapshot
        report = service.resume(tid, cwd=None, accept_drift=False, message_limit=200)
        session = service.session_for(tid, report["session"]["sessionId"], "local")
        service.append(session, [{**i, "id": str(uuid.uuid4())} for i in after
                                 if i["type"] in client_types])  # fmt: skip
        service.close_all()

        fresh = _service(home)
        with_snapshot = _resume(fresh, tid)
        assert with_snapshot["recovery"]["snapshotUsed"] is True
        snapshots.discard(fresh.layout, tid)
        replayed = _resume(fresh, tid)
        assert replayed["recovery"]["snapshotUsed"] is False
        assert replayed["recovery"]["snapshotProblem"] == "missing"
        # The two resumes appended one session_meta each; compare everything but that.
        with_snapshot["messages"].pop("total", None)
        replayed["messages"].pop("total", None)
        assert _comparable(with_snapshot)[:2] == _comparable(replayed)[:2]
        fresh.close_all()


def _thread_with_snapshot(home: Path, work: Path) -> tuple[ThreadService, str]:
    service = _service(home)
    started = service.start(cwd=str(work), workspace_folder=None)
    tid, sid = started.summary.threadId, started.session_id
    session = service.session_for(tid, sid, "local")
    service.append(session, [{"type": "todos", "id": "t", "items": [
        {"id": "1", "content": "keep me", "status": "pending"}]}])  # fmt: skip
    service.close(tid, sid)
    return service, tid


def test_corrupt_snapshot_falls_back_to_full_replay(tmp_path: Path) -> None:
    service, tid = _thread_with_snapshot(tmp_path / "home", tmp_path)
    service.layout.snapshot_path(tid).write_bytes(b"\x00garbage{")
    report = _resume(service, tid)
    assert report["recovery"]["snapshotUsed"] is False
    assert report["recovery"]["snapshotProblem"].startswith("corrupt")
    todos = next(s for s in report["subsystems"] if s["name"] == "todos")
    assert todos["state"]["items"][0]["content"] == "keep me"


def test_stale_snapshot_falls_back_to_full_replay(tmp_path: Path) -> None:
    service, tid = _thread_with_snapshot(tmp_path / "home", tmp_path)
    path = service.layout.thread_path(tid)
    lines = path.read_bytes().splitlines(keepends=True)
    # The file was rewritten (e.g. restored from a backup): the todos and the last line
    # (the close's lifecycle record) differ now.
    lines = [line.replace(b"keep me", b"KEEP ME") for line in lines]
    lines[-1] = lines[-1].replace(b'{"v":1,', b'{"v": 1,', 1)
    path.write_bytes(b"".join(lines))
    report = _resume(service, tid)
    assert report["recovery"]["snapshotUsed"] is False
    assert report["recovery"]["snapshotProblem"].startswith("stale")
    todos = next(s for s in report["subsystems"] if s["name"] == "todos")
    assert todos["state"]["items"][0]["content"] == "KEEP ME"


def test_snapshot_is_written_every_k_items_and_resume_replays_only_the_tail(
    tmp_path: Path,
) -> None:
    service = _service(tmp_path / "home")
    started = service.start(cwd=str(tmp_path), workspace_folder=None)
    tid, sid = started.summary.threadId, started.session_id
    session = service.session_for(tid, sid, "local")
    for n in range(EVERY_ITEMS + 50):
        service.append(session, [{"type": "message", "id": f"m{n}", "role": "user",
                                  "content": str(n)}])  # fmt: skip
    # Simulate a crash: drop the session without a clean close (no final snapshot).
    session.writer.close()
    fresh = _service(tmp_path / "home")
    report = _resume(fresh, tid)
    assert report["recovery"]["snapshotUsed"] is True
    assert report["recovery"]["replayedItems"] < EVERY_ITEMS
    assert report["continueReason"] == "process_recovery"
    assert report["messages"]["total"] == EVERY_ITEMS + 50
