"""Two real server processes calling `thread/continue` on one key at the same moment, 100
times, on both stores (for PostgreSQL: as two machines on one database would): every
round the key's thread has gone stale, and exactly one new thread replaces it; the other
call continues that one (or is told it is being written), never starting a second."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

from tests.conftest import BOTH_STORES
from tests.faults.helpers import Spawn
from tests.support.rpc_client import ServerProcess

pytestmark = BOTH_STORES

KEY = "group:ops:ana"
ROUNDS = 100
POLICY = {"reset": "idle", "idleMinutes": 1}


def _answer(server: ServerProcess, msg_id: int) -> dict[str, Any]:
    """The call's result, or its error as `{"error": kind, "data": ...}`."""
    reply = server.response(msg_id)
    if "error" in reply:
        return {"error": reply["error"]["data"]["kind"], "data": reply["error"]["data"]}
    result: dict[str, Any] = reply["result"]
    return result


def test_two_processes_continuing_one_key_at_once_make_one_thread_per_reset(
    spawn: Spawn, tmp_path: Path
) -> None:
    clock = tmp_path / "clock"
    clock.write_text("0")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    servers = [spawn(env={"SESSIOND_TEST_CLOCK": str(clock)}) for _ in range(2)]
    for server in servers:
        server.initialize()
    params = {"sessionKey": KEY, "cwd": str(workspace), "policy": POLICY}
    chain: list[str] = []
    for round_ in range(ROUNDS):
        clock.write_text(str(round_ * 120))  # two minutes on: the key's thread is stale
        asked = [(server, server.request_async("thread/continue", params)) for server in servers]
        answers = [(server, _answer(server, msg_id)) for server, msg_id in asked]
        started = [a for _, a in answers if a.get("reason") in ("startup", "reset")]
        assert len(started) == 1, answers
        new = started[0]["thread"]["threadId"]
        assert started[0]["reason"] == ("startup" if round_ == 0 else "reset")
        assert started[0]["previousThreadId"] == (chain[-1] if chain else None)
        for _, answer in answers:
            if answer is started[0]:
                continue
            if "error" in answer:  # the winner holds the new thread's session
                assert answer["error"] == "ThreadBusy" and answer["data"]["threadId"] == new
            else:
                assert answer["reason"] == "resume" and answer["thread"]["threadId"] == new
        chain.append(new)
        for server, answer in answers:  # each lets go of what it opened
            if answer.get("sessionOpened"):
                server.request(
                    "thread/close", {"threadId": answer["thread"]["threadId"],
                                     "sessionId": answer["sessionId"]},
                )  # fmt: skip
    rows = {row["threadId"]: row for row in _keyed(servers[0])}
    assert sorted(rows) == sorted(chain)  # one thread per reset, none besides
    for previous, thread in pairwise(chain):
        assert rows[thread]["previousThreadId"] == previous
        assert rows[previous]["nextThreadId"] == thread
    last = servers[1].request("thread/continue", params)
    assert last["reason"] == "resume" and last["thread"]["threadId"] == chain[-1]
    for server in servers:
        server.shutdown()


def _keyed(server: ServerProcess) -> list[dict[str, Any]]:
    """Every thread of the key (they outnumber one page)."""
    rows: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = server.request(
            "thread/list",
            {"sessionKey": KEY, "limit": 200, **({"cursor": cursor} if cursor else {})},
        )
        rows += page["threads"]
        if (cursor := page["nextCursor"]) is None:
            return rows
