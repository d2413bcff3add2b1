"""`thread/search` over a real server process's pipe, and `sessiond search` as a person runs
it: answers shaped as the protocol says, typed errors for bad queries, another process's
records found once its watcher has seen them, the first search building the index with
`$/progress` (never at startup), the terminal never handed a recorded escape sequence.
The embedded store's own promises are here too: a rebuilt index gives the same hits, a
search within its budget says `partial`."""

from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from restore.service import Settings, open_service
from restore.stores.api import SearchFilters
from tests.faults.helpers import record, start
from tests.support.items import message
from tests.support.rpc_client import RpcError, ServerProcess
from tests.support.wait import eventually
from tests.test_postgres import sessiond_cli


def hits(server: ServerProcess, query: str, **params: Any) -> list[dict[str, Any]]:
    return list(server.request("thread/search", {"query": query, **params})["hits"])


def offline_threads(home: Path, cwd: Path, texts: list[str]) -> list[str]:
    """Threads written by another process before the server starts (an upgrade's data)."""
    service = open_service(Settings(home))
    ids = []
    for text in texts:
        started = service.start(cwd=str(cwd), workspace_folder=None)
        service.record(
            started.summary.threadId,
            started.session_id,
            [{"type": "message", "id": str(uuid.uuid4()), "role": "user", "content": text}],
        )
        ids.append(started.summary.threadId)
    service.close_all()
    service.store.close()
    return ids


def test_search_over_the_pipe_answers_hits_and_refuses_bad_queries_by_name(
    server: ServerProcess, tmp_path: Path
) -> None:
    tid, sid = start(server, tmp_path / "w", title="Payment bug")
    answer = record(server, tid, sid, message("the rounding is off by one cent"))
    result = server.request("thread/search", {"query": "rounding cent"})
    assert result["nextCursor"] is None and result["partial"] is False
    [hit] = result["hits"]
    assert (hit["threadId"], hit["seq"], hit["role"]) == (tid, answer["firstSeq"], "user")
    assert [hit["snippet"][a:b] for a, b in hit["highlights"]] == ["rounding", "cent"]
    assert hit["thread"]["threadId"] == tid and hit["thread"]["title"] == "Payment bug"
    for query, problem in [
        ('"open', "unbalanced quote"),
        ("-", "'-'"),
        ("a\0", "NUL"),
        ("q" * 5000, "longer than 1024 bytes"),
    ]:
        with pytest.raises(RpcError) as refused:
            server.request("thread/search", {"query": query})
        assert refused.value.code == -32602 and refused.value.kind == "InvalidParams"
        assert problem in refused.value.message and refused.value.data["field"] == "query"
    with pytest.raises(RpcError) as bad_role:
        server.request("thread/search", {"query": "x", "role": "system"})
    assert bad_role.value.kind == "InvalidParams"
    assert hits(server, "rounding")[0]["seq"] == answer["firstSeq"]  # still serving


def test_another_process_records_are_found_once_its_watcher_saw_them(
    spawn: Any, tmp_path: Path
) -> None:
    here, there = spawn(), spawn()
    here.initialize()
    there.initialize()
    assert hits(here, "capybara") == []  # also starts the watcher
    tid, sid = start(there, tmp_path / "w")
    answer = record(there, tid, sid, message("a capybara in the logs"))
    here.wait_notification("thread/started")  # the watcher's refresh
    # The other process's listing row lands within its flush (FLUSH_SECONDS); a hang guard,
    # not a speed limit.
    deadline = time.monotonic() + 30
    while not (found := hits(here, "capybara")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [(h["threadId"], h["seq"]) for h in found or []] == [(tid, answer["firstSeq"])]


def test_the_first_search_builds_the_index_with_progress_never_at_startup(
    spawn: Any, home: Path, tmp_path: Path
) -> None:
    ids = offline_threads(home, tmp_path / "w", [f"lemur number {n}" for n in range(30)])
    index = home / "index.sqlite3"
    server = spawn()
    server.initialize()
    server.request("thread/list", {})
    with sqlite3.connect(index) as conn:  # listed, but nothing of search built yet
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert "search_fts" not in tables
    found = server.request("thread/search", {"query": "lemur", "limit": 200})
    assert {h["threadId"] for h in found["hits"]} == set(ids) and found["partial"] is False
    progress = [n["params"]["value"] for n in server.wait_notification("$/progress")]
    searching = [v for v in progress if v.get("title") == "Indexing for search"]
    assert searching and searching[0]["kind"] == "begin"
    assert any(v["kind"] == "end" and v["message"] == "30 threads indexed" for v in progress)
    # A record since: indexed by the next search in one short transaction, without a word
    # (its progress would come before its answer, on the same pipe).
    tid, sid = start(server, tmp_path / "w")
    record(server, tid, sid, message("a lemur recorded now"))
    assert [h["threadId"] for h in hits(server, "lemur recorded")] == [tid]
    begun = [n["params"]["value"] for n in server.notifications if n["method"] == "$/progress"]
    assert [v.get("title") for v in begun if v["kind"] == "begin"].count("Indexing for search") == 1


def test_sessiond_search_prints_one_safe_line_per_hit_with_its_resume_command(
    home: Path, tmp_path: Path
) -> None:
    service = open_service(Settings(home))
    own = service.start(cwd=str(tmp_path), workspace_folder=None, title="Evil \x1b]0;title\x07")
    service.record(
        own.summary.threadId,
        own.session_id,
        [{"type": "message", "id": "m1", "role": "user", "content": "the okapi \x1b[2J cleared"}],
    )
    imported = service.start(
        cwd=str(tmp_path),
        workspace_folder=None,
        origin={"agent": "claude-code", "sessionId": "0b6e2c1a-okapi"},
    )
    service.record(
        imported.summary.threadId,
        imported.session_id,
        [{"type": "message", "id": "m1", "role": "assistant", "content": "an okapi answer"}],
    )
    service.close_all()
    done = sessiond_cli("--home", str(home), "search", "okapi")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and "\x1b" not in done.stdout and "\x07" not in done.stdout
    [mine] = [line for line in lines if line.startswith(own.summary.threadId[:8])]
    assert "the [okapi]" in mine and "Evil \\x1b]0;title\\x07" in mine
    # The hint runs as printed: the --home this search was given, the id as the line shows it.
    assert mine.endswith(f"» sessiond --home {home} resume {own.summary.threadId[:8]}")
    [theirs] = [line for line in lines if line.startswith(imported.summary.threadId[:8])]
    assert theirs.endswith(f"» cd {tmp_path} && claude --resume 0b6e2c1a-okapi")
    as_json = [
        json.loads(line)
        for line in sessiond_cli(
            "--home", str(home), "search", "okapi", "--json"
        ).stdout.splitlines()
    ]
    assert {h["resume"] for h in as_json} == {
        f"sessiond --home {home} resume {own.summary.threadId[:8]}",
        f"cd {tmp_path} && claude --resume 0b6e2c1a-okapi",
    }
    none = sessiond_cli("--home", str(home), "search", "okapi", "--since", "1m", "--agent", "codex")
    assert (none.returncode, none.stdout) == (1, "")
    bad = sessiond_cli("--home", str(home), "search", '"okapi')
    assert (
        bad.returncode == 2 and bad.stderr == "sessiond: InvalidParams: query: unbalanced quote\n"
    )


def test_a_rebuilt_index_gives_the_same_hits(home: Path, tmp_path: Path) -> None:
    offline_threads(home, tmp_path / "w", [f"gecko {'gecko ' * (n % 4)}{n}" for n in range(12)])
    service = open_service(Settings(home))
    before = service.search("gecko", limit=200)
    service.store.close()
    for name in os.listdir(home):
        if name.startswith("index.sqlite3"):
            os.remove(home / name)  # derived: every byte of it, WAL included
    again = open_service(Settings(home)).search("gecko", limit=200)
    assert len(before.hits) == 12
    assert [(h.thread.threadId, h.seq, h.snippet, h.highlights) for h in again.hits] == [
        (h.thread.threadId, h.seq, h.snippet, h.highlights) for h in before.hits
    ]


def test_a_record_is_answered_while_a_search_is_under_way(spawn: Any, tmp_path: Path) -> None:
    """A search (its catch-up and query) runs beside the store thread (in a process of its
    own: tests/test_search_process.py): held at a pause point (restore/faults.py), it
    holds no record. What is asserted is what the server did while the search was provably
    under way, never how long."""
    pause = tmp_path / "pause"
    pause.mkdir()
    server = spawn(env={"SESSIOND_PAUSE_AT": f"thread-search:{pause}"})
    server.initialize()
    tid, sid = start(server, tmp_path / "w")
    before = record(server, tid, sid, message("an okapi before the search"))
    searching = server.request_async("thread/search", {"query": "okapi"})
    eventually((pause / "thread-search.reached").exists, "a search under way")
    # On the store thread, the record would wait for the search (for ever: it waits for
    # this test). It is answered first.
    during = record(server, tid, sid, message("an okapi during the search"))
    assert searching not in server.responses  # the search was still under way
    (pause / "thread-search.go").touch()
    found = server.response(searching)["result"]["hits"]
    assert before["firstSeq"] in {hit["seq"] for hit in found}  # recorded before it: found
    assert {hit["seq"] for hit in hits(server, "okapi")} == {before["firstSeq"], during["firstSeq"]}


def test_a_search_follows_the_index_file_rebuilt_under_it_and_keeps_no_old_descriptor(
    home: Path, tmp_path: Path
) -> None:
    """The search has a connection of its own to the index file: when the listing rebuilds
    the file (deleted, damaged), the search reads the new one, where the new rows are, and
    lets the old one go."""
    [tid] = offline_threads(home, tmp_path / "w", ["a quokka"])
    service = open_service(Settings(home))
    assert [h.thread.threadId for h in service.search("quokka").hits] == [tid]
    service.store.index.close()
    for name in os.listdir(home):
        if name.startswith("index.sqlite3"):
            os.remove(home / name)
    started = service.start(cwd=str(tmp_path / "w"), workspace_folder=None)
    service.record(started.summary.threadId, started.session_id,
                   [message("a quokka again")])  # fmt: skip
    found = service.search("quokka").hits
    assert {h.thread.threadId for h in found} == {tid, started.summary.threadId}
    index = _index_descriptors(home)
    assert index and not [d for d in index if d.endswith("(deleted)")], index
    service.close_all()
    service.store.close()


def test_closing_the_store_closes_the_search_connection_too(home: Path, tmp_path: Path) -> None:
    """A server closes its store on shutdown (server/app.py): the search's connection goes
    with the listing's, and no descriptor of the index is left behind."""
    offline_threads(home, tmp_path / "w", ["a pangolin"])
    service = open_service(Settings(home))
    assert len(service.search("pangolin").hits) == 1
    assert _index_descriptors(home)
    service.close_all()
    service.store.close()
    assert _index_descriptors(home) == []


def _index_descriptors(home: Path) -> list[str]:
    """What this process's open descriptors on the index file (and its WAL) point at."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the listing's own descriptor, gone meanwhile
            continue
        if target.startswith(str(home / "index.sqlite3")):
            found.append(target)
    return found


def test_a_search_out_of_budget_answers_what_exists_as_partial(home: Path, tmp_path: Path) -> None:
    ids = offline_threads(home, tmp_path / "w", [f"tapir {n}" for n in range(20)])
    service = open_service(Settings(home))
    reported: list[tuple[int, int]] = []
    first = service.search("tapir", budget=0.0, progress=lambda d, t: reported.append((d, t)))
    assert first.partial and first.hits == []
    assert reported == [(0, 20), (0, 0)]
    whole = service.search("tapir", limit=200, budget=None)
    assert not whole.partial and {h.thread.threadId for h in whole.hits} == set(ids)


def test_pages_across_rank_windows_lose_and_repeat_nothing(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A common word is ranked within windows of its newest matches (embedded/search.py,
    `WINDOW`); pages walk window after window, filters applied in each."""
    from restore.stores.embedded import search as embedded_search

    monkeypatch.setattr(embedded_search, "WINDOW", 4)
    cwds = [tmp_path / "a", tmp_path / "b"]
    for cwd in cwds:
        cwd.mkdir()
    service = open_service(Settings(home))
    planted: set[tuple[str, int]] = set()
    for n in range(9):
        started = service.start(cwd=str(cwds[n % 2]), workspace_folder=None)
        texts = ["walrus " * (1 + (n + k) % 3) + f"{n}.{k}" for k in range(4)]
        items = [{"type": "message", "id": f"m{k}", "role": "user", "content": text}
                 for k, text in enumerate(texts)]  # fmt: skip
        appended, _ = service.record(started.summary.threadId, started.session_id, items)
        assert appended.first_seq is not None
        if n % 2 == 0:
            planted |= {(started.summary.threadId, appended.first_seq + k) for k in range(4)}
    seen: list[tuple[str, int]] = []
    cursor = None
    while True:
        page = service.search("walrus", SearchFilters(cwd=str(cwds[0])), cursor=cursor, limit=3)
        seen += [(h.thread.threadId, h.seq) for h in page.hits]
        if (cursor := page.next_cursor) is None:
            break
    assert len(seen) == len(set(seen)) == 20 and set(seen) == planted


async def test_an_acp_session_is_found_by_what_the_editor_and_agent_said(
    home: Path, tmp_path: Path, make_repo: Any
) -> None:
    """The real ACP front door (`sessiond acp` with the scripted agent, the SDK's client as
    the editor): its prompt, the agent's answer, the edited path, the todo list and the
    title are found from another sessiond process, filed under agent `acp`."""
    from tests.support.acp_editor import fake_agent, sessiond_acp

    repo = make_repo("repo")
    notes = repo / "notes.txt"
    notes.write_text("before\n")
    async with sessiond_acp(home, fake_agent(tmp_path / "agent")) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        prompt = [{"type": "text", "text": f"edit {notes}"}]
        await run.conn.prompt(session_id=session, prompt=prompt)  # type: ignore[arg-type]
    server = ServerProcess(home)
    try:
        server.initialize()
        roles = {(h["threadId"], h["role"]) for h in hits(server, "notes txt", agent="acp")}
        assert roles == {(session, "user"), (session, "tool"), (session, "edit")}  # call title
        [todo] = hits(server, '"run the tests"')
        assert (todo["threadId"], todo["role"], todo["thread"]["origin"]["agent"]) == (
            session, "todo", "acp")  # fmt: skip
        assert {h["role"] for h in hits(server, "editing")} >= {"title"}
        assert hits(server, "notes", agent="sessiond") == []
    finally:
        server.close()
