"""`thread/continue` over the wire, in real server processes on both stores: a key's first
thread, its continuation, and its reset when the freshness policy finds it stale (`idle`
after a short limit and not before, `daily` once a day began), linked both ways, carrying
what the policy says, seen by hooks as `reset` with its reason, and shown as a chain by
the command line. Time is moved with the test clock (`SESSIOND_TEST_CLOCK`,
restore/clock.py), never waited for."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BOTH_STORES
from tests.faults.helpers import Spawn, list_all, record, sessiond
from tests.support.items import message
from tests.support.rpc_client import RpcError, ServerProcess
from tests.support.wait import eventually

pytestmark = BOTH_STORES

HOOK = Path(__file__).with_name("support") / "hook_program.py"
KEY = "direct:ana"
IDLE = {"reset": "idle", "idleMinutes": 1}


class Clock:
    """The servers' test clock: seconds ahead of the system's."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.set(0)

    def set(self, seconds: float) -> None:
        self.path.write_text(str(seconds))


@pytest.fixture
def clock(tmp_path: Path) -> Clock:
    return Clock(tmp_path / "clock")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def hook_log(tmp_path: Path) -> Path:
    """User hooks logging every SessionStart and SessionEnd they see."""
    config = tmp_path / "config"
    config.mkdir()
    log = tmp_path / "hooks.log"
    command = {"type": "command", "command": f"{sys.executable} {HOOK} {log} ok"}
    hooks = {"SessionStart": [{"hooks": [command]}], "SessionEnd": [{"hooks": [command]}]}
    (config / "hooks.json").write_text(json.dumps(hooks))
    return log


def _server(spawn: Spawn, clock: Clock, hook_log: Path | None = None) -> ServerProcess:
    env = {"SESSIOND_TEST_CLOCK": str(clock.path)}
    if hook_log is not None:
        env["SESSIOND_CONFIG_HOME"] = str(hook_log.parent / "config")
    server = spawn(env=env)
    server.initialize()
    return server


def _continue(server: ServerProcess, cwd: Path, **extra: Any) -> dict[str, Any]:
    answer: dict[str, Any] = server.request(
        "thread/continue", {"sessionKey": KEY, "cwd": str(cwd), **extra}
    )
    return answer


def _hook_runs(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line)["payload"] for line in log.read_text().splitlines()]


def _row(server: ServerProcess, thread_id: str) -> dict[str, Any]:
    rows = list_all(server, sessionKey=KEY, archived=False)
    return next(row for row in rows if row["threadId"] == thread_id)


def test_idle_starts_a_linked_thread_after_the_limit_and_not_before(
    spawn: Spawn, clock: Clock, workspace: Path, hook_log: Path, home: Path,
    store_url: str | None,
) -> None:  # fmt: skip
    server = _server(spawn, clock, hook_log)
    first = _continue(server, workspace, policy=IDLE, model="m-1",
                      permissions={"approvalMode": "on-request"})  # fmt: skip
    assert first["reason"] == "startup" and first["sessionOpened"]
    old = first["thread"]["threadId"]
    assert first["thread"]["sessionKey"] == KEY and first["lastActivity"] is None
    assert first["policy"]["reset"] == "idle" and first["policy"]["idleMinutes"] == 1
    todos = {"type": "todos", "items": [{"id": "1", "content": "call ana", "status": "pending"}]}
    record(server, old, first["sessionId"], message("hello"), todos)
    last_seq = _row(server, old)["itemCount"]

    clock.set(55)  # 55 s after the last record: within the minute
    again = _continue(server, workspace, policy=IDLE)
    assert again["reason"] == "resume" and not again["sessionOpened"]
    assert again["thread"]["threadId"] == old and again["sessionId"] == first["sessionId"]
    assert (
        again["restore"] is None and _row(server, old)["itemCount"] == last_seq
    )  # nothing written

    clock.set(61)  # past it
    reset = _continue(server, workspace, policy={**IDLE, "carry": {"todos": True}})
    assert reset["reason"] == "reset" and reset["resetReason"] == "idle"
    new = reset["thread"]["threadId"]
    assert new != old and reset["previousThreadId"] == old and reset["sessionOpened"]
    assert reset["thread"]["previousThreadId"] == old and reset["thread"]["resetReason"] == "idle"
    assert reset["thread"]["sessionKey"] == KEY
    assert reset["carried"] == ["model", "permissions", "todos"]
    assert reset["thread"]["preview"] == ""  # never the conversation
    assert _row(server, old)["nextThreadId"] == new  # the old one names its successor
    items = server.request("thread/read", {"threadId": new})["items"]
    meta = items[0]
    assert (meta["source"], meta["reason"], meta["resetReason"]) == ("reset", "idle", "idle")
    assert meta["previousThreadId"] == old and meta["model"] == "m-1"
    assert meta["permissions"]["approvalMode"] == "on-request"
    assert [i["items"] for i in items if i["type"] == "todos"] == [todos["items"]]
    assert not [i for i in items if i["type"] == "message"]
    with pytest.raises(RpcError) as stale:  # the client's session on the old thread ended
        record(server, old, first["sessionId"], message("late"))
    assert stale.value.kind == "StaleSession"
    # The new thread is fresh: the next message continues it.
    assert _continue(server, workspace, policy=IDLE)["thread"]["threadId"] == new

    def hooks_ran() -> list[dict[str, Any]] | None:
        runs = _hook_runs(hook_log)
        return runs if len(runs) >= 3 else None

    runs = eventually(hooks_ran, "SessionStart startup, SessionEnd reset, SessionStart reset")
    assert len(runs) == 3
    ended = next(r for r in runs if r["hookEventName"] == "SessionEnd")
    assert (ended["threadId"], ended["reason"], ended["resetReason"]) == (old, "reset", "idle")
    started = [r for r in runs if r["hookEventName"] == "SessionStart"]
    assert [r["source"] for r in started] == ["startup", "reset"]
    assert started[1]["threadId"] == new and started[1]["resetReason"] == "idle"
    assert started[1]["previousThreadId"] == old
    notices = [n["params"] for n in server.notifications if n["method"] == "lifecycle/hook"]
    assert any(n.get("source") == "reset" and n.get("resetReason") == "idle" for n in notices)
    server.shutdown()

    store = ["--store", store_url] if store_url else []
    listed = sessiond(home, *store, "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    at_new = next(i for i, line in enumerate(lines) if line.startswith(new))
    assert lines[at_new + 1].lstrip().startswith(f"← {old}")  # the chain, as one entry
    assert "(reset: idle)" in lines[at_new]
    assert sum(old in line for line in lines) == 1
    shown = sessiond(home, *store, "show", new)
    assert f"replaces thread {old} (reset: idle)" in shown.stdout
    assert f"replaced by thread {new}" in sessiond(home, *store, "show", old).stdout


def test_daily_starts_a_new_thread_once_a_day_began(
    spawn: Spawn, clock: Clock, workspace: Path
) -> None:
    server = _server(spawn, clock)
    daily = {"reset": "daily", "atHour": 4}
    first = _continue(server, workspace, policy=daily)
    assert _continue(server, workspace, policy=daily)["reason"] == "resume"
    clock.set(24 * 3600 + 1)  # a day later: 04:00 local came in between, wherever we are
    reset = _continue(server, workspace, policy=daily)
    assert reset["reason"] == "reset" and reset["resetReason"] == "daily"
    assert reset["previousThreadId"] == first["thread"]["threadId"]


def test_another_client_continuing_the_key_resumes_it_with_a_report(
    spawn: Spawn, clock: Clock, workspace: Path
) -> None:
    server = _server(spawn, clock)
    first = _continue(server, workspace)  # policy none: the settings' default
    assert first["policy"]["reset"] == "none"
    tid = first["thread"]["threadId"]
    record(server, tid, first["sessionId"], message("hello"))
    server.request("thread/close", {"threadId": tid, "sessionId": first["sessionId"]})
    other = _server(spawn, clock)
    clock.set(30 * 24 * 3600)  # a month: `none` never resets
    resumed = _continue(other, workspace)
    assert resumed["reason"] == "resume" and resumed["sessionOpened"]
    assert resumed["thread"]["threadId"] == tid
    report = resumed["restore"]
    assert report["status"] == "ready" and report["session"]["sessionId"] == resumed["sessionId"]
    assert [m["content"] for m in report["messages"]["items"]] == ["hello"]
    # Held by that other process now: a third client is told who writes it.
    with pytest.raises(RpcError) as busy:
        _continue(server, workspace)
    assert busy.value.kind == "ThreadBusy"


def test_the_settings_file_chooses_the_policy_by_prefix_and_a_bad_one_is_named(
    spawn: Spawn, clock: Clock, workspace: Path, home: Path
) -> None:
    (home / "sessions.toml").write_text(
        'reset = "daily"\n[prefixes."direct:"]\nreset = "idle"\nidleMinutes = 2\n'
        '[prefixes."direct:".carry]\nmodel = false\n'
    )
    server = _server(spawn, clock)
    first = _continue(server, workspace, model="m-1")
    assert first["policy"]["reset"] == "idle" and first["policy"]["idleMinutes"] == 2
    clock.set(119)
    assert _continue(server, workspace)["reason"] == "resume"
    clock.set(121)
    reset = _continue(server, workspace)
    assert reset["resetReason"] == "idle" and "model" not in reset["carried"]
    assert reset["thread"]["threadId"] != first["thread"]["threadId"]
    group = server.request("thread/continue", {"sessionKey": "group:x", "cwd": str(workspace)})
    assert group["policy"]["reset"] == "daily"

    (home / "sessions.toml").write_text('[prefixes."direct:"]\nidleMinutes = "soon"\n')
    with pytest.raises(RpcError) as refused:
        _continue(server, workspace)
    assert refused.value.kind == "InvalidParams"
    assert str(home / "sessions.toml") in refused.value.message
    assert 'prefixes."direct:".idleMinutes' in refused.value.message
    with pytest.raises(RpcError) as bad_call:
        _continue(server, workspace, policy={"reset": "weekly"})
    assert bad_call.value.kind == "InvalidParams"


def test_an_archived_current_thread_is_not_continued(
    spawn: Spawn, clock: Clock, workspace: Path
) -> None:
    server = _server(spawn, clock)
    first = _continue(server, workspace)
    tid = first["thread"]["threadId"]
    server.request("thread/close", {"threadId": tid, "sessionId": first["sessionId"]})
    server.request("thread/archive", {"threadId": tid})
    fresh = _continue(server, workspace)
    assert fresh["reason"] == "startup" and fresh["thread"]["threadId"] != tid
    assert fresh["previousThreadId"] is None


def test_a_reset_while_another_process_writes_the_old_thread_links_it_later(
    spawn: Spawn, clock: Clock, workspace: Path
) -> None:
    holder = _server(spawn, clock)
    first = _continue(holder, workspace)
    old = first["thread"]["threadId"]
    other = _server(spawn, clock)
    clock.set(120)
    reset = _continue(other, workspace, policy=IDLE)  # the old thread is held: reset anyway
    new = reset["thread"]["threadId"]
    assert reset["reason"] == "reset" and reset["previousThreadId"] == old
    assert _row(other, old)["nextThreadId"] is None  # its writer is elsewhere
    assert _continue(other, workspace, policy=IDLE)["thread"]["threadId"] == new  # current
    holder.request("thread/close", {"threadId": old, "sessionId": first["sessionId"]})
    _continue(other, workspace, policy=IDLE)  # the next one writes the missing link

    assert _row(other, old)["nextThreadId"] == new


def test_a_reset_of_a_thread_nobody_holds_names_its_successor_right_after_the_answer(
    spawn: Spawn, clock: Clock, workspace: Path
) -> None:
    """The replaced thread's successor item is written after the answer (it is derived:
    the new thread names the one it replaces), and every client hears of it."""
    server = _server(spawn, clock)
    watcher = _server(spawn, clock)
    watcher.request("thread/list", {})
    first = _continue(server, workspace, policy=IDLE)
    old = first["thread"]["threadId"]
    server.request("thread/close", {"threadId": old, "sessionId": first["sessionId"]})
    clock.set(61)
    seen = len(server.notifications)
    reset = _continue(server, workspace, policy=IDLE)
    new = reset["thread"]["threadId"]
    assert reset["reason"] == "reset" and reset["previousThreadId"] == old

    def linked(client: ServerProcess, since: int = 0) -> bool:
        return any(
            n["params"]["thread"]["threadId"] == old
            and n["params"]["thread"].get("nextThreadId") == new
            for n in client.notifications[since:]
            if n["method"] == "thread/updated"
        )

    eventually(lambda: linked(server, seen), "this server's clients told the old one's successor")
    assert _row(server, old)["nextThreadId"] == new
    eventually(lambda: linked(watcher), "another process's clients told it too")
    assert _row(watcher, old)["nextThreadId"] == new
    assert _continue(server, workspace, policy=IDLE)["thread"]["threadId"] == new
