"""Who may see what on a shared store: PostgreSQL row-level security, with two real roles.

The schema is created by an administrator (the cluster's superuser, standing for the
owner role docs/storage.md describes); two login roles, neither a superuser nor BYPASSRLS,
get the grants the docs give and run their own sessiond. The database, not sessiond,
enforces who may write: the same refusals hold for plain SQL on the roles' own
connections. Default visibility `team`: everyone reads every thread, only the role that
created one writes, archives or deletes it. `private` (one row in `sessiond_settings`):
a role sees only its own threads, their items and its blobs.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.faults.helpers import record, sessiond, start
from tests.support import pg_cluster, wait
from tests.support.items import message
from tests.support.rpc_client import RpcError, ServerProcess

pytestmark = pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
TABLES = "sessiond_threads, sessiond_items, sessiond_snapshots, sessiond_blobs, sessiond_holders"


@pytest.fixture
def roles(store_url: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    """Store URLs of two roles, `ana` and `ben`, members of one group with the documented
    grants, on a database whose schema the administrator created."""
    admin = tmp_path / "admin-home"
    admin.mkdir()
    created = subprocess_doctor(admin, store_url)
    assert created.returncode == 0, created.stderr
    with two_roles(store_url) as urls:
        yield urls


@contextmanager
def two_roles(store_url: str) -> Iterator[dict[str, str]]:
    """`ana` and `ben` with the grants docs/storage.md gives, dropped afterwards."""
    suffix = uuid.uuid4().hex[:8]
    group, names = f"sessiond_users_{suffix}", {"ana": f"ana_{suffix}", "ben": f"ben_{suffix}"}
    with psycopg.connect(store_url, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{group}" NOLOGIN')
        conn.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON {TABLES} TO "{group}"')
        conn.execute(f'GRANT SELECT ON sessiond_migrations, sessiond_settings TO "{group}"')
        for role in names.values():
            conn.execute(f'CREATE ROLE "{role}" LOGIN IN ROLE "{group}"')
    user = f"{pg_cluster.SUPERUSER}@"
    try:
        yield {who: store_url.replace(user, f"{role}@", 1) for who, role in names.items()}
    finally:
        with psycopg.connect(store_url, autocommit=True) as conn:
            for role in [*names.values(), group]:
                conn.execute(f'DROP OWNED BY "{role}"')
                conn.execute(f'DROP ROLE "{role}"')


def subprocess_doctor(home: Path, url: str) -> Any:
    return sessiond(home, "--store", url, "doctor")


def server_as(tmp_path: Path, name: str, url: str) -> ServerProcess:
    home = tmp_path / f"home-{name}"
    home.mkdir()
    server = ServerProcess(home, env={"SESSIOND_STORE": url})
    server.initialize()
    return server


def refused(server: ServerProcess, method: str, params: dict[str, Any]) -> RpcError:
    with pytest.raises(RpcError) as failed:
        server.request(method, params)
    return failed.value


def searched(server: ServerProcess, query: str) -> set[str]:
    """The threads `thread/search` finds the query in, for this server's role."""
    return {hit["threadId"] for hit in server.request("thread/search", {"query": query})["hits"]}


def owners(store_url: str) -> dict[str, str | None]:
    with psycopg.connect(store_url, autocommit=True) as conn:
        rows = conn.execute("SELECT thread_id::text, owner_role FROM sessiond_threads").fetchall()
    return dict(rows)


def test_everyone_reads_only_the_owner_writes_and_private_hides_the_others(
    roles: dict[str, str], store_url: str, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    ana, ben = server_as(tmp_path, "ana", roles["ana"]), server_as(tmp_path, "ben", roles["ben"])
    try:
        tid, sid = start(ana, work, title="ana's thread")
        record(ana, tid, sid, message("written by ana"))
        edit = {"threadId": tid, "sessionId": sid, "operationId": "op-1",
                "path": str(work / "notes.txt"), "content": "ana's file\n"}  # fmt: skip
        assert ana.request("fs/applyEdit", edit)["outcome"] == "applied"  # a blob of ana's
        ana.request("thread/close", {"threadId": tid, "sessionId": sid})
        [before] = [t for t in ana.request("thread/list", {})["threads"] if t["threadId"] == tid]

        # team (the default): ben reads ana's thread ...
        assert tid in [t["threadId"] for t in ben.request("thread/list", {})["threads"]]
        items = ben.request("thread/read", {"threadId": tid})["items"]
        assert "written by ana" in [i.get("content") for i in items]
        # ... and may not write, resume, retitle, archive or delete it: typed, and unchanged
        for method, params in (
            ("thread/resume", {"threadId": tid}),
            ("thread/setTitle", {"threadId": tid, "title": "ben's now"}),
            ("thread/archive", {"threadId": tid}),
            ("thread/delete", {"threadId": tid}),
        ):
            error = refused(ben, method, params)
            assert error.kind == "Unauthorized", (method, error.kind, error.message)
        [after] = [t for t in ana.request("thread/list", {})["threads"] if t["threadId"] == tid]
        assert after == before and (after["title"], after["archived"]) == ("ana's thread", False)
        report = ana.request("thread/resume", {"threadId": tid})  # its owner still may
        assert report["status"] == "ready"
        record(ana, tid, report["session"]["sessionId"], message("ana goes on"))
        ben_tid, ben_sid = start(ben, work, title="ben's thread")
        record(ben, ben_tid, ben_sid, message("written by ben"))
        # The database recorded who created each thread.
        ana_role, ben_role = (url.split("//", 1)[1].split("@", 1)[0] for url in roles.values())
        assert owners(store_url) == {tid: ana_role, ben_tid: ben_role}

        # The database enforces it, not sessiond: plain SQL on ben's own connection.
        with psycopg.connect(roles["ben"], autocommit=True) as conn:
            assert conn.execute("DELETE FROM sessiond_threads WHERE thread_id = %s",
                                (tid,)).rowcount == 0  # fmt: skip
            assert conn.execute("UPDATE sessiond_threads SET owner_role = current_user "
                                "WHERE thread_id = %s", (tid,)).rowcount == 0  # fmt: skip
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("INSERT INTO sessiond_items (thread_id, seq, item_id, line) "
                             "VALUES (%s, 1000, 'forged', '{}')", (tid,))  # fmt: skip
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("UPDATE sessiond_settings SET value = 'team'")
        assert owners(store_url)[tid] == ana_role

        # Search is held to the same policies (the search columns are sessiond_items'):
        # in a team every role finds every thread's words.
        assert searched(ben, '"written by ana"') == {tid}
        assert searched(ana, "written") == {tid, ben_tid}

        # private: each role sees only its own threads, their items and its blobs.
        with psycopg.connect(store_url, autocommit=True) as conn:
            conn.execute("UPDATE sessiond_settings SET value = 'private' WHERE name = 'visibility'")
        assert searched(ben, "written") == {ben_tid} and searched(ben, "ana") == set()
        assert searched(ana, "written") == {tid}
        assert [t["threadId"] for t in ben.request("thread/list", {})["threads"]] == [ben_tid]
        assert [t["threadId"] for t in ana.request("thread/list", {})["threads"]] == [tid]
        assert refused(ben, "thread/read", {"threadId": tid}).kind == "ThreadNotFound"
        with psycopg.connect(roles["ben"], autocommit=True) as conn:
            for table in ("sessiond_items", "sessiond_snapshots", "sessiond_threads"):
                seen = conn.execute(f"SELECT count(*) FROM {table} WHERE thread_id = %s",
                                    (tid,)).fetchone()  # fmt: skip
                assert seen == (0,), table
            assert conn.execute("SELECT count(*) FROM sessiond_blobs").fetchone() == (0,)
        with psycopg.connect(roles["ana"], autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM sessiond_blobs").fetchone()[0] >= 1
    finally:
        ana.close()
        ben.close()


def test_a_role_without_ddl_rights_uses_a_schema_the_owner_created(
    roles: dict[str, str], tmp_path: Path
) -> None:
    """Everyday roles have no CREATE on the schema: their first connection must not try
    DDL for a schema that is already up to date."""
    ana = server_as(tmp_path, "ana", roles["ana"])
    try:
        tid, _ = start(ana, tmp_path / "work")
        assert [t["threadId"] for t in ana.request("thread/list", {})["threads"]] == [tid]
    finally:
        ana.close()


def test_private_a_file_edit_naming_another_roles_blob_reads_nothing_of_it(
    roles: dict[str, str], store_url: str, tmp_path: Path
) -> None:
    """thread/readBlob answers through an edit of the thread (tests/security/
    test_blob_access.py); a role may record a file_edit naming any sha, but under `private`
    the database keeps another role's blob from it: content not recorded."""
    work = tmp_path / "work"
    work.mkdir()
    ana, ben = server_as(tmp_path, "ana", roles["ana"]), server_as(tmp_path, "ben", roles["ben"])
    try:
        tid, sid = start(ana, work)
        edit = {"threadId": tid, "sessionId": sid, "operationId": "op-1",
                "path": str(work / "key.txt"), "content": "ana's secret\n"}  # fmt: skip
        assert ana.request("fs/applyEdit", edit)["outcome"] == "applied"
        [ana_edit] = [i for i in ana.request("thread/read", {"threadId": tid})["items"]
                      if i["type"] == "file_edit"]  # fmt: skip
        with psycopg.connect(store_url, autocommit=True) as conn:
            conn.execute("UPDATE sessiond_settings SET value = 'private' WHERE name = 'visibility'")
        ben_tid, ben_sid = start(ben, work)
        forged = {"type": "file_edit", "path": str(work / "key.txt"), "beforeSha": None,
                  "afterSha": ana_edit["afterSha"]}  # fmt: skip
        seq = record(ben, ben_tid, ben_sid, forged)["lastSeq"]
        read = {"threadId": ben_tid, "seq": seq, "sha": ana_edit["afterSha"]}
        assert ben.request("thread/readBlob", read) == {
            "recorded": False, "content": None, "encoding": None, "size": None}  # fmt: skip
        own = {"threadId": tid, "seq": ana_edit["seq"], "sha": ana_edit["afterSha"]}
        assert ana.request("thread/readBlob", own)["content"] == "ana's secret\n"
    finally:
        ana.close()
        ben.close()


def test_who_holds_a_thread_is_read_where_the_thread_is_and_written_only_by_its_role(
    roles: dict[str, str], store_url: str, tmp_path: Path
) -> None:
    """sessiond_holders names the client holding a thread's lock for ThreadBusy: held to
    the threads' policies (migration 005), so a role can neither see under `private` who
    holds another's threads, nor rename, remove or forge a holder of a thread it may not
    write."""
    work = tmp_path / "work"
    work.mkdir()
    ana, ben = server_as(tmp_path, "ana", roles["ana"]), server_as(tmp_path, "ben", roles["ben"])
    try:
        tid, _ = start(ana, work)  # ana holds it open
        held = "SELECT holder FROM sessiond_holders WHERE thread_id = %s"
        with psycopg.connect(roles["ana"], autocommit=True) as conn:
            [(holder,)] = conn.execute(held, (tid,)).fetchall()
        assert holder.startswith("pytest")
        with psycopg.connect(roles["ben"], autocommit=True) as conn:
            assert conn.execute(held, (tid,)).fetchall() == [(holder,)]  # team: ben reads it
            assert conn.execute("UPDATE sessiond_holders SET holder = 'ben' "
                                "WHERE thread_id = %s", (tid,)).rowcount == 0  # fmt: skip
            assert conn.execute("DELETE FROM sessiond_holders").rowcount == 0
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("INSERT INTO sessiond_holders (thread_id, holder, backend_pid) "
                             "VALUES (%s, 'forged', 1)", (tid,))  # fmt: skip
        # ana's next machine is told who holds it, by the name ana's server gave
        second = server_as(tmp_path, "ana-laptop", roles["ana"])
        try:
            busy = refused(second, "thread/resume", {"threadId": tid})
            assert busy.kind == "ThreadBusy" and holder in busy.message, busy.message
        finally:
            second.close()

        with psycopg.connect(store_url, autocommit=True) as conn:
            conn.execute("UPDATE sessiond_settings SET value = 'private' WHERE name = 'visibility'")
        with psycopg.connect(roles["ben"], autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM sessiond_holders").fetchone() == (0,)
        with psycopg.connect(roles["ana"], autocommit=True) as conn:
            assert conn.execute(held, (tid,)).fetchall() == [(holder,)]
    finally:
        ana.close()
        ben.close()


# --- notifications under `private` ------------------------------------------------------------


def role_of(url: str) -> str:
    return url.split("//", 1)[1].split("@", 1)[0]


def listening(store_url: str, role: str) -> bool:
    """A backend of the role has LISTENed (as the administrator sees pg_stat_activity)."""
    with psycopg.connect(store_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE usename = %s AND query LIKE 'LISTEN%%'",
            (role,),
        ).fetchone()
    return bool(row and row[0])


class Eavesdropper:
    """A role's own plain connection, not sessiond: it LISTENs on `sessiond` and on every
    channel it can find named anywhere it may read (the query texts pg_stat_activity shows
    it, its rows of every sessiond_* table), as an attacker with the role's login would."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(url, autocommit=True)
        self.payloads: list[str] = []
        self.channels = {"sessiond"}
        for text in self.readable():
            self.channels.update(re.findall(r'LISTEN\s+"?([A-Za-z0-9_]+)"?', text))
            self.channels.update(re.findall(r"sessiond_[0-9a-f]{32}", text))
        for channel in sorted(self.channels):
            self.conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))

    def readable(self) -> list[str]:
        """Every row of pg_stat_activity and of each sessiond_* table the role may read."""
        tables = [name for (name,) in self.conn.execute(
            "SELECT tablename FROM pg_tables WHERE tablename LIKE 'sessiond%%' "
            "AND has_table_privilege(tablename, 'SELECT')")]  # fmt: skip
        rows = [str(r) for r in self.conn.execute("SELECT * FROM pg_stat_activity")]
        for table in tables:
            query = sql.SQL("SELECT * FROM {}").format(sql.Identifier(table))
            rows += [str(r) for r in self.conn.execute(query)]
        return rows

    def hears(self, needle: str) -> bool:
        for note in self.conn.notifies(timeout=0.1):
            self.payloads.append(note.payload)
        return any(needle in payload for payload in self.payloads)

    def close(self) -> None:
        self.conn.close()


def test_private_a_role_listening_hears_nothing_of_another_roles_threads(
    roles: dict[str, str], store_url: str, tmp_path: Path
) -> None:
    """LISTEN needs no privilege: under `private`, ben listening on every channel he can
    name must learn nothing of ana's threads (not their ids, not when they are written),
    while ana's own second machine hears every change of hers, and ben's of his. The
    setting is switched while every process runs (each notification reads it)."""
    work = tmp_path / "work"
    work.mkdir()
    ana, ben = server_as(tmp_path, "ana", roles["ana"]), server_as(tmp_path, "ben", roles["ben"])
    ana_laptop = server_as(tmp_path, "ana-laptop", roles["ana"])
    ben_laptop = server_as(tmp_path, "ben-laptop", roles["ben"])
    spy: Eavesdropper | None = None
    try:
        for server in (ana_laptop, ben, ben_laptop):
            server.request("thread/list", {})  # each listens from its first request
        for role in (role_of(roles["ana"]), role_of(roles["ben"])):
            wait.eventually(lambda role=role: listening(store_url, role), f"{role} listens")
        spy = Eavesdropper(roles["ben"])
        # team (the default): every role may read every thread, and hears of each
        team_tid, _ = start(ana, work)
        wait.eventually(lambda: spy.hears(team_tid), "team: ben hears of ana's thread")
        # private, switched while every process runs: read at each notification
        with psycopg.connect(store_url, autocommit=True) as conn:
            conn.execute("UPDATE sessiond_settings SET value = 'private' WHERE name = 'visibility'")
        spy.payloads.clear()

        def heard(server: ServerProcess, thread_id: str, check: Any) -> bool:
            return any(n["params"]["thread"]["threadId"] == thread_id and check(n["params"])
                       for n in list(server.notifications)
                       if n["method"] in ("thread/started", "thread/updated"))  # fmt: skip

        # ana's threads started, recorded, retitled, archived, deleted: her other machine
        # hears each change (so each was notified), one after the other
        tid, sid = start(ana, work)
        kept, kept_sid = start(ana, work)
        for change, what, check in (
            (lambda: record(ana, tid, sid, message("ana's private words")), "recorded",
             lambda p: p["thread"].get("itemCount") == 1),
            (lambda: ana.request("thread/setTitle", {"threadId": tid, "title": "ana's plans"}),
             "retitled", lambda p: p["thread"].get("title") == "ana's plans"),
            (lambda: ana.request("thread/archive", {"threadId": tid}), "archived",
             lambda p: p["thread"].get("archived") is True),
            (lambda: ana.request("thread/delete", {"threadId": tid}), "deleted",
             lambda p: p.get("deleted") is True),
        ):  # fmt: skip
            change()
            wait.eventually(lambda c=check: heard(ana_laptop, tid, c), f"ana's laptop: {what}")
        record(ana, kept, kept_sid, message("still here"))
        wait.eventually(lambda: heard(ana_laptop, kept, lambda p: p["thread"]["itemCount"] == 1),
                        "ana's laptop: the other thread recorded")  # fmt: skip

        # ... and ben's own threads still reach ben's other machine at once
        ben_tid, ben_sid = start(ben, work)
        record(ben, ben_tid, ben_sid, message("ben's words"))
        ben.request("thread/delete", {"threadId": ben_tid})
        wait.eventually(lambda: heard(ben_laptop, ben_tid, lambda p: p.get("deleted") is True),
                        "ben's other machine hears his thread deleted")  # fmt: skip
        assert not any(heard(server, t, lambda p: True)
                       for server in (ben, ben_laptop) for t in (tid, kept)), \
            "ben's sessiond told ben's clients of ana's threads"  # fmt: skip

        # The eavesdropper hears ben's own changes (its listening works; they came after
        # all of ana's, and notifications arrive in commit order), and nothing of ana's.
        wait.eventually(lambda: spy.hears(ben_tid), "the eavesdropper hears ben's thread")
        for thread_id in (tid, kept, team_tid):
            assert not any(thread_id in payload for payload in spy.payloads), spy.payloads
        assert all(ben_tid in payload for payload in spy.payloads), spy.payloads
        # ana's channel is named nowhere ben may look (nor ana's thread ids)
        with psycopg.connect(roles["ana"], autocommit=True) as conn:
            [(ana_channel,)] = conn.execute("SELECT channel FROM sessiond_channels").fetchall()
        seen = "\n".join(spy.readable())
        assert ana_channel not in spy.channels and ana_channel not in seen
        assert kept not in seen and ben_tid not in spy.channels
    finally:
        if spy is not None:
            spy.close()
        for server in (ana, ana_laptop, ben, ben_laptop):
            server.close()


def test_a_database_of_schema_5_upgraded_by_its_owner_needs_no_new_grant_for_channels(
    store_url: str, tmp_path: Path
) -> None:
    """Roles granted as the docs said before schema 6 (nothing on sessiond_channels): once
    the owner brings the schema up to date, each role makes its own channel's row at its
    first connection, and under `private` a role's two machines hear each other. Another
    role may neither read, delete nor forge that row; its own role may delete it (to have
    a new name made)."""
    from restore.stores.postgres import schema

    with psycopg.connect(store_url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE sessiond_migrations (version integer PRIMARY KEY,"
            " name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for migration in schema.available()[:5]:
            conn.execute(migration.path.read_text())  # type: ignore[arg-type]
            conn.execute("INSERT INTO sessiond_migrations (version, name) VALUES (%s, %s)",
                         (migration.version, migration.name))  # fmt: skip
        conn.execute("UPDATE sessiond_settings SET value = 'private' WHERE name = 'visibility'")
    with two_roles(store_url) as roles:
        admin = tmp_path / "admin-home"
        admin.mkdir()
        upgraded = subprocess_doctor(admin, store_url)
        assert upgraded.returncode == 0, upgraded.stderr
        with psycopg.connect(store_url, autocommit=True) as conn:
            versions = conn.execute("SELECT version FROM sessiond_migrations ORDER BY 1")
            assert [v for (v,) in versions] == [m.version for m in schema.available()]
        ana = server_as(tmp_path, "ana", roles["ana"])
        laptop = server_as(tmp_path, "ana-laptop", roles["ana"])
        try:
            laptop.request("thread/list", {})
            wait.eventually(lambda: listening(store_url, role_of(roles["ana"])), "ana listens")
            tid, _ = start(ana, tmp_path / "work")
            wait.eventually(
                lambda: any(n["params"]["thread"]["threadId"] == tid
                            for n in laptop.wait_notification("thread/started")),
                "ana's laptop hears of her thread",
            )  # fmt: skip
            with psycopg.connect(roles["ana"], autocommit=True) as conn:
                [(channel,)] = conn.execute("SELECT channel FROM sessiond_channels").fetchall()
            assert re.fullmatch(r"sessiond_[0-9a-f]{32}", channel)
            with psycopg.connect(roles["ben"], autocommit=True) as conn:  # not ana's row
                assert conn.execute("SELECT channel FROM sessiond_channels").fetchall() == []
                assert conn.execute("DELETE FROM sessiond_channels").rowcount == 0
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute("INSERT INTO sessiond_channels (owner_role) VALUES (%s)",
                                 (role_of(roles["ana"]),))  # fmt: skip
            with psycopg.connect(roles["ana"], autocommit=True) as conn:  # hers to replace
                assert conn.execute("SELECT channel FROM sessiond_channels").fetchall() == [
                    (channel,)
                ]
                assert conn.execute("DELETE FROM sessiond_channels").rowcount == 1
        finally:
            ana.close()
            laptop.close()


def test_private_a_role_without_a_channel_notifies_nothing_rather_than_the_team_channel(
    roles: dict[str, str], store_url: str, tmp_path: Path
) -> None:
    """The owner took `sessiond_channels` from every role (REVOKE ... FROM PUBLIC): ana's
    sessiond still records, notifies on `sessiond` under `team`, and under `private` sends
    nothing at all rather than her threads on the team channel."""
    with psycopg.connect(store_url, autocommit=True) as conn:
        conn.execute("REVOKE ALL ON sessiond_channels FROM PUBLIC")
    spy = Eavesdropper(roles["ben"])
    ana = server_as(tmp_path, "ana", roles["ana"])
    try:
        team_tid, _ = start(ana, tmp_path / "work")
        wait.eventually(lambda: spy.hears(team_tid), "team: ben hears of ana's thread")
        with psycopg.connect(store_url, autocommit=True) as conn:
            conn.execute("UPDATE sessiond_settings SET value = 'private' WHERE name = 'visibility'")
        tid, sid = start(ana, tmp_path / "work")
        record(ana, tid, sid, message("ana's private words"))
        ana.request("thread/setTitle", {"threadId": tid, "title": "ana's plans"})
        assert [i.get("content") for i in ana.request("thread/read", {"threadId": tid})["items"]
                if i["type"] == "message"] == ["ana's private words"]  # fmt: skip
        with psycopg.connect(store_url, autocommit=True) as conn:  # after all of ana's commits
            conn.execute("SELECT pg_notify('sessiond', 'marker')")
        wait.eventually(lambda: spy.hears("marker"), "the eavesdropper hears the marker")
        assert not any(tid in payload for payload in spy.payloads), spy.payloads
    finally:
        spy.close()
        ana.close()


def test_private_another_roles_open_thread_is_not_found_like_a_random_id(
    roles: dict[str, str], store_url: str, tmp_path: Path
) -> None:
    """Issue 34: under `private`, ben touching a thread ana holds open got `ThreadBusy …`
    naming ana's client, host and pid, where a random id gets "not found": the error
    confirmed the thread and named ana's machine. Now both are the same "not found"."""
    work = tmp_path / "work"
    work.mkdir()
    ana, ben = server_as(tmp_path, "ana", roles["ana"]), server_as(tmp_path, "ben", roles["ben"])
    try:
        with psycopg.connect(store_url, autocommit=True) as conn:
            conn.execute("UPDATE sessiond_settings SET value = 'private' WHERE name = 'visibility'")
        tid, sid = start(ana, work, title="ana's thread")  # open: ana's lock is held
        record(ana, tid, sid, message("ana is writing"))
        random_id = str(uuid.uuid4())
        for method in ("thread/resume", "thread/archive", "thread/delete", "thread/setTitle"):
            params: dict[str, Any] = {"threadId": tid}
            if method == "thread/setTitle":
                params["title"] = "ben's"
            held = refused(ben, method, params)
            unknown = refused(ben, method, {**params, "threadId": random_id})
            assert (
                (held.kind, held.code)
                == (unknown.kind, unknown.code)
                == ("ThreadNotFound", unknown.code)
            ), (method, held.message)
            assert held.message == unknown.message.replace(random_id, tid)
            assert held.data == {**unknown.data, "threadId": tid}
            assert "pid" not in held.message and "host" not in str(held.data)
        assert ana.request("thread/read", {"threadId": tid})["items"]  # ana's is untouched
    finally:
        ana.close()
        ben.close()


def test_each_role_continues_a_session_key_in_threads_of_its_own(
    roles: dict[str, str], tmp_path: Path
) -> None:
    """`team`: ben reads ana's keyed thread but may not write it, so the key's current
    thread for ben is one of his own; each goes on in their own. `private` alike."""
    work = tmp_path / "work"
    work.mkdir()
    ana, ben = server_as(tmp_path, "ana", roles["ana"]), server_as(tmp_path, "ben", roles["ben"])
    params = {"sessionKey": "direct:carol", "cwd": str(work)}
    try:
        first = ana.request("thread/continue", params)
        ana.request("thread/close", {"threadId": first["thread"]["threadId"],
                                     "sessionId": first["sessionId"]})  # fmt: skip
        bens = ben.request("thread/continue", params)
        assert bens["reason"] == "startup"
        assert bens["thread"]["threadId"] != first["thread"]["threadId"]
        again = ana.request("thread/continue", params)
        assert again["reason"] == "resume"
        assert again["thread"]["threadId"] == first["thread"]["threadId"]
        listed = ben.request("thread/list", {"sessionKey": "direct:"})["threads"]
        assert len(listed) == 2  # team: both are read, each role writes its own
    finally:
        ana.close()
        ben.close()
