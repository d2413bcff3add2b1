"""`sessiond import claude|codex` into PostgreSQL gives what the same import gives the
embedded store: the same threads, every item the same (seq, ids, timestamps, content), the
same listing rows; and importing again writes nothing. The importer writes through the
store interface only (restore/imports/), so a team can bring its agents' history into its
shared store. Real command lines, the transcripts of tests/support/import_fixtures.py (two real
git repos), a real PostgreSQL cluster (tests/support/pg_cluster.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from restore.stores import Settings, open_store
from restore.stores.api import ListFilters, Store
from restore.summary import ThreadSummary
from tests.conftest import git
from tests.support.import_fixtures import Fixture, build
from tests.test_postgres import sessiond_cli

ON_POSTGRES = pytest.mark.parametrize("store_url", ["postgres"], indirect=True)


@pytest.fixture
def fixture(tmp_path: Path, make_repo: Callable[..., Path]) -> Fixture:
    alpha, beta = make_repo("alpha", "main"), make_repo("beta", "feature/login")
    heads = {repo: git(repo, "rev-parse", "HEAD") for repo in (alpha, beta)}
    return build(tmp_path / "sources", alpha, beta, heads)


def run_import(home: Path, agent: str, source: Path, store: str | None = None) -> dict[str, Any]:
    shared = ["--store", store] if store else []
    done = sessiond_cli("--home", str(home), *shared, "import", agent, "--from", str(source),
                        "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary: dict[str, Any] = json.loads(done.stdout)
    del summary["seconds"]
    return summary


def rows(store: Store) -> dict[str, ThreadSummary]:
    """Every thread's listing row, by id; children counted as `thread/list` counts them."""
    found: dict[str, ThreadSummary] = {}
    parents: list[str | None] = [None]
    while parents:
        parent = parents.pop()
        page, _ = store.index.list(ListFilters(limit=200, parent_thread_id=parent))
        assert len(page) < 200
        for row in page:
            found[row.threadId] = row
            parents.append(row.threadId)
    return found


@ON_POSTGRES
def test_an_import_into_postgres_equals_the_same_import_into_the_embedded_store(
    fixture: Fixture, tmp_path: Path, store_url: str
) -> None:
    embedded_home, shared_home = tmp_path / "embedded", tmp_path / "shared"
    for agent, root in (("claude", fixture.claude_root), ("codex", fixture.codex_root)):
        alone = run_import(embedded_home, agent, root)
        shared = run_import(shared_home, agent, root, store_url)
        assert shared == alone  # sessions, created, items, skipped lines, problems, unmapped
        assert shared["created"] > 0
    assert not (shared_home / "threads").exists()  # nothing went to files beside the database
    local, remote = (
        open_store(Settings(embedded_home)),
        open_store(Settings(shared_home, store_url)),
    )
    try:
        ids = sorted(local.thread_ids())
        assert len(ids) == 9 + 5 and sorted(remote.thread_ids()) == ids
        for thread_id in ids:
            (mine, archived), (theirs, remote_archived) = (
                local.read(thread_id),
                remote.read(thread_id),
            )
            assert theirs.items == mine.items and remote_archived == archived
        local.index.ensure_ready()
        assert rows(remote) == rows(local)
    finally:
        local.close()
        remote.close()


@ON_POSTGRES
def test_importing_again_into_postgres_writes_nothing(
    fixture: Fixture, tmp_path: Path, store_url: str
) -> None:
    home = tmp_path / "shared"
    first = run_import(home, "claude", fixture.claude_root, store_url)
    remote = open_store(Settings(home, store_url))
    try:
        before = {tid: remote.read(tid)[0].items for tid in remote.thread_ids()}
        (home / "imports.sqlite3").unlink()  # the ledger is a cache: the threads say the rest
        again = run_import(home, "claude", fixture.claude_root, store_url)
        after = {tid: remote.read(tid)[0].items for tid in remote.thread_ids()}
    finally:
        remote.close()
    assert first["created"] == 9 and again["created"] == 0 and again["items"] == 0
    assert again["unchanged"] + again["empty"] == again["sessions"] == first["sessions"]
    assert after == before
