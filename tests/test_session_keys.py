"""Session keys: set at `thread/start`, kept in the thread's records, carried on every row,
listed by prefix and shown by the command line, on both stores."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from restore.keys import key_range, lock_name
from tests.conftest import BOTH_STORES
from tests.faults.helpers import Spawn, list_all, sessiond, start
from tests.support.rpc_client import RpcError, ServerProcess

KEYS = [
    "direct:ana",
    "direct:anabel",
    "direct:bob",
    "group:ops:ana",
    "workspace:/src/app#main",
    "direct:ana\U0010ffff",  # the last code point: its prefix's range has no upper bound
    "direct:anä",
]

# Any text a key may be: printable, and UTF-8 (no lone surrogates).
key_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=0, max_size=6
)


@given(prefix=key_text, key=key_text)
def test_a_prefix_s_range_holds_exactly_the_keys_starting_with_it(prefix: str, key: str) -> None:
    low, high = key_range(prefix)
    inside = low <= key and (high is None or key < high)
    assert inside == key.startswith(prefix)


@given(prefix=key_text.filter(bool), keys=st.lists(key_text.filter(bool), max_size=8))
def test_sqlite_compares_keys_as_the_range_assumes(prefix: str, keys: list[str]) -> None:
    """SQLite's BINARY collation (UTF-8 bytes) orders keys as code points do: the range
    finds what `startswith` finds."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE TABLE t (k TEXT)")
        conn.executemany("INSERT INTO t VALUES (?)", [(k,) for k in keys])
        low, high = key_range(prefix)
        sql, params = "SELECT k FROM t WHERE k >= ?", [low]
        if high is not None:
            sql, params = sql + " AND k < ?", [low, high]
        found = sorted(row[0] for row in conn.execute(sql, params))
    finally:
        conn.close()
    assert found == sorted(k for k in keys if k.startswith(prefix))


def test_a_lock_name_is_a_digest_never_a_path() -> None:
    assert lock_name("../../etc/passwd") == lock_name("../../etc/passwd")
    assert len(lock_name("direct:ana")) == 64 and "/" not in lock_name("a/b")


# --- over the wire, on both stores ------------------------------------------------------


def _keys(rows: list[dict[str, Any]]) -> list[str | None]:
    return sorted((row["sessionKey"] for row in rows), key=str)


@BOTH_STORES
def test_start_keeps_the_key_in_the_record_the_row_and_the_listing_by_prefix(
    spawn: Spawn, home: Path, tmp_path: Path, store_url: str | None
) -> None:
    server = spawn()
    server.initialize()
    ids = {}
    for key in KEYS:
        tid, _ = start(server, tmp_path / "ws", sessionKey=key)
        ids[key] = tid
    plain, _ = start(server, tmp_path / "ws")
    first = server.request("thread/read", {"threadId": ids["direct:ana"], "limit": 1})["items"]
    assert first[0]["type"] == "session_meta" and first[0]["sessionKey"] == "direct:ana"

    def listed(prefix: str) -> list[str | None]:
        return _keys(list_all(server, sessionKey=prefix))

    assert listed("direct:ana") == sorted(["direct:ana", "direct:ana\U0010ffff", "direct:anabel"])
    assert listed("direct:an") == sorted(
        ["direct:ana", "direct:ana\U0010ffff", "direct:anabel", "direct:anä"]
    )
    assert listed("direct:ana\U0010ffff") == ["direct:ana\U0010ffff"]
    assert listed("Direct:") == []  # exact, case-sensitive
    assert listed("") == sorted(KEYS)  # every keyed thread, the plain one not
    everything = list_all(server)
    assert {row["threadId"] for row in everything} == {*ids.values(), plain}
    row = next(r for r in everything if r["threadId"] == ids["workspace:/src/app#main"])
    assert row["sessionKey"] == "workspace:/src/app#main"
    assert row["previousThreadId"] is None and row["nextThreadId"] is None
    server.shutdown()
    if store_url is None:  # the files are the truth: a lost index is rebuilt with the keys
        for suffix in ("", "-wal", "-shm"):
            (home / f"index.sqlite3{suffix}").unlink(missing_ok=True)
    again = spawn()
    again.initialize()
    assert _keys(list_all(again, sessionKey="direct:ana")) == sorted(
        ["direct:ana", "direct:ana\U0010ffff", "direct:anabel"]
    )
    again.shutdown()


@BOTH_STORES
def test_a_sub_agent_s_keyed_thread_is_listed_by_its_key(
    server: ServerProcess, tmp_path: Path
) -> None:
    parent, _ = start(server, tmp_path / "ws", sessionKey="direct:ana")
    child, _ = start(
        server, tmp_path / "ws", parentThreadId=parent, sessionKey="agent:a1:subagent:x"
    )
    assert [r["threadId"] for r in list_all(server)] == [parent]  # under its parent
    assert [r["threadId"] for r in list_all(server, sessionKey="agent:")] == [child]


@BOTH_STORES
@pytest.mark.parametrize("key", ["", "x" * 513, "direct:\x1b[31mana", "nul\x00"])
def test_a_key_out_of_shape_is_refused_by_name_and_nothing_is_started(
    server: ServerProcess, tmp_path: Path, key: str
) -> None:
    (tmp_path / "ws").mkdir()
    with pytest.raises(RpcError) as refused:
        server.request("thread/start", {"cwd": str(tmp_path / "ws"), "sessionKey": key})
    assert refused.value.kind == "InvalidParams"
    assert "sessionKey" in json.dumps(refused.value.data)
    assert list_all(server) == []


@BOTH_STORES
def test_the_command_line_lists_by_key_and_shows_it(
    server: ServerProcess, home: Path, tmp_path: Path, store_url: str | None
) -> None:
    keyed, _ = start(server, tmp_path / "ws", sessionKey="direct:ana", title="ana's chat")
    start(server, tmp_path / "ws", title="plain")
    server.shutdown()
    store = ["--store", store_url] if store_url else []
    listed = sessiond(home, *store, "list", "--key", "direct:")
    assert listed.returncode == 0, listed.stderr
    assert "KEY" in listed.stdout and "direct:ana" in listed.stdout
    assert keyed in listed.stdout and "plain" not in listed.stdout
    shown = sessiond(home, *store, "show", keyed)
    assert shown.returncode == 0, shown.stderr
    assert "session key direct:ana" in shown.stdout
    quiet = sessiond(home, *store, "list", "--key", "nobody:", "-q")
    assert quiet.returncode == 0 and quiet.stdout == ""


def test_a_key_spelling_a_path_locks_a_digest_and_writes_nowhere_else(
    server: ServerProcess, home: Path, tmp_path: Path
) -> None:
    (tmp_path / "ws").mkdir()
    key = "../../../escaped/there"
    answer = server.request("thread/continue", {"sessionKey": key, "cwd": str(tmp_path / "ws")})
    assert answer["reason"] == "startup" and answer["thread"]["sessionKey"] == key
    # The key is locked on a byte of one of 64 files named by numbers, never by the key:
    # no file is made for a key (nor anything beside holders' names and the index build's).
    names = {p.name for p in (home / "locks").iterdir()}
    assert lock_name(key) not in names
    assert {n for n in names if not re.fullmatch(r"[0-9a-f-]{36}\.holder|index\.build", n)} == {
        "keys"
    }
    assert all(re.fullmatch(r"[0-9a-f]{2}", p.name) for p in (home / "locks" / "keys").iterdir())
    assert not (home.parent / "escaped").exists() and not (tmp_path.parent / "escaped").exists()
