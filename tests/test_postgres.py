"""The shared store end to end: real sessiond processes on a real PostgreSQL cluster.

Two processes with their own `$SESSIOND_HOME` stand for two machines on one database.
Faults are real too: backends terminated under a live session, the cluster stopped with
`-m immediate` and started again, a database that is not there, kill -9 of a writer.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest

from tests.conftest import git
from tests.faults.helpers import record, start
from tests.support import pg_cluster, wait
from tests.support.items import message
from tests.support.rpc_client import REPO, RpcError, ServerProcess

pytestmark = pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
PATIENCE = 60.0  # seconds a test waits for something that must happen (not a perf limit)
Machines = Callable[..., ServerProcess]


@pytest.fixture
def machines(tmp_path: Path, store_url: str) -> Iterator[Machines]:
    """`machine("a")`: a sessiond with its own home on the test's database, initialized."""
    started: list[ServerProcess] = []

    def machine(
        name: str,
        folders: list[str] | None = None,
        *,
        store: str | None = None,
        args: list[str] | None = None,
        **env: str,
    ) -> ServerProcess:
        home = tmp_path / f"home-{name}"
        home.mkdir(exist_ok=True)
        server = ServerProcess(home, args=args, env={"SESSIOND_STORE": store or store_url, **env})
        started.append(server)
        server.initialize(folders)
        return server

    yield machine
    for server in started:
        server.close()


def eventually(check: Callable[[], Any], what: str) -> Any:
    """`tests.support.wait.eventually`, through the retryable StorageError a server
    answers while its database is away (the machines here lose it on purpose)."""

    def tolerant() -> Any:
        try:
            return check()
        except RpcError as exc:
            if exc.kind != "StorageError" or not exc.data.get("retryable"):
                raise
            return None

    return wait.eventually(tolerant, what, patience=PATIENCE, every=0.1)


def sessiond_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "server.cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        timeout=120,
    )


def ids(threads: list[dict[str, Any]]) -> list[str]:
    return [t["threadId"] for t in threads]


def test_a_thread_started_on_one_machine_is_announced_and_listed_on_the_other(
    machines: Machines, tmp_path: Path
) -> None:
    a, b = machines("a"), machines("b")
    assert b.request("thread/list", {})["threads"] == []  # b's first request: it listens now
    tid, sid = start(a, tmp_path)
    [started] = b.wait_notification("thread/started")
    assert started["params"]["thread"]["threadId"] == tid
    assert ids(b.request("thread/list", {})["threads"]) == [tid]
    record(a, tid, sid, message("hello from a"))
    updated = eventually(
        lambda: [n for n in b.notifications if n["method"] == "thread/updated"
                 and n["params"]["thread"].get("itemCount") == 1],
        "thread/updated on b",
    )  # fmt: skip
    assert updated[0]["params"]["thread"]["preview"] == "hello from a"


def test_a_forged_notification_takes_no_thread_off_a_list_nor_stops_the_real_ones(
    machines: Machines, tmp_path: Path, store_url: str
) -> None:
    """Anyone with a login may NOTIFY the team channel (it needs no privilege). A payload
    saying a live thread was deleted must not take it off other machines' lists, and one
    naming no thread must not cost the genuine changes gathered with it; each change is
    announced as the rows say."""
    a, b = machines("a"), machines("b")
    b.request("thread/list", {})  # b listens from its first request
    tid, sid = start(a, tmp_path)
    b.wait_notification("thread/started")
    forged = [{"e": "deleted", "t": tid, "o": "forger"}, {"e": "updated", "t": "x' OR 1=1"},
              {"e": "deleted", "t": None}, ["not", "an", "object"]]  # fmt: skip
    with psycopg.connect(store_url, autocommit=True) as conn:
        for payload in forged:
            conn.execute("SELECT pg_notify('sessiond', %s)", (orjson.dumps(payload).decode(),))
    record(a, tid, sid, message("after the forgery"))  # a genuine change, notified after
    eventually(lambda: [n for n in b.notifications if n["method"] == "thread/updated"
                        and n["params"]["thread"].get("itemCount") == 1],
               "b hears the genuine change")  # fmt: skip
    deleted = [n for n in b.notifications if n["params"].get("deleted")]
    assert deleted == [], "a forged deletion was announced"
    assert ids(b.request("thread/list", {})["threads"]) == [tid]
    a.request("thread/delete", {"threadId": tid})  # a real deletion still reaches b
    eventually(lambda: [n for n in b.notifications if n["params"].get("deleted")],
               "b hears the real deletion")  # fmt: skip


def test_while_one_machine_writes_the_other_is_busy_and_then_resumes(
    machines: Machines, tmp_path: Path
) -> None:
    a, b = machines("a"), machines("b")
    tid, sid = start(a, tmp_path)
    record(a, tid, sid, message("one"))
    with pytest.raises(RpcError) as busy:
        b.request("thread/resume", {"threadId": tid})
    assert busy.value.kind == "ThreadBusy"
    holder = busy.value.data["holder"]
    assert f"pid {a.proc.pid}" in holder and "pytest" in holder, holder
    a.request("thread/close", {"threadId": tid, "sessionId": sid})
    report = b.request("thread/resume", {"threadId": tid})
    assert report["status"] == "ready" and report["continueReason"] == "user"
    assert [m["content"] for m in report["messages"]["items"]] == ["one"]
    record(b, tid, report["session"]["sessionId"], message("two"))
    items = a.request("thread/read", {"threadId": tid})["items"]
    assert [i.get("content") for i in items if i["type"] == "message"] == ["one", "two"]


def test_kill_9_of_the_writer_frees_the_thread_for_another_machine(
    machines: Machines, tmp_path: Path
) -> None:
    a, b = machines("a"), machines("b")
    tid, sid = start(a, tmp_path)
    record(a, tid, sid, message("acknowledged before the crash"))
    with pytest.raises(RpcError) as busy:
        b.request("thread/resume", {"threadId": tid})
    assert busy.value.kind == "ThreadBusy"
    a.kill9()

    def resumed() -> dict[str, Any] | None:
        try:
            return b.request("thread/resume", {"threadId": tid})
        except RpcError as exc:
            if exc.kind != "ThreadBusy":  # until PostgreSQL sees the connection close
                raise
            return None

    report = eventually(resumed, "the lock of a killed process released")
    assert report["status"] == "ready" and report["continueReason"] == "process_recovery"
    assert [m["content"] for m in report["messages"]["items"]] == ["acknowledged before the crash"]


def test_the_other_checkout_resumes_with_a_warning_and_lists_by_repository(
    machines: Machines, make_repo: Callable[..., Path], tmp_path: Path
) -> None:
    """Ana records in /…/ana/shop/api; on another machine the same repository is checked
    out at /…/work/shop: its workspace folder lists her thread, and it resumes there."""
    origin = "https://example.invalid/shop.git"
    repo = make_repo("shop")
    git(repo, "remote", "add", "origin", origin)
    (repo / "api").mkdir()
    clone = tmp_path / "work" / "shop"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    git(clone, "remote", "set-url", "origin", origin)
    (clone / "api").mkdir()
    a = machines("a", [str(repo)])
    tid, sid = start(a, repo / "api")
    a.request("thread/close", {"threadId": tid, "sessionId": sid})
    b = machines("b", [str(clone)])
    listed = b.request("thread/list", {"workspaceFolder": str(clone)})["threads"]
    assert ids(listed) == [tid]
    assert ids(b.request("thread/list", {"workspaceFolder": str(clone / "api")})["threads"]) == [
        tid
    ]
    elsewhere = tmp_path / "unrelated"
    elsewhere.mkdir()
    assert b.request("thread/list", {"workspaceFolder": str(elsewhere)})["threads"] == []
    report = b.request("thread/resume", {"threadId": tid, "cwd": str(clone / "api")})
    assert report["status"] == "ready"
    assert [(d["field"], d["severity"], d["reason"]) for d in report["environment"]["drift"]] == [
        ("worktree", "warn", "same repository, other checkout")
    ]


def test_nothing_connects_before_the_first_request_and_the_schema_comes_with_it(
    machines: Machines, store_url: str, tmp_path: Path
) -> None:
    from restore.stores.postgres import schema

    server = machines("a")  # initialized
    with psycopg.connect(store_url, autocommit=True) as conn:  # fresh statistics each query

        def sessiond_backends() -> int:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND application_name LIKE 'sessiond %%'"
            ).fetchone()
            return int(row[0]) if row else 0

        tables = "SELECT to_regclass('sessiond_migrations') IS NOT NULL"
        assert sessiond_backends() == 0
        assert conn.execute(tables).fetchone() == (False,)
        start(server, tmp_path)
        assert sessiond_backends() >= 1
        assert conn.execute(tables).fetchone() == (True,)
        versions = conn.execute("SELECT version FROM sessiond_migrations ORDER BY 1").fetchall()
        assert versions == [(m.version,) for m in schema.available()] and len(versions) >= 10


def test_a_database_of_schema_1_is_migrated_and_its_threads_stay_top_level(
    machines: Machines, store_url: str
) -> None:
    """Schemas 2 to 5 (row-level security, sub-agents, search, holders) on a database sessiond 0.x
    made: its threads stay readable, and top-level, and their records are searchable."""
    from restore.stores.postgres import schema

    thread_id = str(uuid.uuid4())
    with psycopg.connect(store_url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE sessiond_migrations (version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        first = schema.available()[0]
        conn.execute(first.path.read_text())  # type: ignore[arg-type]
        conn.execute("INSERT INTO sessiond_migrations (version, name) VALUES (1, 'initial')")
        conn.execute(
            "INSERT INTO sessiond_threads (thread_id, title, updated_at) VALUES (%s, %s, %s)",
            (thread_id, "from before", "2026-01-01T00:00:00.000000Z"),
        )
        line = {"v": 1, "seq": 1, "ts": "2026-01-01T00:00:00.000000Z", "type": "message",
                "id": "m1", "role": "user", "content": "an old narwhal"}  # fmt: skip
        conn.execute(
            "INSERT INTO sessiond_items (thread_id, seq, item_id, line) VALUES (%s, 1, 'm1', %s)",
            (thread_id, orjson.dumps(line).decode()),
        )
    server = machines("a")
    (listed,) = server.request("thread/list", {})["threads"]
    assert (listed["threadId"], listed["parentThreadId"], listed["childCount"]) == (
        thread_id, None, 0,
    )  # fmt: skip
    with psycopg.connect(store_url) as conn:
        versions = conn.execute("SELECT version FROM sessiond_migrations ORDER BY 1").fetchall()
    assert versions == [(m.version,) for m in schema.available()]
    [hit] = server.request("thread/search", {"query": "narwhal"})["hits"]
    assert (hit["threadId"], hit["seq"], hit["snippet"]) == (thread_id, 1, "an old narwhal")


def test_an_unreachable_database_is_one_storage_error_and_one_cli_line(
    tmp_path: Path, home: Path, store_url: str
) -> None:
    nowhere = f"postgresql://sessiond@/sessiond?host={tmp_path / 'no-such-socket-dir'}"
    server = ServerProcess(home, env={"SESSIOND_STORE": nowhere})
    try:
        server.initialize()  # no warmup: nothing is reached for yet
        with pytest.raises(RpcError) as failed:
            server.request("thread/list", {})
        assert failed.value.kind == "StorageError" and failed.value.data["retryable"] is True
        assert failed.value.message.startswith("cannot reach PostgreSQL at ")
    finally:
        server.close()
    cli = sessiond_cli("--home", str(home), "--store", nowhere, "list")
    assert cli.returncode == 2
    [line] = cli.stderr.splitlines()
    # A Unix socket is named as one (it was "localhost, database ?" for a URL naming none).
    where = f"the Unix socket in {tmp_path / 'no-such-socket-dir'}, database sessiond"
    assert line.startswith(f"sessiond: StorageError: cannot reach PostgreSQL at {where}: "), line
    unset = {"PGHOST": "", "PGDATABASE": "", "PGUSER": "nobody_here"}
    defaults = sessiond_cli("--home", str(home), "--store", "postgresql://", "list", env=unset)
    assert defaults.returncode == 2
    assert defaults.stderr.startswith(
        "sessiond: StorageError: cannot reach PostgreSQL at the local Unix socket, database "
        "nobody_here: "
    ), defaults.stderr


def test_a_password_in_the_url_never_reaches_a_message_or_a_log(
    postgres: pg_cluster.Cluster, tmp_path: Path, home: Path, store_url: str
) -> None:
    secret = f"pw-{uuid.uuid4().hex}"
    socket = str(postgres.socket_dir)
    urls = [
        f"postgresql://sessiond:{secret}@/no_such_db_{uuid.uuid4().hex[:6]}?host={socket}",
        f"postgresql://sessiond:{secret}@/x?host={tmp_path / 'nowhere'}",
        f"postgresql://sessiond:{secret}@/x?host={socket}&port=1",
    ]
    for url in urls:
        server = ServerProcess(home, env={"SESSIOND_STORE": url, "SESSIOND_LOG": "DEBUG"})
        try:
            server.initialize()
            with pytest.raises(RpcError) as failed:
                server.request("thread/start", {"cwd": str(tmp_path)})
            assert failed.value.kind == "StorageError"
            assert secret not in str(failed.value.data) and secret not in failed.value.message
        finally:
            server.close()
        log = server.stderr_path.read_text()
        assert "sessiond.postgres" in log  # DEBUG logging did say what failed ...
        assert secret not in log  # ... and never with the password
        cli = sessiond_cli("--home", str(home), "list",
                           env={"SESSIOND_STORE": url, "SESSIOND_LOG": "DEBUG"})  # fmt: skip
        assert cli.returncode == 2 and secret not in cli.stderr + cli.stdout


def _terminate_sessiond_backends(store_url: str) -> int:
    with psycopg.connect(store_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND application_name LIKE 'sessiond %%'"
        ).fetchone()
    return int(row[0]) if row else 0


@pytest.mark.parametrize("durability", ["fsync", "group"])
def test_a_lost_connection_fails_records_retryably_and_the_session_goes_on(
    machines: Machines, store_url: str, tmp_path: Path, durability: str
) -> None:
    server = machines("a", SESSIOND_DURABILITY=durability)
    tid, sid = start(server, tmp_path)
    acknowledged = [message("before")]
    record(server, tid, sid, *acknowledged)
    assert _terminate_sessiond_backends(store_url) >= 1
    lost = message("during")
    with pytest.raises(RpcError) as failed:
        record(server, tid, sid, lost)
    assert failed.value.kind == "StorageError" and failed.value.data["retryable"] is True
    eventually(lambda: record(server, tid, sid, lost), "a retried record succeeds")
    acknowledged.append(lost)
    after = message("after")
    record(server, tid, sid, after)  # the same session: no resume needed
    acknowledged.append(after)
    items = server.request("thread/read", {"threadId": tid})["items"]
    messages = [i["id"] for i in items if i["type"] == "message"]
    assert messages == [item["id"] for item in acknowledged]


def test_postgresql_restarted_with_immediate_shutdown_is_picked_up_by_itself(
    machines: Machines, postgres: pg_cluster.Cluster, tmp_path: Path
) -> None:
    a, b = machines("a"), machines("b")
    b.request("thread/list", {})  # b listens
    tid, sid = start(a, tmp_path)
    first = message("before the restart")
    record(a, tid, sid, first)
    postgres.stop("immediate")
    try:
        with pytest.raises(RpcError) as down:
            record(a, tid, sid, message("while down"))
        assert down.value.kind == "StorageError" and down.value.data["retryable"] is True
    finally:
        postgres.start()
    second = message("after the restart")
    eventually(lambda: record(a, tid, sid, second), "records go through again")
    items = eventually(lambda: b.request("thread/read", {"threadId": tid})["items"], "reads")
    contents = [i["content"] for i in items if i["type"] == "message"]
    assert contents[0] == "before the restart" and contents[-1] == "after the restart"
    other, _ = start(a, tmp_path)  # b's listener reconnected by itself
    eventually(
        lambda: any(n["params"]["thread"]["threadId"] == other
                    for n in b.notifications if n["method"] == "thread/started"),
        "b hears of a thread started after the restart",
    )  # fmt: skip


def test_resume_on_another_machine_pages_back_from_the_newest_messages(
    machines: Machines, tmp_path: Path
) -> None:
    a, b = machines("a"), machines("b")
    tid, sid = start(a, tmp_path)
    for n in range(30):
        record(a, tid, sid, message(f"m{n}"))
    a.request("thread/close", {"threadId": tid, "sessionId": sid})
    report = b.request("thread/resume", {"threadId": tid, "messageLimit": 5})
    newest = report["messages"]
    assert [m["content"] for m in newest["items"]] == [f"m{n}" for n in range(25, 30)]
    assert newest["total"] == 30 and newest["nextBeforeSeq"] == newest["items"][0]["seq"]
    earlier, before = [], newest["nextBeforeSeq"]
    while before is not None:
        page = b.request("thread/read", {"threadId": tid, "beforeSeq": before, "limit": 10})
        earlier = [i.get("content") for i in page["items"] if i["type"] == "message"] + earlier
        before = page["nextBeforeSeq"]
        assert page["skippedLines"] == []
    assert earlier == [f"m{n}" for n in range(25)]
    forward = a.request("thread/read", {"threadId": tid, "afterSeq": 0, "limit": 10})
    assert [i["seq"] for i in forward["items"]] == list(range(1, 11))
    assert forward["nextAfterSeq"] == 10


async def test_sessiond_acp_records_into_the_store_that_SESSIOND_STORE_names(
    store_url: str, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    from tests.support.acp_editor import fake_agent, sessiond_acp

    repo = make_repo("repo")
    home = tmp_path / "acp-home"
    home.mkdir()
    async with sessiond_acp(
        home, fake_agent(tmp_path / "agent"), env={"SESSIOND_STORE": store_url}
    ) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        await run.conn.prompt(session_id=session, prompt=[{"type": "text", "text": "hello"}])
    assert not list(home.glob("threads/*/*.jsonl"))  # nothing went to the embedded store
    listed = sessiond_cli("--home", str(tmp_path / "other"), "--store", store_url, "list", "-q")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == [session]


def test_a_store_of_another_kind_is_refused_in_one_line(store_url: str, tmp_path: Path) -> None:
    """(`import` and `serve --follow` write into a PostgreSQL store too, since the importer
    writes through the store interface: tests/test_import_stores.py.)"""
    other = sessiond_cli("--home", str(tmp_path / "h"), "--store", "mysql://u:hunter2@db/x", "list")
    assert other.returncode == 2 and other.stdout == ""
    assert other.stderr.splitlines() == ["sessiond: --store takes a postgresql:// URL"]


def test_a_writer_that_lost_its_connection_never_writes_without_its_lock(
    store_url: str, tmp_path: Path
) -> None:
    """Machine A holds a thread, idle, when its connection is lost: its advisory lock goes
    with it, and machine B may take the thread. A's next record must then be ThreadBusy
    naming B, never written beside B's (the same seqs from two writers)."""
    from protocol.errors import ErrorKind, ProtocolError
    from restore.service import Settings, ThreadService, open_service

    def machine(name: str) -> ThreadService:
        return open_service(Settings(tmp_path / name, store_url))

    a, b = machine("a"), machine("b")
    try:
        started = a.start(cwd=str(tmp_path), workspace_folder=None)
        tid, sid = started.summary.threadId, started.session_id
        a.record(tid, sid, [{"type": "message", "id": "m1", "role": "user", "content": "one"}])
        assert _terminate_sessiond_backends(store_url) >= 1
        report = b.resume(tid, cwd=str(tmp_path), accept_drift=False, message_limit=10)
        assert report["status"] == "ready"
        b.store.name_holder(tid, "bob")
        item = {"type": "message", "id": "m2", "role": "user", "content": "two"}
        with pytest.raises(ProtocolError) as busy:
            try:
                a.record(tid, sid, [item])
            except ProtocolError as lost:  # A learns of the lost connection: retried
                assert lost.kind is ErrorKind.STORAGE_ERROR and lost.details["retryable"]
                a.record(tid, sid, [item])
        assert busy.value.kind is ErrorKind.THREAD_BUSY and "bob" in busy.value.message
        items = b.store.read(tid)[0].items
        assert [i["seq"] for i in items] == list(range(1, len(items) + 1))
        assert "m2" not in {i["id"] for i in items}
    finally:
        b.close_all()
        a.close_all()


# --- following a thread another machine writes (server/live/relay.py) ---------------------------


def _recorded(server: ServerProcess, tid: str) -> list[dict[str, Any]]:
    """The items of every `item/recorded` this client got for the thread, in arrival order."""
    return [item for n in list(server.notifications)
            if n["method"] == "item/recorded" and n["params"]["threadId"] == tid
            for item in n["params"]["items"]]  # fmt: skip


def _follows_up_to(server: ServerProcess, tid: str, last_seq: int) -> list[dict[str, Any]]:
    return eventually(
        lambda: (got := _recorded(server, tid)) and got[-1]["seq"] >= last_seq and got,
        f"item/recorded up to seq {last_seq}",
    )


def _batches(count: int, size: int = 1, content: int = 0) -> list[list[dict[str, Any]]]:
    return [[message(f"{b}.{i} " + "x" * content) for i in range(size)] for b in range(count)]


def test_a_follower_gets_every_item_another_machine_records_in_order_and_once(
    machines: Machines, tmp_path: Path
) -> None:
    """A team lead follows a colleague's live thread from another machine: every item B
    records reaches A's follower as `item/recorded`, in seq order, once, whatever was
    coalesced into one notification, and no notification is larger than A's frame limit
    or longer than a page (a big batch comes as several)."""
    frame = 64 * 1024
    b = machines("b")
    a = machines("a", args=["--max-frame", str(frame)])
    tid, sid = start(b, tmp_path)
    a.request("thread/subscribe", {"threadId": tid})
    batches = [
        *_batches(20),  # small records, back to back: several per NOTIFY
        *_batches(3, size=40),
        [message("big " + "y" * 30_000) for _ in range(10)],  # ~300 KB: > 4 frames of A's
        *_batches(1, size=1000),  # as many as a record may carry
        *_batches(10),
    ]
    expected: list[str] = []
    for batch in batches:
        answer = record(b, tid, sid, *batch)
        assert answer["lastSeq"] - answer["firstSeq"] + 1 == len(batch)
        expected += [item["id"] for item in batch]
    got = _follows_up_to(a, tid, answer["lastSeq"])
    assert [i["id"] for i in got] == expected
    seqs = [i["seq"] for i in got]
    assert seqs == list(range(seqs[0], seqs[0] + len(expected)))
    notes = [n for n in a.notifications if n["method"] == "item/recorded"]
    assert all(len(orjson.dumps(n)) <= frame for n in notes)
    big = [n for n in notes if any(i["content"].startswith("big ") for i in n["params"]["items"])]
    assert len(big) >= 5  # 300 KB of items in pages under 64 KiB


def test_own_and_other_machines_appends_to_one_thread_reach_a_follower_in_order_once(
    machines: Machines, tmp_path: Path
) -> None:
    """The thread moves between machines (A writes, B resumes and writes, A again): A's
    own appends are published from memory, B's read from the rows, and A's follower gets
    every item of the thread once, in seq order, with no gap where the writer changed."""
    a, b = machines("a"), machines("b")
    tid, sid = start(a, tmp_path)
    a.request("thread/subscribe", {"threadId": tid})
    record(a, tid, sid, *_batches(1, size=3)[0])
    for turn in range(3):
        a.request("thread/close", {"threadId": tid, "sessionId": sid})
        other = b.request("thread/resume", {"threadId": tid})["session"]["sessionId"]
        for batch in _batches(4, size=turn + 1):
            record(b, tid, other, *batch)
        b.request("thread/close", {"threadId": tid, "sessionId": other})
        sid = a.request("thread/resume", {"threadId": tid})["session"]["sessionId"]
        for batch in _batches(3, size=2):
            last = record(a, tid, sid, *batch)["lastSeq"]
    got = _follows_up_to(a, tid, last)
    stored = a.request("thread/read", {"threadId": tid, "limit": 10_000})["items"]
    # Everything after the first record's session_meta: nothing missing, nothing twice.
    assert [i["seq"] for i in got] == [i["seq"] for i in stored][1:]
    assert [i["id"] for i in got] == [i["id"] for i in stored][1:]


def test_a_follower_misses_nothing_while_its_listener_is_cut_off(
    machines: Machines, store_url: str, tmp_path: Path
) -> None:
    """A's LISTEN connection is terminated and cannot come back for a while (its role may
    not log in): every notification of B's records meanwhile is lost. Once A listens again,
    its follower gets each of those items once, in order, after the ones it had."""
    b = machines("b")
    tid, sid = start(b, tmp_path)  # b made the schema: the tables belong to the owner
    role = f"machine_a_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(store_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN IN ROLE {pg_cluster.SUPERUSER}")
    a: ServerProcess | None = None
    try:
        a = machines("a", store=store_url.replace(f"{pg_cluster.SUPERUSER}@", f"{role}@"))
        a.request("thread/subscribe", {"threadId": tid})

        def listener() -> list[Any]:
            with psycopg.connect(store_url, autocommit=True) as conn:
                return conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE usename = %s AND query LIKE 'LISTEN%%'",
                    (role,),
                ).fetchall()

        eventually(listener, "a listens")
        before = record(b, tid, sid, *_batches(1, size=2)[0])
        _follows_up_to(a, tid, before["lastSeq"])
        with psycopg.connect(store_url, autocommit=True) as admin:
            admin.execute(f"ALTER ROLE {role} NOLOGIN")
            admin.execute("SELECT pg_terminate_backend(%s)", listener()[0])
        eventually(lambda: not listener(), "a's listener is gone")
        expected = []
        for batch in [*_batches(5, size=3), *_batches(2, size=750), *_batches(5)]:
            expected += [i["id"] for i in batch]
            last = record(b, tid, sid, *batch)["lastSeq"]
        assert not listener()  # every notification of those records went to nobody on a
        assert _recorded(a, tid)[-1]["seq"] == before["lastSeq"]
        with psycopg.connect(store_url, autocommit=True) as admin:
            admin.execute(f"ALTER ROLE {role} LOGIN")
        got = _follows_up_to(a, tid, last)
        assert [i["seq"] for i in got] == list(range(before["firstSeq"], last + 1))
        assert [i["id"] for i in got][2:] == expected
        # 1,520 items missed: paged (at most 1,000 a notification), not one giant message.
        caught_up = [n["params"]["items"] for n in a.notifications
                     if n["method"] == "item/recorded"][1:]  # fmt: skip
        assert len(caught_up) >= 2 and max(len(items) for items in caught_up) <= 1000
    finally:
        for server in (a, b):
            if server is not None:
                server.close()  # the role's sessions end before it is dropped
        with psycopg.connect(store_url, autocommit=True) as admin:
            admin.execute(f"DROP ROLE IF EXISTS {role}")


def test_an_unfollowed_thread_sends_no_items_and_costs_no_read(
    machines: Machines, tmp_path: Path
) -> None:
    """B writes two threads; A's client follows one. The other's changes still reach A as
    `thread/updated`, but send no `item/recorded` and make A read no rows for it."""
    b = machines("b")
    a = machines("a", SESSIOND_DEBUG="1")
    followed, sid = start(b, tmp_path)
    other, other_sid = start(b, tmp_path / "other")
    a.request("thread/subscribe", {"threadId": followed})
    first = record(b, followed, sid, message("followed one"))
    _follows_up_to(a, followed, first["lastSeq"])
    reads = a.request("sessiond/debug")["relayReads"]
    for batch in _batches(20, size=2):
        record(b, other, other_sid, *batch)
    second = record(b, followed, sid, message("followed two"))  # NOTIFYs come in order
    got = _follows_up_to(a, followed, second["lastSeq"])
    assert [i["content"] for i in got] == ["followed one", "followed two"]
    assert a.request("sessiond/debug")["relayReads"] == reads + 1  # the followed thread's
    assert _recorded(a, other) == []
    eventually(
        lambda: any(n["params"]["thread"]["threadId"] == other
                    for n in a.notifications if n["method"] == "thread/updated"),
        "a hears that the other thread changed",
    )  # fmt: skip
    a.request("thread/unsubscribe", {"threadId": followed})
    record(b, followed, sid, message("after unsubscribe"))
    marker, _ = start(b, tmp_path / "marker")  # announced after that record (one channel)
    eventually(
        lambda: any(n["params"]["thread"]["threadId"] == marker
                    for n in a.notifications if n["method"] == "thread/started"),
        "a hears of the marker",
    )  # fmt: skip
    assert [i["content"] for i in _recorded(a, followed)] == ["followed one", "followed two"]
