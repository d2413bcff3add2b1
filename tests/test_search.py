"""Search, one suite on both stores (SQLite FTS5 in the embedded index, PostgreSQL's
tsvector): needles planted at known threads and seqs are found best first with their
highlights; filters apply before paging; pages lose and repeat nothing; a record is
findable as soon as it is stored (this process, another one, an import, an ACP thread);
deleted threads' hits go, archived ones' hide; hostile queries are typed errors. Through
the service the server calls, on real files and SQLite, or a real PostgreSQL cluster."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.errors import ErrorKind, ProtocolError
from restore.service import Settings, ThreadService, open_service
from restore.service.search import Results
from restore.stores.api import SearchFilters
from tests.conftest import BOTH_STORES
from tests.support.items import message

pytestmark = BOTH_STORES

Services = Callable[[], ThreadService]


@pytest.fixture
def services(home: Path, store_url: str | None) -> Iterator[Services]:
    made: list[ThreadService] = []

    def make() -> ThreadService:
        service = open_service(Settings(home, store_url))
        made.append(service)
        return service

    yield make
    for service in made:
        service.close_all()
        service.store.close()


def thread(
    service: ThreadService, cwd: Path, items: list[dict[str, Any]], **start: Any
) -> tuple[str, str, list[int]]:
    """A thread with these items: (threadId, sessionId, each item's seq)."""
    cwd.mkdir(parents=True, exist_ok=True)
    folder = start.pop("folder", None)
    started = service.start(cwd=str(cwd), workspace_folder=folder, **start)
    tid, sid = started.summary.threadId, started.session_id
    appended, _ = service.record(tid, sid, items)
    assert appended.first_seq is not None
    return tid, sid, list(range(appended.first_seq, appended.first_seq + len(items)))


def found(results: Results) -> list[tuple[str, int]]:
    return [(hit.thread.threadId, hit.seq) for hit in results.hits]


def marked(results: Results) -> list[list[str]]:
    """Each hit's highlighted words, as a client would show them."""
    return [[hit.snippet[a:b] for a, b in hit.highlights] for hit in results.hits]


def test_needles_are_found_where_they_were_planted_best_first_with_highlights(
    services: Services, tmp_path: Path
) -> None:
    service = services()
    filler = "the quick brown fox jumps over the lazy dog while the build runs. " * 8
    one, _, seqs1 = thread(service, tmp_path / "a", [
        message("nothing to see here"),
        message(f"{filler} then zephyrine appeared once, in a long message", "assistant"),
        message("Zephyrine, zephyrine: ZEPHYRINE again"),
    ])  # fmt: skip
    two, _, seqs2 = thread(service, tmp_path / "b", [
        message("a short zephyrine note"),
        {"type": "operation", "id": "op-1", "operationId": "call-1", "tool": "shell",
         "effect": "side_effect", "state": "started", "command": "grep -rn zephyrine src/"},
        {"type": "file_edit", "id": "edit-1", "path": "src/zephyrine/quarantine.py"},
        {"type": "todos", "id": "todo-1", "items": [
            {"id": "1", "content": "rename the quarantine module", "status": "pending"}]},
    ], title="Quarantine the flaky test")  # fmt: skip
    results = service.search("zephyrine")
    hits = found(results)
    assert set(hits) == {(one, seqs1[1]), (one, seqs1[2]), (two, seqs2[0]), (two, seqs2[1]),
                         (two, seqs2[2])}  # fmt: skip
    assert hits[0] == (one, seqs1[2])  # three times in a short message: the best
    assert hits.index((two, seqs2[0])) < hits.index((one, seqs1[1]))  # short beats long
    by_hit = dict(zip(hits, marked(results), strict=True))
    assert by_hit[(one, seqs1[2])] == ["Zephyrine", "zephyrine", "ZEPHYRINE"]
    assert by_hit[(one, seqs1[1])] == ["zephyrine"]
    roles = {(h.thread.threadId, h.seq): h.role for h in results.hits}
    assert roles[(two, seqs2[1])] == "tool" and roles[(two, seqs2[2])] == "edit"
    assert results.hits[0].thread.threadId == one and not results.partial
    # Phrases, prefixes, exclusions, paths, todos and titles.
    assert found(service.search('"zephyrine note"')) == [(two, seqs2[0])]
    assert set(found(service.search("zephyr*"))) == set(hits)
    assert set(found(service.search("zephyrine -short"))) == set(hits) - {(two, seqs2[0])}
    path = service.search("zephyrine/quarantine.py")
    assert found(path) == [(two, seqs2[2])] and marked(path) == [["zephyrine/quarantine.py"]]
    assert [h.role for h in service.search("rename module").hits] == ["todo"]
    title = service.search("flaky")
    assert [(h.thread.threadId, h.role) for h in title.hits] == [(two, "title")]
    assert title.hits[0].thread.title == "Quarantine the flaky test"


def test_filters_apply_before_paging(services: Services, tmp_path: Path) -> None:
    service = services()
    folder = tmp_path / "repo"
    inside, _, _ = thread(service, folder / "pkg", [message("needle inside", "assistant")])
    outside, _, _ = thread(service, tmp_path / "elsewhere", [message("needle outside")])
    imported, _, _ = thread(
        service, tmp_path / "elsewhere", [message("needle from codex")],
        origin={"agent": "codex", "sessionId": "s-1"},
    )  # fmt: skip
    for _ in range(3):  # more matches than one page, none of them in the folder
        thread(service, tmp_path / "noise", [message("needle " * 3)])
    in_folder = service.search("needle", SearchFilters(workspace_folder=str(folder)), limit=1)
    assert [h.thread.threadId for h in in_folder.hits] == [inside]
    assert in_folder.next_cursor is None
    real = os.path.realpath(tmp_path / "elsewhere")
    assert {h.thread.threadId for h in service.search("needle", SearchFilters(cwd=real)).hits} == {
        outside, imported}  # fmt: skip
    assert [
        h.thread.threadId for h in service.search("needle", SearchFilters(agent="codex")).hits
    ] == [imported]
    assert inside not in {
        h.thread.threadId for h in service.search("needle", SearchFilters(agent="codex")).hits
    }
    assert [
        h.thread.threadId for h in service.search("needle", SearchFilters(role="assistant")).hits
    ] == [inside]
    everything = service.search("needle", limit=50).hits
    assert len(everything) == 6
    ts = sorted(h.ts for h in everything)
    later = service.search("needle", SearchFilters(since=ts[3]), limit=50).hits
    assert sorted(h.ts for h in later) == ts[3:]
    earlier = service.search("needle", SearchFilters(until=ts[3]), limit=50).hits
    assert sorted(h.ts for h in earlier) == ts[:3]
    for name, bad in [("agent", {"agent": "vim"}), ("role", {"role": "system"}),
                      ("since", {"since": "last week"}), ("cwd", {"cwd": "/a\0b"})]:  # fmt: skip
        with pytest.raises(ProtocolError) as refused:
            service.search("needle", SearchFilters(**bad))
        assert refused.value.kind is ErrorKind.INVALID_PARAMS
        assert refused.value.details["field"] in (name, "workspaceFolder")


def test_pages_lose_nothing_and_repeat_nothing(services: Services, tmp_path: Path) -> None:
    service = services()
    planted: set[tuple[str, int]] = set()
    for n in range(7):
        tid, _, seqs = thread(service, tmp_path / f"w{n % 2}", [
            message("pagination " * (1 + k % 3) + f"in thread {n} message {k}") for k in range(5)
        ])  # fmt: skip
        planted |= {(tid, seq) for seq in seqs}
    seen: list[tuple[str, int]] = []
    cursor = None
    pages = 0
    while True:
        page = service.search("pagination", cursor=cursor, limit=4)
        assert len(page.hits) <= 4
        seen += found(page)
        pages += 1
        if (cursor := page.next_cursor) is None:
            break
    assert len(seen) == len(set(seen)) == 35 and set(seen) == planted
    assert pages == 9
    whole = found(service.search("pagination", limit=200))
    assert seen == whole  # the same order as one page holding everything
    with pytest.raises(ProtocolError) as bad:
        service.search("pagination", cursor="bm90IGEgY3Vyc29y")
    assert bad.value.kind is ErrorKind.INVALID_PARAMS and bad.value.details["field"] == "cursor"


def test_a_record_is_findable_at_once_from_this_process_and_another(
    services: Services, tmp_path: Path
) -> None:
    here, there = services(), services()  # two sessiond processes on one store
    tid, sid, _ = thread(here, tmp_path / "w", [message("first words")])
    assert found(here.search("first")) == [(tid, 2)]
    appended, _ = here.record(tid, sid, [message("a later quokka")])
    assert found(here.search("quokka")) == [(tid, appended.first_seq)]
    # Another process: the embedded store learns of its write as the watcher does
    # (`external_changes`, the listing rows brought up to date); PostgreSQL at once.
    assert found(there.search("quokka")) == [(tid, appended.first_seq)]
    other, other_sid, _ = thread(there, tmp_path / "w", [message("a platypus elsewhere")])
    more, _ = there.record(other, other_sid, [message("and a second platypus")])
    here.external_changes([other])
    assert set(found(here.search("platypus"))) == {(other, 2), (other, more.first_seq)}


def test_an_acp_thread_is_found_by_its_tool_calls_titles_and_messages(
    services: Services, tmp_path: Path
) -> None:
    service = services()
    acp, _, seqs = thread(service, tmp_path / "w", [
        {"type": "message", "id": "acp:m1", "role": "user", "origin": "acp",
         "content": [{"type": "text", "text": "wombat migration please"},
                     {"type": "image", "data": "d29tYmF0"}]},
        {"type": "operation", "id": "acp:o1", "operationId": "tc-1", "tool": "edit",
         "effect": "side_effect", "state": "started", "title": "Edit wombat.toml"},
        {"type": "thread_title", "id": "acp:t1", "title": "Wombat migration"},
    ], origin={"agent": "acp", "sessionId": "acp-1"})  # fmt: skip
    results = service.search("wombat", SearchFilters(agent="acp"))
    assert set(found(results)) == {(acp, seq) for seq in seqs}
    assert {h.role for h in results.hits} == {"user", "tool", "title"}
    assert found(service.search("wombat", SearchFilters(agent="sessiond"))) == []


def test_deleting_removes_hits_and_archiving_hides_them(services: Services, tmp_path: Path) -> None:
    service = services()
    kept, _, _ = thread(service, tmp_path / "w", [message("axolotl kept")])
    archived, _, _ = thread(service, tmp_path / "w", [message("axolotl archived")])
    deleted, _, _ = thread(service, tmp_path / "w", [message("axolotl deleted")])
    assert {h.thread.threadId for h in service.search("axolotl").hits} == {kept, archived, deleted}
    service.archive(archived, True)
    service.delete(deleted)
    assert [h.thread.threadId for h in service.search("axolotl").hits] == [kept]
    shown = service.search("axolotl", SearchFilters(archived=True)).hits
    assert [(h.thread.threadId, h.thread.archived) for h in shown] == [(archived, True)]
    service.archive(archived, False)
    assert {h.thread.threadId for h in services().search("axolotl").hits} == {kept, archived}


@pytest.mark.parametrize(
    "text",
    ['NEAR(a b)', 'text:secret', '"a" OR "b"', "a AND b NOT c", "x' OR 1=1 --", "a & !b",
     "(a | b) <-> c:*", "^start", "{a b}", "a:*", "\\", "'"],
)  # fmt: skip
def test_query_syntax_of_either_database_is_only_words_to_find(
    services: Services, tmp_path: Path, text: str
) -> None:
    """What FTS5 or tsquery would read as operators finds the words, or is InvalidParams
    naming the query: never a database error, never another thread's text."""
    service = services()
    thread(service, tmp_path / "w", [message("near a b text secret or and not start")])
    try:
        results = service.search(text)
    except ProtocolError as refused:
        assert refused.kind is ErrorKind.INVALID_PARAMS and refused.details["field"] == "query"
        return
    words = [w for term in __import__("restore.search.query", fromlist=["parse"]).parse(
        text).positive for w in term.words]  # fmt: skip
    for hit in results.hits:
        assert all(w in hit.snippet.lower() for w in words)


@pytest.mark.parametrize(
    ("text", "problem"),
    [('"unbalanced', "unbalanced quote"), ("a\0b", "NUL"), ("x" * (1 << 20), "longer than"),
     ("-", "'-'"), ("*", "'*'"), ("", "empty")],
    ids=["quote", "nul", "1mb", "dash", "star", "empty"],
)  # fmt: skip
def test_hostile_queries_are_typed_errors(
    services: Services, tmp_path: Path, text: str, problem: str
) -> None:
    service = services()
    thread(service, tmp_path / "w", [message("anything")])
    with pytest.raises(ProtocolError) as refused:
        service.search(text)
    assert refused.value.kind is ErrorKind.INVALID_PARAMS and problem in refused.value.message


def test_an_import_is_findable_with_its_agent(
    services: Services, home: Path, store_url: str | None, tmp_path: Path,
    make_repo: Callable[..., Path],
) -> None:  # fmt: skip
    """Claude Code and Codex sessions imported by the real `sessiond import`: their
    messages, todos and commands are found, filed under their agent."""
    from tests.conftest import git
    from tests.support.import_fixtures import build
    from tests.test_import_stores import run_import

    alpha, beta = make_repo("alpha", "main"), make_repo("beta", "feature/login")
    heads = {repo: git(repo, "rev-parse", "HEAD") for repo in (alpha, beta)}
    fixture = build(tmp_path / "sources", alpha, beta, heads)
    service = services()
    assert service.search("rounding").hits == []
    run_import(home, "claude", fixture.claude_root, store_url)
    claude = service.search("payment rounding", SearchFilters(agent="claude-code"))
    assert {h.snippet for h in claude.hits} >= {
        "Fix the payment rounding bug in alpha",
        "Fix the payment rounding bug in beta",
    }
    assert {h.thread.origin["agent"] for h in claude.hits} == {"claude-code"}  # type: ignore[index]
    assert any(h.role == "todo" for h in service.search("round_half_even").hits)
    assert any(
        h.role == "tool"
        for h in service.search('"pytest q"', SearchFilters(agent="claude-code")).hits
    )
    assert service.search("changelog").hits == []
    run_import(home, "codex", fixture.codex_root, store_url)
    codex = service.search("changelog")
    assert {h.thread.origin["agent"] for h in codex.hits} == {"codex"}  # type: ignore[index]
    assert {h.role for h in codex.hits} >= {"user", "todo", "edit", "assistant"}


def test_a_record_holding_nul_is_stored_and_found(services: Services, tmp_path: Path) -> None:
    """JSON can carry `\\u0000` and PostgreSQL's jsonb cannot: the search columns drop it,
    and the record is stored and found like any other (an import carried such a line)."""
    service = services()
    tid, _, seqs = thread(service, tmp_path / "w", [
        message("first"), message("before\0after zebu \\u0000 z")])  # fmt: skip
    results = service.search("zebu")
    assert found(results) == [(tid, seqs[1])] and marked(results) == [["zebu"]]
    assert service.store.read(tid)[0].items[-1]["content"] == "before\0after zebu \\u0000 z"
