"""A record's redaction never holds another client (issue 34): it runs off the store thread,
in linear time, within a budget. Before, one 1 MiB `thread/record` of
`aws_secret_access_key=` repeated held every other request for 33-39 s (Python's `re`
backtracking on the store thread).

A real server and two real WebSocket clients. The hostile record's redaction is held at a
pause point (restore/faults.py) while the other client works: what is asserted is what the
server did while a redaction was provably under way, never how long anything took."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from tests.security.test_redaction import SECRETS, data_dir_bytes
from tests.support.items import message
from tests.support.wait import eventually
from tests.support.ws_client import WsClient, WsServerProcess

AWS = SECRETS["aws-secret-access-key"][0]
HOSTILE = "aws_secret_access_key=" * ((1 << 20) // 22) + f" aws_secret_access_key={AWS} "
"""1 MiB that Python's `re` took half a minute over (one secret at its end)."""


async def test_a_record_being_redacted_holds_no_other_client_and_its_own_order_is_kept(
    ws_server: Callable[..., WsServerProcess], tmp_path: Path, home: Path
) -> None:
    pause = tmp_path / "pause"
    pause.mkdir()
    server = ws_server(env={"SESSIOND_PAUSE_AT": f"redaction:{pause}"})
    hostile = await WsClient.open(server.record, name="hostile")
    other = await WsClient.open(server.record, name="other")
    mine = await hostile.request("thread/start", {"cwd": str(tmp_path)})
    theirs = await other.request("thread/start", {"cwd": str(tmp_path)})
    held = await hostile.start_request(
        "thread/record",
        {"threadId": mine["thread"]["threadId"], "sessionId": mine["sessionId"],
         "items": [message(HOSTILE)]},
    )  # fmt: skip
    await asyncio.to_thread(eventually, (pause / "redaction.reached").exists, "a redaction")
    # The same client's next request waits for its record: a connection's order is kept.
    closing = await hostile.start_request(
        "thread/close", {"threadId": mine["thread"]["threadId"], "sessionId": mine["sessionId"]}
    )
    # Another client's record and listing go ahead while the redaction is held.
    recorded = await other.request(
        "thread/record",
        {"threadId": theirs["thread"]["threadId"], "sessionId": theirs["sessionId"],
         "items": [message("plain words")]},
    )  # fmt: skip
    listed = await other.request("thread/list", {})
    waiting = (held.done(), closing.done())
    (pause / "redaction.go").touch()
    answer, closed = await held, await closing

    assert recorded["lastSeq"] == 2 and len(listed["threads"]) == 2
    assert waiting == (False, False)
    assert "result" in answer and "result" in closed, (answer, closed)
    assert answer["result"]["lastSeq"] == 2  # recorded before its thread was closed
    stored = data_dir_bytes(home)
    assert AWS.encode() not in stored and b"[secret:aws-secret-access-key:" in stored
    await hostile.close()
    await other.close()


async def test_a_record_too_costly_to_check_for_secrets_is_refused_whole_and_named(
    ws_server: Callable[..., WsServerProcess], tmp_path: Path, home: Path
) -> None:
    """Past an item's budget (restore/redaction/engine.py: matches of its rules) the record
    is refused, the item named and the mend said, nothing of it stored; the thread goes on.
    Before, it was looked at for as long as it took (an .env template of empty
    `SERVICE_n_API_KEY=` lines: 8.6 s for 438 KB, all of it on the store thread)."""
    server = ws_server()
    client = await WsClient.open(server.record)
    started = await client.request("thread/start", {"cwd": str(tmp_path)})
    ids = {"threadId": started["thread"]["threadId"], "sessionId": started["sessionId"]}
    template = "".join(f"SERVICE_{n}_API_KEY=\n" for n in range(100_000))
    reply = await (
        await client.start_request(
            "thread/record", {**ids, "items": [message("fine"), message(template)]}
        )
    )
    after = await client.request("thread/record", {**ids, "items": [message("still here")]})
    await client.close()

    error = reply["error"]
    assert error["data"]["kind"] == "PayloadTooLarge" and error["data"]["field"] == "items[1]"
    assert "smaller items" in error["message"]
    assert after["lastSeq"] == 2  # nothing of the refused record was stored
    assert b"SERVICE_99999_API_KEY" not in data_dir_bytes(home)


def test_an_imported_line_too_costly_to_check_is_skipped_named_and_the_rest_imported(
    home: Path, tmp_path: Path
) -> None:
    """An import redacts each source record as it reads it: a line past the budget is
    skipped as `too_costly` (nothing of it stored), the session and its other lines kept."""
    import json

    from tests.support.import_fixtures import ClaudeSession
    from tests.test_cli import sessiond

    projects, repo = tmp_path / "projects", tmp_path / "repo"
    repo.mkdir()
    session = ClaudeSession(projects, repo, "main")
    session.user("show me the template")
    session.bash("cat .env.template", "".join(f"SERVICE_{n}_API_KEY=\n" for n in range(100_000)))
    session.say("That is the template.")
    session.save()
    done = sessiond(home, "import", "claude", "--from", str(projects), "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["created"] == 1
    assert "too_costly" in done.stdout
    stored = data_dir_bytes(home)
    assert b"SERVICE_99999_API_KEY" not in stored and b"That is the template." in stored
