"""The walking skeleton end to end: a real server process over a real pipe."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.items import message
from tests.support.rpc_client import RpcError, ServerProcess
from tests.support.wait import eventually

Spawn = Callable[..., ServerProcess]


def thread_file(home: Path, thread_id: str) -> Path:
    return home / "threads" / thread_id[:2] / f"{thread_id}.jsonl"


def start(server: ServerProcess, cwd: Path | str, **extra: object) -> tuple[str, str]:
    Path(cwd).mkdir(parents=True, exist_ok=True)  # thread/start needs an existing directory
    result = server.request("thread/start", {"cwd": str(cwd), **extra})
    return result["thread"]["threadId"], result["sessionId"]


def list_all(server: ServerProcess, **filters: object) -> list[dict]:
    return server.request("thread/list", {"limit": 200, **filters})["threads"]


def test_round_trip_survives_kill_9(spawn: Spawn, tmp_path: Path, home: Path) -> None:
    folder_a, folder_b = tmp_path / "ws-a", tmp_path / "ws-b"
    folder_a.mkdir()
    folder_b.mkdir()
    (folder_a / "sub").mkdir()
    server = spawn()
    server.initialize([str(folder_a), str(folder_b)])
    threads = [
        start(server, folder_a, title="first"),
        start(server, folder_b),
        start(server, folder_a / "sub"),
    ]
    recorded: dict[str, list[str]] = {tid: [] for tid, _ in threads}
    for n in range(100):
        tid, sid = threads[n % 3]
        item = message(f"message {n} " + "x" * 20, role="user" if n < 3 else "assistant")
        server.request("thread/record", {"threadId": tid, "sessionId": sid, "items": [item]})
        recorded[tid].append(item["id"])
    server.kill9()

    again = spawn()
    again.initialize([str(folder_a), str(folder_b)])
    in_a = list_all(again, workspaceFolder=str(folder_a))
    in_b = list_all(again, workspaceFolder=str(folder_b))
    # Most recently updated first: message 99 went to thread 0, message 98 to thread 2.
    assert [t["threadId"] for t in in_a] == [threads[0][0], threads[2][0]]
    assert [t["threadId"] for t in in_b] == [threads[1][0]]
    first = in_a[0]
    assert first["title"] == "first"
    assert first["preview"].startswith("message 0 ")
    assert first["cwd"] == str(folder_a)
    assert first["workspaceFolder"] == str(folder_a)
    assert first["itemCount"] == len(recorded[threads[0][0]])
    assert first["updatedAt"] >= first["createdAt"]
    for tid, ids in recorded.items():
        items = again.request("thread/read", {"threadId": tid})["items"]
        got = [i["id"] for i in items if i["type"] == "message"]
        assert got == ids
        seqs = [i["seq"] for i in items]
        assert seqs == sorted(set(seqs))


def test_the_index_never_rereads_what_this_process_appended(
    spawn: Spawn, tmp_path: Path, home: Path
) -> None:
    first = spawn()
    first.initialize()
    tid, sid = start(first, tmp_path, title="long")
    items = [message(f"m{n}") for n in range(300)]
    first.request("thread/record", {"threadId": tid, "sessionId": sid, "items": items})
    other, _ = start(first, tmp_path, title="other")
    assert first.shutdown() == 0
    # Another program appends to a thread behind the index's back.
    with thread_file(home, other).open("ab") as out:
        out.write(json.dumps({"v": 1, "seq": 2, "ts": "2099-01-01T00:00:00.000000Z",
                              "type": "message", "sessionId": "x", "id": "foreign",
                              "role": "user", "content": "hi"}).encode() + b"\n")  # fmt: skip
    again = spawn(env={"SESSIOND_DEBUG": "1"})
    again.initialize()
    resumed = again.request("thread/resume", {"threadId": tid})
    again.request(
        "thread/record",
        {"threadId": tid, "sessionId": resumed["session"]["sessionId"], "items": [message("x")]},
    )
    rows = {t["threadId"]: t for t in list_all(again)}
    assert rows[tid]["itemCount"] == 301 and rows[other]["itemCount"] == 1
    # The resumed thread's row came from its writer; only the foreign append was read.
    assert again.request("sessiond/debug")["indexFilesRead"] == 1


def test_thread_is_listed_and_readable_before_its_first_message(
    server: ServerProcess, tmp_path: Path
) -> None:
    tid, _ = start(server, tmp_path)
    listed = list_all(server, cwd=str(tmp_path))
    assert [t["threadId"] for t in listed] == [tid]
    items = server.request("thread/read", {"threadId": tid})["items"]
    assert [i["type"] for i in items] == ["session_meta"]
    assert items[0]["source"] == "startup"


def test_branch_is_recorded_from_the_git_repo(
    server: ServerProcess, make_repo: Callable[..., Path]
) -> None:
    repo = make_repo("repo", "fix/payment")
    result = server.request("thread/start", {"cwd": str(repo)})
    assert result["thread"]["branch"] == "fix/payment"
    assert len(result["thread"]["headSha"]) == 40


@pytest.mark.parametrize(
    "content",
    [
        "Please refactor this module. " + "A" * 200_000,
        [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image", "data": base64.b64encode(os.urandom(150_000)).decode()},
        ],
        "look: data:image/png;base64," + base64.b64encode(os.urandom(100_000)).decode(),
    ],
    ids=["200kb-text", "image-part", "data-url"],
)
def test_huge_first_message_gets_a_short_preview(
    server: ServerProcess, tmp_path: Path, content: object
) -> None:
    tid, sid = start(server, tmp_path)
    item = {"type": "message", "id": "m1", "role": "user", "content": content}
    server.request("thread/record", {"threadId": tid, "sessionId": sid, "items": [item]})
    [listed] = list_all(server, cwd=str(tmp_path))
    assert listed["threadId"] == tid
    assert 0 < len(listed["preview"]) <= 160
    assert "base64" not in listed["preview"]
    assert listed["preview"].split()[0] in ("Please", "What", "look:")


def test_filtered_list_pages_never_come_back_empty(spawn: Spawn, tmp_path: Path) -> None:
    server = spawn(env={"SESSIOND_DURABILITY": "none"})
    server.initialize()
    target = tmp_path / "target"
    wanted = []
    for n in range(505):
        if n % 101 == 50:
            wanted.append(start(server, target)[0])
        else:
            start(server, tmp_path / "other")
    pages, cursor = [], None
    while True:
        page = server.request(
            "thread/list",
            {"cwd": str(target), "limit": 2, **({"cursor": cursor} if cursor else {})},
        )
        pages.append([t["threadId"] for t in page["threads"]])
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert [len(p) for p in pages] == [2, 2, 1]
    assert [tid for page in pages for tid in page] == list(reversed(wanted))


def test_fork_at_turn_copies_exactly_that_prefix(server: ServerProcess, tmp_path: Path) -> None:
    tid, sid = start(server, tmp_path, title="original")
    turns = []
    for n in range(3):
        turn = f"turn-{n}"
        turns.append(
            [
                {"type": "turn", "id": f"t{n}s", "turnId": turn, "phase": "started"},
                message(f"ask {n}", turn=turn),
                message(f"answer {n}", role="assistant", turn=turn),
                {"type": "turn", "id": f"t{n}c", "turnId": turn, "phase": "completed"},
            ]
        )
        server.request("thread/record", {"threadId": tid, "sessionId": sid, "items": turns[-1]})
    source = server.request("thread/read", {"threadId": tid})["items"]
    cut = max(i["seq"] for i in source if i.get("turnId") == "turn-1")
    fork = server.request("thread/fork", {"threadId": tid, "atTurnId": "turn-1"})
    new_id = fork["thread"]["threadId"]
    assert new_id != tid
    assert fork["thread"]["forkedFrom"] == {"threadId": tid, "seq": cut}
    copied = server.request("thread/read", {"threadId": new_id})["items"]
    assert copied[0]["type"] == "session_meta" and copied[0]["forkedFrom"]["threadId"] == tid
    assert [i["id"] for i in copied[1:]] == [i["id"] for i in turns[0] + turns[1]]
    # The fork is writable under its own session; the source is untouched.
    server.request(
        "thread/record",
        {
            "threadId": new_id,
            "sessionId": fork["sessionId"],
            "items": [message("only in the fork")],
        },
    )
    assert len(server.request("thread/read", {"threadId": tid})["items"]) == len(source)
    with pytest.raises(RpcError) as missing:
        server.request("thread/fork", {"threadId": tid, "atTurnId": "no-such-turn"})
    assert missing.value.kind == "InvalidParams"


def test_resume_starts_a_new_session_linked_to_the_last(
    spawn: Spawn, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    repo = make_repo("repo", "main")
    server = spawn()
    server.initialize([str(repo)])
    tid, sid = start(server, repo)
    server.request(
        "thread/record",
        {"threadId": tid, "sessionId": sid, "items": [message(f"m{n}") for n in range(5)]},
    )
    server.kill9()
    again = spawn()
    again.initialize([str(repo)])
    report = again.request("thread/resume", {"threadId": tid, "messageLimit": 2})
    assert report["status"] == "ready"
    assert report["session"]["resumedFrom"] == sid
    assert report["session"]["sessionId"] not in (None, sid)
    assert report["environment"]["recorded"]["branch"] == "main"
    assert report["environment"]["drift"] == []
    # The newest messages come with the resume; the older ones are a page back from them.
    assert [m["content"] for m in report["messages"]["items"]] == ["m3", "m4"]
    assert report["messages"]["total"] == 5
    older = again.request(
        "thread/read", {"threadId": tid, "beforeSeq": report["messages"]["nextBeforeSeq"]}
    )
    assert [i["content"] for i in older["items"] if i["type"] == "message"] == ["m0", "m1", "m2"]
    assert older["nextBeforeSeq"] is None and "nextAfterSeq" not in older
    rest = again.request(
        "thread/read", {"threadId": tid, "afterSeq": report["messages"]["items"][-1]["seq"]}
    )
    metas = [i for i in rest["items"] if i["type"] == "session_meta"]
    assert metas[-1]["source"] == "resume" and metas[-1]["resumedFrom"] == sid
    with pytest.raises(RpcError) as stale:
        again.request(
            "thread/record", {"threadId": tid, "sessionId": sid, "items": [message("old session")]}
        )
    assert stale.value.kind == "StaleSession"


def test_resume_in_another_directory_needs_review(
    server: ServerProcess, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    repo_a, repo_b = make_repo("a"), make_repo("b")
    tid, _ = start(server, repo_a)
    server.request("thread/close", {"threadId": tid, "sessionId": _})
    report = server.request("thread/resume", {"threadId": tid, "cwd": str(repo_b)})
    assert report["status"] == "needs_review"
    assert report["session"]["sessionId"] is None
    assert {d["field"] for d in report["environment"]["drift"]} >= {"cwd", "repo"}


def test_archive_unarchive_rename_delete(server: ServerProcess, tmp_path: Path, home: Path) -> None:
    tid, sid = start(server, tmp_path)
    renamed = server.request("thread/setTitle", {"threadId": tid, "title": "Payment bug"})
    assert renamed["thread"]["title"] == "Payment bug"
    server.request("thread/archive", {"threadId": tid})
    assert list_all(server) == []
    assert [t["title"] for t in list_all(server, archived=True)] == ["Payment bug"]
    assert (home / "archived" / tid[:2] / f"{tid}.jsonl").exists()
    with pytest.raises(RpcError) as archived:
        server.request("thread/resume", {"threadId": tid})
    assert archived.value.kind == "ThreadArchived"
    with pytest.raises(RpcError) as stale:
        server.request(
            "thread/record", {"threadId": tid, "sessionId": sid, "items": [message("x")]}
        )
    assert stale.value.kind == "StaleSession"
    server.request("thread/unarchive", {"threadId": tid})
    assert [t["threadId"] for t in list_all(server)] == [tid]
    server.request("thread/delete", {"threadId": tid})
    assert list_all(server) == [] and list_all(server, archived=True) == []
    with pytest.raises(RpcError) as gone:
        server.request("thread/read", {"threadId": tid})
    assert gone.value.kind == "ThreadNotFound"
    updates = server.wait_notification("thread/updated", 4)
    assert updates[-1]["params"]["deleted"] is True


def test_notifications_announce_new_and_changed_threads(
    server: ServerProcess, tmp_path: Path
) -> None:
    tid, sid = start(server, tmp_path)
    [started] = server.wait_notification("thread/started")
    assert started["params"]["thread"]["threadId"] == tid
    server.request("thread/record", {"threadId": tid, "sessionId": sid, "items": [message("hi")]})
    [updated] = server.wait_notification("thread/updated")
    assert updated["params"]["thread"]["itemCount"] == 1


def test_group_commit_acknowledges_every_pipelined_record(
    spawn: Spawn, tmp_path: Path, home: Path
) -> None:
    server = spawn(env={"SESSIOND_DURABILITY": "group"})
    assert server.initialize()["capabilities"]["durability"] == "group"
    threads = [start(server, tmp_path) for _ in range(3)]
    pending = {}
    for n in range(60):  # below the 64-requests-in-flight bound of a connection
        tid, sid = threads[n % 3]
        item = message(f"m{n}")
        pending[server.request_async("thread/record", {
            "threadId": tid, "sessionId": sid, "items": [item]})] = (tid, item["id"])  # fmt: skip
    acknowledged: dict[str, list[str]] = {tid: [] for tid, _ in threads}
    for msg_id, (tid, item_id) in pending.items():
        assert "result" in server.response(msg_id)
        acknowledged[tid].append(item_id)
    server.kill9()
    for tid, ids in acknowledged.items():
        lines = [json.loads(line) for line in thread_file(home, tid).read_bytes().splitlines()]
        assert [line["id"] for line in lines if line["type"] == "message"] == ids


@pytest.mark.parametrize("durability", ["fsync", "group", "none"])
def test_pipelined_requests_take_effect_in_the_order_sent(
    spawn: Spawn, tmp_path: Path, home: Path, durability: str
) -> None:
    """Records are batched on their way to the store; a close sent after them still comes
    after them, and a record sent after the close finds the session closed."""
    server = spawn(env={"SESSIOND_DURABILITY": durability})
    server.initialize()
    tid, sid = start(server, tmp_path)
    session = {"threadId": tid, "sessionId": sid}
    before = [message(f"before {n}") for n in range(20)]
    after = message("after close")
    sent = [server.request_async("thread/record", {**session, "items": [item]}) for item in before]
    closing = server.request_async("thread/close", session)
    late = server.request_async("thread/record", {**session, "items": [after]})
    assert [server.response(msg_id)["result"]["lastSeq"] for msg_id in sent] == list(range(2, 22))
    assert "result" in server.response(closing)
    assert server.response(late)["error"]["data"]["kind"] == "StaleSession"
    lines = [json.loads(line) for line in thread_file(home, tid).read_bytes().splitlines()]
    recorded = [line["content"] for line in lines if line["type"] == "message"]
    assert recorded == [item["content"] for item in before]


def test_another_process_lists_what_a_writer_recorded(spawn: Spawn, tmp_path: Path) -> None:
    writer = spawn()
    writer.initialize()
    tid, sid = start(writer, tmp_path)
    reader = spawn()
    reader.initialize()
    assert [t["itemCount"] for t in list_all(reader)] == [0]
    writer.request(
        "thread/record",
        {"threadId": tid, "sessionId": sid, "items": [message(f"m{n}") for n in range(3)]},
    )
    # Index rows are batched; the writer flushes them when its stream pauses.
    eventually(lambda: [t["itemCount"] for t in list_all(reader)] == [3],
               "the other process saw the new items", every=0.1)  # fmt: skip


def test_a_thread_mirroring_another_agent_lists_with_its_origin(
    spawn: Spawn, tmp_path: Path, home: Path
) -> None:
    """Threads made by the ACP front door or an import say where they came from; threads
    recorded over this protocol say null. The origin survives a lost index."""
    from restore.service import Settings, open_service

    first = spawn()
    first.initialize()
    own, _ = start(first, tmp_path)
    first.close()
    origin = {"agent": "codex", "sessionId": "rollout-1", "path": "/x/rollout-1.jsonl"}
    service = open_service(Settings(home))
    try:
        mirrored = service.start(cwd=str(tmp_path), workspace_folder=None, origin=origin)
    finally:
        service.close_all()
    (home / "index.sqlite3").unlink()
    server = spawn()
    server.initialize()
    listed = {t["threadId"]: t["origin"] for t in list_all(server)}
    assert listed == {own: None, mirrored.summary.threadId: origin}


def test_listing_reports_progress_only_when_there_is_indexing_to_do(
    spawn: Spawn, tmp_path: Path, home: Path
) -> None:
    """A current index has nothing to index: no "Indexing threads 0/0" while five threads
    exist. A lost one is rebuilt with begin … end, ending at the number of threads."""
    first = spawn()
    first.initialize()
    for _ in range(5):
        start(first, tmp_path)
    assert len(list_all(first)) == 5
    first.shutdown()

    current = spawn()
    current.initialize()
    assert len(list_all(current)) == 5
    current.request("thread/list", {"limit": 1})  # a later request: all answered before it
    assert [n for n in current.notifications if n["method"] == "$/progress"] == []
    current.shutdown()

    (home / "index.sqlite3").unlink()
    rebuilt = spawn()
    rebuilt.initialize()
    assert len(list_all(rebuilt)) == 5
    values = [n["params"]["value"] for n in rebuilt.wait_notification("$/progress", 2)]
    assert values[0]["kind"] == "begin" and values[0]["title"] == "Indexing threads"
    assert values[-1] == {"kind": "end", "message": "5 threads indexed"}


def test_imported_threads_are_filed_under_the_listing_client_s_innermost_folder(
    spawn: Spawn, home: Path, tmp_path: Path
) -> None:
    """An imported thread has no folder of its own: each client sees it under its own
    innermost folder holding its cwd, judged on resolved paths (a page resolves each folder
    and each cwd once: server/handlers/threads.py `_filer`)."""
    import subprocess
    import sys
    import uuid
    from datetime import UTC, datetime, timedelta

    from bench import codex_peer
    from tests.support.rpc_client import REPO

    outer, inner, other = tmp_path / "work", tmp_path / "work" / "app", tmp_path / "other"
    inner.mkdir(parents=True)
    other.mkdir()
    (tmp_path / "link").symlink_to(inner)
    cwds = {"in-inner": f"{inner}/src", "in-outer": str(outer), "nowhere": "/nowhere/at/all",
            "dotdot": f"{inner}/../../other", "via-link": str(tmp_path / "link"),
            "also-in-inner": f"{inner}/src"}  # fmt: skip
    rollouts = tmp_path / "codex"
    for n, (title, cwd) in enumerate(cwds.items()):
        created = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=n)
        path = codex_peer.rollout_path(rollouts, created, str(uuid.uuid4()))
        path.parent.mkdir(parents=True, exist_ok=True)
        said = codex_peer.message_lines(codex_peer.iso(created), "user", title)
        path.write_bytes(codex_peer.session_meta(path.stem[-36:], created, cwd) + said)
    done = subprocess.run(
        [sys.executable, "-m", "server.cli", "--home", str(home), "import", "codex", "--from",
         str(rollouts / "sessions")], cwd=REPO, capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr

    server = spawn()
    server.initialize([str(outer), str(inner), str(other)])
    listed = server.request("thread/list", {})["threads"]
    assert {t["title"]: t["workspaceFolder"] for t in listed} == {
        "in-inner": str(inner), "also-in-inner": str(inner), "in-outer": str(outer),
        "nowhere": None, "dotdot": str(other), "via-link": str(inner),
    }  # fmt: skip
    found = server.request("thread/search", {"query": "dotdot"})["hits"]
    assert found and {hit["thread"]["workspaceFolder"] for hit in found} == {str(other)}
    other_client = spawn()
    other_client.initialize([str(outer)])
    again = other_client.request("thread/list", {})["threads"]
    assert {t["title"]: t["workspaceFolder"] for t in again}["in-inner"] == str(outer)
