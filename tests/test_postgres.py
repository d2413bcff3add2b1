"""The shared store end to end: real sessiond processes on a real PostgreSQL cluster.

Two processes with their own `$SESSIOND_HOME` stand for two machines on one database.
Faults are real too: backends terminated under a live session, the cluster stopped with
`-m immediate` and started again, a database that is not there, kill -9 of a writer.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests import pg_cluster
from tests.conftest import git
from tests.faults.helpers import message, record, start
from tests.rpc_client import REPO, RpcError, ServerProcess

pytestmark = pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
PATIENCE = 60.0  # seconds a test waits for something that must happen (not a perf limit)
Machines = Callable[..., ServerProcess]


@pytest.fixture
def machines(tmp_path: Path, store_url: str) -> Iterator[Machines]:
    """`machine("a")`: a sessiond with its own home on the test's database, initialized."""
    started: list[ServerProcess] = []

    def machine(name: str, folders: list[str] | None = None, **env: str) -> ServerProcess:
        home = tmp_path / f"home-{name}"
        home.mkdir(exist_ok=True)
        server = ServerProcess(home, env={"SESSIOND_STORE": store_url, **env})
        started.append(server)
        server.initialize(folders)
        return server

    yield machine
    for server in started:
        server.close()


def eventually(check: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + PATIENCE
    while True:
        try:
            if result := check():
                return result
        except RpcError as exc:
            if exc.kind != "StorageError" or not exc.data.get("retryable"):
                raise
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.1)


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
        versions = conn.execute("SELECT version FROM sessiond_migrations").fetchall()
        assert versions == [(1,)]


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
    assert line.startswith("sessiond: StorageError: cannot reach PostgreSQL at "), line


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
        cli = sessiond_cli("--home", str(home), "--store", url, "list",
                           env={"SESSIOND_LOG": "DEBUG"})  # fmt: skip
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
    from tests.acp_editor import fake_agent, sessiond_acp

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


def test_import_follow_and_a_store_of_another_kind_are_refused_in_one_line(
    store_url: str, tmp_path: Path
) -> None:
    sources = tmp_path / "claude"
    sources.mkdir()
    for args in (["import", "claude", "--from", str(sources)], ["serve", "--follow", "claude"]):
        done = sessiond_cli("--home", str(tmp_path / "h"), *args, env={"SESSIOND_STORE": store_url})
        assert done.returncode == 2 and done.stdout == ""
        [line] = done.stderr.splitlines()
        assert "imports into the embedded store" in line and "sessiond migrate --to" in line
        assert store_url not in line
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
    from restore.paths import Layout
    from restore.store import Durability
    from restore.stores import open_store
    from restore.threads import ThreadService

    def machine(name: str) -> ThreadService:
        layout = Layout(tmp_path / name)
        return ThreadService(layout, store=open_store(store_url, layout, Durability.FSYNC))

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
