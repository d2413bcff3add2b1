"""A large record on the shared store never holds another client (issue 34): its line is
written ahead on a connection of its own (restore/stores/postgres/staging.py, migration
010), and the append only moves the row. Before, a 16 MiB record's bytes and its search
columns (three parses of the line as jsonb) held the writer connection, and every other
client's record behind it, for about a second (victim `thread/record` p99 2.8-6.5 s in
`python -m bench.redaction hostile --postgres`).

A real server, real WebSocket clients, a real PostgreSQL. The staging is held at a pause
point while the other client works: what is asserted is what the server did while a large
record was provably being written, never how long anything took."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest

from tests.support.items import message
from tests.support.wait import eventually
from tests.support.ws_client import WsClient, WsServerProcess

ON_POSTGRES = pytest.mark.parametrize("store_url", ["postgres"], indirect=True)

LARGE = "zanzibar " + "plain words of a long tool output " * 9_000
"""~300 KiB: past STAGE_BYTES (256 KiB), so written ahead."""

DERIVED = (
    "SELECT search_ts, usage, search_role, search_vector::text, "
    "sessiond_search_json(line)->>'ts', sessiond_usage_of(line), "
    "sessiond_search_role(line), sessiond_search_vector(line)::text "
    "FROM sessiond_items WHERE thread_id = %s ORDER BY seq"
)
"""Each row's derived columns beside what the items' trigger computes from its line."""


def derived(url: str, thread_id: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(DERIVED, (thread_id,)).fetchall()


def staged_rows(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM sessiond_staged").fetchone()
        return int(row[0]) if row else -1


async def started(client: WsClient, cwd: Path) -> dict[str, str]:
    answer = await client.request("thread/start", {"cwd": str(cwd)})
    return {"threadId": answer["thread"]["threadId"], "sessionId": answer["sessionId"]}


@ON_POSTGRES
async def test_a_large_record_being_written_holds_no_other_client_and_is_stored_whole(
    ws_server: Callable[..., WsServerProcess], store_url: str, tmp_path: Path
) -> None:
    pause = tmp_path / "pause"
    pause.mkdir()
    server = ws_server(env={"SESSIOND_STORE": store_url, "SESSIOND_PAUSE_AT": f"staging:{pause}"})
    large = await WsClient.open(server.record, name="large")
    other = await WsClient.open(server.record, name="other")
    mine, theirs = await started(large, tmp_path), await started(other, tmp_path)
    held = await large.start_request("thread/record", {**mine, "items": [message(LARGE, "tool")]})
    await asyncio.to_thread(eventually, (pause / "staging.reached").exists, "a staging")
    # Another client's record and listing go ahead while the large line is being written.
    recorded = await other.request("thread/record", {**theirs, "items": [message("small")]})
    listed = await other.request("thread/list", {})
    waiting = held.done()
    (pause / "staging.go").touch()
    answer = await held

    assert waiting is False
    assert recorded["lastSeq"] == 2 and len(listed["threads"]) == 2
    assert answer["result"]["lastSeq"] == 2, answer
    page = await large.request("thread/read", {"threadId": mine["threadId"]})
    assert page["items"][-1]["content"] == LARGE
    hits = (await other.request("thread/search", {"query": "zanzibar"}))["hits"]
    assert [(h["threadId"], h["seq"], h["role"]) for h in hits] == [(mine["threadId"], 2, "output")]
    rows = derived(store_url, mine["threadId"])
    assert [row[:4] for row in rows] == [row[4:] for row in rows]
    assert staged_rows(store_url) == 0
    await large.close()
    await other.close()


@ON_POSTGRES
async def test_a_large_line_written_ahead_of_another_append_to_its_thread_is_written_again(
    ws_server: Callable[..., WsServerProcess], store_url: str, tmp_path: Path
) -> None:
    """Staged lines are stamped with the seq the thread ended at then: when something else
    was appended meanwhile (here a rename from another client), they no longer fit, and
    the append writes the record itself, after it, and deletes what was staged."""
    pause = tmp_path / "pause"
    pause.mkdir()
    server = ws_server(env={"SESSIOND_STORE": store_url, "SESSIOND_PAUSE_AT": f"staging:{pause}"})
    large = await WsClient.open(server.record, name="large")
    other = await WsClient.open(server.record, name="other")
    mine = await started(large, tmp_path)
    held = await large.start_request("thread/record", {**mine, "items": [message(LARGE, "tool")]})
    await asyncio.to_thread(eventually, (pause / "staging.reached").exists, "a staging")
    await other.request("thread/setTitle", {"threadId": mine["threadId"], "title": "renamed"})
    (pause / "staging.go").touch()
    answer = await held

    assert answer["result"]["lastSeq"] == 3, answer
    page = await large.request("thread/read", {"threadId": mine["threadId"]})
    assert [(i["seq"], i["type"]) for i in page["items"]][-2:] == [
        (2, "thread_title"), (3, "message")
    ]  # fmt: skip
    assert page["items"][-1]["content"] == LARGE
    rows = derived(store_url, mine["threadId"])
    assert [row[:4] for row in rows] == [row[4:] for row in rows]
    assert staged_rows(store_url) == 0
    await large.close()
    await other.close()


LINES: list[dict[str, Any]] = [
    {"type": "message", "role": "user", "content": "a question about zanzibar"},
    {"type": "message", "role": "tool", "content": [{"type": "text", "text": "out put"}]},
    {"type": "operation", "operationId": "o1", "state": "completed", "title": "run",
     "command": "ls -la", "result": {"stdout": "file.txt", "code": 0}},
    {"type": "operation", "operationId": "o2", "state": "started", "title": "quiet"},
    {"type": "cost", "model": "claude-sonnet-4-5", "inputTokens": 1200, "outputTokens": 30,
     "cacheReadTokens": 200, "usd": 0.01},
    {"type": "todos", "items": [{"content": "write the test", "status": "pending"}]},
    {"type": "thread_title", "title": "a title"},
    {"type": "hook", "event": "resume", "output": "nothing to search here"},
    {"type": "file_edit", "path": "src/foo.py", "before": "a", "after": "b"},
]  # fmt: skip


@ON_POSTGRES
def test_a_moved_row_carries_exactly_the_columns_the_trigger_computes(store_url: str) -> None:
    """The staging statement computes the derived columns (search_ts, usage, search_role,
    search_vector) as the items' trigger does for a row inserted with its line alone: for
    every kind of record, a moved row and an inserted row are the same row."""
    from restore.stores.postgres import schema, staging

    thread_id = str(uuid.uuid4())
    with psycopg.connect(store_url, autocommit=True) as conn:
        schema.migrate(conn)
        conn.execute("INSERT INTO sessiond_threads (thread_id) VALUES (%s)", (thread_id,))
        for n, body in enumerate(LINES):
            line = orjson.dumps({"v": 1, "seq": 2 * n + 1, "ts": "2026-12-02T18:00:00.000Z",
                                 "sessionId": "s", "id": f"i{n}", **body}).decode()  # fmt: skip
            conn.execute(
                "INSERT INTO sessiond_items (thread_id, seq, item_id, line) "
                "VALUES (%s, %s, %s, %s)",
                (thread_id, 2 * n + 1, f"i{n}", line),
            )
            (row,) = conn.execute(staging.STAGE, (line,)).fetchone() or ("",)
            conn.execute(staging.PLACE, (thread_id, 2 * n + 2, f"m{n}", row))
        columns = conn.execute(
            "SELECT seq, search_ts, usage, search_role, search_vector::text FROM sessiond_items "
            "WHERE thread_id = %s ORDER BY seq",
            (thread_id,),
        ).fetchall()
    inserted, moved = columns[0::2], columns[1::2]
    assert [c[1:] for c in inserted] == [c[1:] for c in moved]
    # and the trigger computed what each kind has: a role, words, a call's usage
    user, _, done, started, cost = inserted[:5]
    assert user[3] == "user" and "'zanzibar'" in user[4]
    assert (done[3], started[3]) == ("output", "tool") and "'stdout'" not in done[4]
    assert cost[2]["output"] == 30 and cost[2]["input"] == 1000
    assert all(c[1] == "2026-12-02T18:00:00.000Z" for c in columns)
