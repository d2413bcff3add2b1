"""Upgrades: a data directory or PostgreSQL database written by an earlier sessiond opens in
this one and keeps working.

Each fixture under tests/fixtures/upgrades/ was written by an earlier commit's own sessiond
(tests/fixtures/upgrades/make.py says which, and how to add one for a new format change).
Here the current code, in real processes (the CLI and a server over a pipe), opens it in
place and does what a person does next: lists it (live and archived threads, as the old
release listed them), searches a word each thread said, resumes the first thread (its todos,
its file edit and its conversation come back), records into it, searches and records twice
more (the sequence that bricked an index with the first search triggers), imports the rest of
a Claude Code and a Codex transcript (the new lines only, into the threads the old release
made, nothing twice), and runs `doctor`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.upgrades import make
from tests.support import pg_cluster
from tests.support.rpc_client import REPO, ServerProcess
from tests.support.wait import HANG_GUARD

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "upgrades"
NAMES = sorted(p.parent.name for p in FIXTURES.glob("*/manifest.json"))


def test_every_fixture_make_knows_is_here() -> None:
    """A row added to make.py's FIXTURES without its directory would test nothing."""
    assert sorted(f.name for f in make.FIXTURES) == NAMES


class Sessiond:
    """The current sessiond on the fixture's home (and database): its CLI and its server."""

    def __init__(self, store: str | None) -> None:
        self.store = store
        self.servers: list[ServerProcess] = []

    def cli(self, *args: str) -> str:
        store = ["--store", self.store] if self.store else []
        result = subprocess.run(
            [sys.executable, "-m", "server.cli", "--home", str(make.HOME), *store, *args],
            cwd=REPO, capture_output=True, text=True, timeout=HANG_GUARD,
            env={**_clean_env(), "PYTHONPATH": str(REPO)},
        )  # fmt: skip
        assert result.returncode == 0, (
            f"sessiond {' '.join(args)} exited {result.returncode}:\n{result.stderr}"
        )
        return result.stdout

    def json_lines(self, *args: str) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.cli(*args, "--json").splitlines() if line]

    def listed(self, *flags: str) -> list[str]:
        return [t["threadId"] for t in self.json_lines("list", "--limit", "200", *flags)]

    def searched(self, word: str, *flags: str) -> set[str]:
        return {hit["threadId"] for hit in self.json_lines("search", word, *flags)}

    def server(self) -> ServerProcess:
        env = {**_clean_env(), **({"SESSIOND_STORE": self.store} if self.store else {})}
        server = ServerProcess(make.HOME, env=env)
        self.servers.append(server)
        server.initialize([str(make.WORKSPACE)], trusted=True)
        return server

    def close(self) -> None:
        for server in self.servers:
            server.close()


def _clean_env() -> dict[str, str]:
    """No setting of the machine's own (a store, agents' folders) reaches the processes."""
    return {
        key: value for key, value in os.environ.items()
        if not key.startswith(("SESSIOND_", "CLAUDE_", "CODEX_", "GEMINI_", "PG"))
    }  # fmt: skip


@pytest.fixture
def opened(request: pytest.FixtureRequest) -> Iterator[tuple[dict[str, Any], Sessiond]]:
    """The fixture put back where its release wrote it (the home under make.ROOT, or the
    dump restored into a fresh database), with the transcripts as they were imported."""
    name: str = request.param
    folder = FIXTURES / name
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["home"] == str(make.HOME) and manifest["sources"] == str(make.SOURCES)
    with make.fixed_paths():
        shutil.rmtree(make.HOME)
        store = None
        database = None
        cluster: pg_cluster.Cluster | None = None
        if manifest["store"] == "postgresql":
            cluster = request.getfixturevalue("postgres")
            database = pg_cluster.fresh_database(cluster.url(), "upgrade")
            store = cluster.url(database)
            subprocess.run(
                [str(Path(cluster.bindir) / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1",
                 "-d", store, "-f", str(folder / "postgres.sql")],
                check=True, capture_output=True, timeout=HANG_GUARD,
            )  # fmt: skip
            make.HOME.mkdir()
        else:
            with tarfile.open(folder / "home.tar.gz") as tar:
                tar.extractall(make.ROOT, filter="tar")
        shutil.copytree(folder / "sources", make.SOURCES, dirs_exist_ok=True)
        for more in make.SOURCES.rglob("*.more"):
            more.unlink()  # appended by the test, when the session goes on
        sessiond = Sessiond(store)
        try:
            yield manifest, sessiond
        finally:
            sessiond.close()
            if cluster is not None and database is not None:
                pg_cluster.drop_database(cluster.url(), database)


def by_role(manifest: dict[str, Any], role: str) -> dict[str, Any] | None:
    return next((t for t in manifest["threads"] if t["role"] == role), None)


def pages(server: ServerProcess, thread_id: str, direction: str) -> int:
    """Read a thread a page at a time by the server's cursors, forward from the start or
    back from past the end; its messages, each once and in order."""
    forward = direction == "afterSeq"
    cursor: int | None = 0 if forward else 1 << 31
    seqs: list[int] = []
    messages = 0
    while cursor is not None:
        page = server.request("thread/read", {"threadId": thread_id, "limit": 40,
                                              direction: cursor})  # fmt: skip
        got = [i["seq"] for i in page["items"]]
        seqs = [*seqs, *got] if forward else [*got, *seqs]
        messages += sum(1 for i in page["items"] if i["type"] == "message")
        cursor = page["nextAfterSeq" if forward else "nextBeforeSeq"]
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    return messages


@pytest.mark.parametrize("opened", NAMES, indirect=True)
def test_an_earlier_release_opens_and_keeps_working(
    opened: tuple[dict[str, Any], Sessiond],
) -> None:
    manifest, sessiond = opened
    first = by_role(manifest, "started")
    assert first is not None

    # Listed as the old release listed it: live threads (a fork naming its origin, a
    # sub-agent's thread its parent), and archived ones apart.
    rows = {t["threadId"]: t for t in sessiond.json_lines("list", "--limit", "200")}
    assert sorted(rows) == sorted(manifest["listed"])
    for thread in manifest["threads"]:
        row = rows.get(thread["threadId"])
        if "forkedFrom" in thread:
            assert row and row["forkedFrom"]["threadId"] == thread["forkedFrom"], row
        if "parentThreadId" in thread:
            assert row and row["parentThreadId"] == thread["parentThreadId"], row
    assert sorted(sessiond.listed("--archived")) == sorted(manifest["listedArchived"])

    # Every word each thread said is found in it (archived ones among the archived).
    for thread in manifest["threads"]:
        flags = ("--archived",) if thread.get("archived") else ()
        assert thread["threadId"] in sessiond.searched(thread["word"], *flags), thread
    for done in manifest["imports"]:
        assert done["threadId"] in sessiond.searched(done["word"]), done

    # A server lists it too, resumes the first thread with what it held, records into it,
    # and goes on through search -> record -> record.
    server = sessiond.server()
    top = {t["threadId"] for t in server.request("thread/list", {"limit": 200})["threads"]}
    assert first["threadId"] in top
    archived = server.request("thread/list", {"limit": 200, "archived": True})["threads"]
    assert [t["threadId"] for t in archived] == manifest["listedArchived"]

    if long := by_role(manifest, "long"):  # read in pages, forward and back
        assert pages(server, long["threadId"], "afterSeq") == long["messages"]
        assert pages(server, long["threadId"], "beforeSeq") == long["messages"]

    report = server.request("thread/resume", {"threadId": first["threadId"]})
    assert report["status"] == "ready", report
    assert report["thread"]["threadId"] == first["threadId"]
    assert not report["recovery"]["skippedLines"], report["recovery"]
    subsystems = {s["name"]: s for s in report["subsystems"]}
    todos = subsystems["todos"]["state"]["items"]
    assert [t["content"] for t in todos] == [t["content"] for t in first["todos"]]
    edited = json.dumps(subsystems["file_history"]["state"])
    assert first["edited"] in edited, edited
    said = [m.get("content") for m in report["messages"]["items"]]
    assert "Please tidy the quokka module" in said, said
    session = report["session"]["sessionId"]

    def record(text: str) -> None:
        item = {"type": "message", "id": str(uuid.uuid4()), "role": "user", "content": text}
        server.request("thread/record", {"threadId": first["threadId"], "sessionId": session,
                                         "items": [item]})  # fmt: skip

    def found(word: str) -> set[str]:
        return {h["threadId"] for h in server.request("thread/search", {"query": word})["hits"]}

    def newest() -> str:
        listed = server.request("thread/list", {"limit": 200})["threads"]
        return str(listed[0]["threadId"])

    record("ocelot one")
    assert first["threadId"] in found("ocelot")
    record("ocelot two")
    assert newest() == first["threadId"]  # its listing row written: the second change
    record("ocelot three")
    assert newest() == first["threadId"]
    assert first["threadId"] in found("three")
    # A tool's output recorded now is found as output (an index or a database of a
    # release that searched no tool output learns to).
    output = {"type": "operation", "id": str(uuid.uuid4()), "operationId": "op-new",
              "tool": "shell", "effect": "read", "state": "committed",
              "resultPersisted": True, "result": "FAILED test_ocelot_margay"}  # fmt: skip
    server.request("thread/record", {"threadId": first["threadId"], "sessionId": session,
                                     "items": [output]})  # fmt: skip
    hits = server.request("thread/search", {"query": "margay", "role": "output"})["hits"]
    assert [h["threadId"] for h in hits] == [first["threadId"]], hits
    server.request("thread/close", {"threadId": first["threadId"], "sessionId": session})
    assert server.shutdown() == 0, server.stderr_path.read_text()[-4000:]
    assert first["threadId"] in sessiond.searched("three")

    # What it cost, as the index rebuilt for its schema (9: a row per model call) or the
    # column migration 008 added to every stored item tells it: the first thread's call.
    costs = json.loads(sessiond.cli("usage", "session", "--json", "--timezone", "UTC"))
    (row,) = [row for row in costs["rows"] if row["threadId"] == first["threadId"]]
    assert row["calls"] >= 1 and row["outputTokens"] >= 300, row

    # The transcripts grew: importing again adds their new lines to the threads the old
    # release made, once (a fixture whose release could not import is imported now).
    imported = {i["agent"]: i for i in manifest["imports"]}
    threads = set(manifest["listed"])
    for spec in make.IMPORTS:
        source = make.SOURCES / spec["file"]
        root = str(make.SOURCES / spec["root"])
        if spec["agent"] not in imported:
            summary = json.loads(sessiond.cli("import", spec["agent"], "--from", root, "--json"))
            assert (summary["created"], summary["updated"]) == (1, 0), summary
        more = FIXTURES / manifest["name"] / "sources" / (spec["file"] + ".more")
        with source.open("ab") as out:
            out.write(more.read_bytes())
        summary = json.loads(sessiond.cli("import", spec["agent"], "--from", root, "--json"))
        assert (summary["created"], summary["updated"], summary["revisions"]) == (0, 1, 0), summary
        (thread,) = sessiond.searched(spec["moreWord"])
        if spec["agent"] in imported:
            assert thread == imported[spec["agent"]]["threadId"]
        threads.add(thread)
        items = sessiond.json_lines("show", thread)
        ids = [i["id"] for i in items]
        assert len(ids) == len(set(ids)), "an imported line was written twice"
        assert spec["word"] in json.dumps(items)
    assert set(sessiond.listed()) == threads

    sessiond.cli("doctor")
