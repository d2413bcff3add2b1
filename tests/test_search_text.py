"""The searchable text of a record is the same on both stores: restore/search/text.py in
Python (the embedded store indexes it) and `sessiond_search_text`/`sessiond_search_role`
in SQL (PostgreSQL's generated columns, migration 009; the vector is the text's), held to
each other here over the
records every source writes and over random tool arguments and results, in a real
PostgreSQL database."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import orjson
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from restore.search.text import searchable
from restore.stores.postgres import schema
from restore.stores.postgres.schema import migrate
from tests.support import pg_cluster

OPERATION = {"type": "operation", "id": "o", "operationId": "c", "tool": "shell",
             "effect": "side_effect", "state": "started"}  # fmt: skip
RECORDS: list[dict[str, Any]] = [
    {"type": "message", "role": "user", "content": "hello there"},
    {"type": "message", "role": "tool", "content": "FAILED tests/test_x.py::test_y"},
    {
        "type": "message",
        "role": "tool",
        "content": [{"type": "text", "text": "a"}, {"type": "image", "data": "eA=="}],
    },
    {"type": "message", "role": "system", "content": "never searched"},
    {**OPERATION, "title": "Run tests", "command": "pytest -q"},
    {**OPERATION, "command": "ls", "input": {"command": "ls", "description": "list it"}},
    {
        **OPERATION,
        "input": {
            "file_path": "/a/b.py",
            "old_string": "x",
            "new_string": "y",
            "replace_all": False,
            "edits": [{"n": 1, "t": "deep"}],
        },
    },
    {**OPERATION, "input": "*** Begin Patch\n*** Update File: a.py"},
    {**OPERATION, "state": "committed", "result": "Traceback: KeyError 'zorp'"},
    {**OPERATION, "state": "committed", "result": {"stdout": "ok", "exit": 0}},
    {**OPERATION, "state": "committed", "result": ""},
    {**OPERATION, "state": "committed", "result": " \n\t "},
    {**OPERATION, "state": "committed", "result": None, "title": "t"},
    {
        **OPERATION,
        "title": "Read file",
        "rawInput": {"path": "/x", "limit": 3},
        "rawOutput": {"content": "line one"},
        "content": [
            {"type": "content", "content": {"type": "text", "text": "shown"}},
            {"type": "diff", "path": "p", "newSha": "s"},
            {"type": "content", "content": {"type": "image", "data": "x"}},
            {"type": "terminal", "terminalId": "t1"},
            "loose",
            ["nested"],
        ],
    },
    {**OPERATION, "content": "not a list", "rawInput": ["a", ["b", {"c": "d"}]]},
    {**OPERATION, "command": "v"},  # PostgreSQL's E'\\v' is the letter: found (schema 11)
    {**OPERATION, "command": "\v\n"},  # blank: the six ASCII spaces
    {**OPERATION, "rawInput": "\x1f"},  # not blank, though str.isspace says space
    {**OPERATION, "rawInput": "\u00a0"},
    {"type": "file_edit", "path": "src/a.py"},
    {"type": "todos", "items": [{"content": "do it"}, "x"]},
    {"type": "thread_title", "title": "A title"},
    {"type": "cost", "model": "m", "usd": 1},
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


@pytest.fixture
def conn(postgres: pg_cluster.Cluster) -> Iterator[psycopg.Connection]:
    if not postgres.running():
        postgres.start()
    name = pg_cluster.fresh_database(postgres.url())
    with psycopg.connect(postgres.url(name), autocommit=True) as connection:
        migrate(connection)
        yield connection
    pg_cluster.drop_database(postgres.url(), name)


def in_sql(conn: psycopg.Connection, item: dict[str, Any]) -> tuple[str, str] | None:
    line = orjson.dumps(item).decode()
    row = conn.execute(
        "SELECT sessiond_search_role(%s), sessiond_search_text(%s), "
        "sessiond_search_vector(%s) IS NOT DISTINCT FROM to_tsvector('simple', translate("
        "sessiond_search_text(%s), '!\"#$%%&''()*+,-./:;<=>?@[\\]^_`{|}~', "
        "'                                '))",
        (line, line, line, line),
    ).fetchone()
    assert row is not None
    assert row[2], "the vector is the text's, made as migration 004 made it"
    return None if row[1] is None else (row[0], row[1])


@pytest.mark.parametrize("item", RECORDS, ids=lambda i: f"{i['type']}")
def test_each_kind_of_record_has_the_same_text_and_role_in_sql(
    conn: psycopg.Connection, item: dict[str, Any]
) -> None:
    assert in_sql(conn, item) == searchable(item)


def test_tool_output_and_arguments_are_searchable_as_their_roles() -> None:
    """What a person remembers of a tool: its output (role `output`), its arguments."""
    assert searchable(RECORDS[1]) == ("output", "FAILED tests/test_x.py::test_y")
    assert searchable(RECORDS[5]) == ("tool", "ls\nls\nlist it")
    assert searchable(RECORDS[8]) == ("output", "Traceback: KeyError 'zorp'")
    assert searchable(RECORDS[10]) is None
    acp = searchable(RECORDS[13])
    assert acp == ("output", "Read file\n/x\nline one\nshown")


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(inputs=json_values, result=json_values, raw=json_values)
def test_random_arguments_and_results_have_the_same_text_in_sql(
    conn: psycopg.Connection, inputs: Any, result: Any, raw: Any
) -> None:
    item = {**OPERATION, "input": inputs, "rawInput": raw, "result": result}
    item = orjson.loads(orjson.dumps(item).replace(b"\\u0000", b""))  # jsonb holds no NUL
    assert in_sql(conn, item) == searchable(item)


def test_a_record_stored_before_schema_11_with_only_v_for_text_is_found_after_it(
    postgres: pg_cluster.Cluster,
) -> None:
    """Schema 9 took the letter v for a space (PostgreSQL's E'\\v'): a tool call whose
    whole text was "v" got no vector. Migration 011, applied by the schema's owner (not a
    superuser, as docs/storage.md sets roles up), gives the records a database holds
    theirs — every role's, under `private` too — as the embedded store always had."""
    if not postgres.running():
        postgres.start()
    name = pg_cluster.fresh_database(postgres.url())
    suffix = uuid.uuid4().hex[:8]
    owner, ana = f"owner_{suffix}", f"ana_{suffix}"
    user = f"{pg_cluster.SUPERUSER}@"
    as_owner = postgres.url(name).replace(user, f"{owner}@", 1)
    as_ana = postgres.url(name).replace(user, f"{ana}@", 1)
    thread_id = "0b8f6a53-5d1e-4a57-9a4e-6f1d7c2b9e11"
    line = {"v": 1, "seq": 1, "ts": "2026-01-01T00:00:00.000000Z", **OPERATION, "command": "v"}
    stored = "SELECT search_role, search_vector::text FROM sessiond_items"
    with psycopg.connect(postgres.url(name), autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{owner}" LOGIN')
        admin.execute(f'CREATE ROLE "{ana}" LOGIN')
        admin.execute(f'GRANT CREATE, USAGE ON SCHEMA public TO "{owner}"')
    try:
        with psycopg.connect(as_owner, autocommit=True) as conn:  # schema 10, private
            conn.execute(
                "CREATE TABLE sessiond_migrations (version integer PRIMARY KEY,"
                " name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            for migration in [m for m in schema.available() if m.version <= 10]:
                conn.execute(migration.path.read_text())  # type: ignore[arg-type]
                conn.execute("INSERT INTO sessiond_migrations (version, name) VALUES (%s, %s)",
                             (migration.version, migration.name))  # fmt: skip
            conn.execute("UPDATE sessiond_settings SET value = 'private' WHERE name = 'visibility'")
            conn.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON sessiond_threads, '
                         f'sessiond_items TO "{ana}"')  # fmt: skip
            conn.execute(f'GRANT SELECT ON sessiond_migrations, sessiond_settings TO "{ana}"')
        with psycopg.connect(as_ana, autocommit=True) as conn:  # ana's record
            conn.execute("INSERT INTO sessiond_threads (thread_id, updated_at) VALUES (%s, %s)",
                         (thread_id, line["ts"]))  # fmt: skip
            conn.execute(
                "INSERT INTO sessiond_items (thread_id, seq, item_id, line)"
                " VALUES (%s, 1, 'o', %s)",
                (thread_id, orjson.dumps(line).decode()),
            )
            assert conn.execute(stored).fetchone() == ("tool", None)  # schema 10: not found
        with psycopg.connect(as_owner, autocommit=True) as conn:
            assert conn.execute(stored).fetchall() == []  # the owner sees none of ana's
            assert migrate(conn) == [11]
        with psycopg.connect(as_ana, autocommit=True) as conn:
            assert conn.execute(stored).fetchone() == ("tool", "'v':1")
        assert searchable(line) == ("tool", "v")
    finally:
        pg_cluster.drop_database(postgres.url(), name)
        with psycopg.connect(postgres.url(), autocommit=True) as admin:
            admin.execute(f'DROP ROLE "{ana}"')
            admin.execute(f'DROP ROLE "{owner}"')
