"""Lifecycle hooks against a real server process: real hook processes, real entry points."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.items import message
from tests.support.processes import alive
from tests.support.rpc_client import HANG_GUARD, ServerProcess
from tests.support.wait import eventually
from tests.support.ws_client import WsClient, WsServerProcess

Spawn = Callable[..., ServerProcess]
HOOK = Path(__file__).with_name("support") / "hook_program.py"
FINAL = ("completed", "failed", "timed_out")


class Hooks:
    """A user config dir with a hooks.json, and the log every hook_program run appends to."""

    def __init__(self, root: Path) -> None:
        self.config_home = root / "config"
        self.config_home.mkdir()
        self.log = root / "hooks.log"

    def command(self, mode: str, arg: str = "") -> str:
        return f"{sys.executable} {HOOK} {self.log} {mode} {arg}".strip()

    def hook(self, name: str, mode: str, arg: str = "", timeout: float = 30) -> dict[str, Any]:
        return {
            "type": "command",
            "name": name,
            "command": self.command(mode, arg),
            "timeout": timeout,
        }

    def write(self, config: dict[str, Any], path: Path | None = None) -> None:
        (path or self.config_home / "hooks.json").write_text(json.dumps(config))

    @property
    def env(self) -> dict[str, str]:
        return {"SESSIOND_CONFIG_HOME": str(self.config_home)}

    def runs(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]


@pytest.fixture
def hooks(tmp_path: Path) -> Hooks:
    return Hooks(tmp_path)


def finals(server: ServerProcess, count: int) -> list[dict[str, Any]]:
    """Wait for `count` finished hook runs; return every finished run's notification."""
    deadline = time.monotonic() + HANG_GUARD
    while True:
        with server._lock:
            done = [
                n["params"]
                for n in server.notifications
                if n["method"] == "lifecycle/hook" and n["params"]["status"] in FINAL
            ]
            if len(done) >= count:
                return done
            if not server._lock.wait(timeout=max(0.0, deadline - time.monotonic())):
                raise TimeoutError(f"fewer than {count} hook runs finished: {done}")


def items_of(server: ServerProcess, thread_id: str, kind: str) -> list[dict[str, Any]]:
    items = server.request("thread/read", {"threadId": thread_id, "limit": 10_000})["items"]
    return [item for item in items if item["type"] == kind]


def thread_file(home: Path, thread_id: str) -> Path:
    return home / "threads" / thread_id[:2] / f"{thread_id}.jsonl"


def wait_dead(pid: int) -> None:
    eventually(lambda: not alive(pid), f"hook process {pid} ended")


def wait_for_run(hooks: Hooks, mode: str) -> dict[str, Any]:
    found = eventually(lambda: [run for run in hooks.runs() if run["mode"] == mode],
                       f"a {mode} hook ran")  # fmt: skip
    return found[0]


def test_each_source_fires_its_hooks_once_with_the_documented_payload(
    spawn: Spawn, hooks: Hooks, home: Path, tmp_path: Path
) -> None:
    hooks.write(
        {
            "SessionStart": [
                {"matcher": source, "hooks": [hooks.hook(f"on-{source}", "ok")]}
                for source in ("startup", "resume", "clear", "compact")
            ],
            "SessionEnd": [{"hooks": [hooks.hook("on-end", "ok")]}],
        }
    )
    server = spawn(env=hooks.env)
    server.initialize([str(tmp_path)])
    started = server.request("thread/start", {"cwd": str(tmp_path)})
    tid, first = started["thread"]["threadId"], started["sessionId"]
    finals(server, 1)
    server.request("thread/record", {"threadId": tid, "sessionId": first, "items": [message("hi")]})
    server.request("thread/compact", {"threadId": tid, "sessionId": first, "summary": "said hi"})
    finals(server, 2)
    cleared = server.request("thread/clear", {"threadId": tid, "sessionId": first})["sessionId"]
    finals(server, 4)
    server.request("thread/close", {"threadId": tid, "sessionId": cleared})
    finals(server, 5)
    resumed = server.request("thread/resume", {"threadId": tid})["session"]["sessionId"]
    finals(server, 6)
    assert server.shutdown() == 0  # SessionEnd(shutdown) runs before the process exits

    runs = [run["payload"] for run in hooks.runs()]
    assert [(p["hookEventName"], p["source"], p.get("reason"), p["sessionId"]) for p in runs] == [
        ("SessionStart", "startup", None, first),
        ("SessionStart", "compact", None, first),
        ("SessionEnd", "compact", "clear", first),
        ("SessionStart", "clear", None, cleared),
        ("SessionEnd", "clear", "close", cleared),
        ("SessionStart", "resume", None, resumed),
        ("SessionEnd", "resume", "shutdown", resumed),
    ]
    for payload in runs:
        assert payload["threadId"] == tid
        assert payload["cwd"] == str(tmp_path)
        assert payload["transcriptPath"] == str(thread_file(home, tid))
        assert payload["session_id"] == payload["sessionId"]  # Claude Code's names work too
    assert runs[3]["previousSessionId"] == first
    assert runs[5]["previousSessionId"] == cleared

    again = spawn()
    again.initialize()
    lifecycle = items_of(again, tid, "lifecycle")
    finished = [item for item in lifecycle if item["status"] in FINAL]
    # The close's SessionEnd hook ran (its run is in the log above) but is only announced:
    # after a close the thread may be another process's, so it is not written to again.
    assert [item["hook"] for item in finished] == [
        "on-startup",
        "on-compact",
        "on-end",
        "on-clear",
        "on-resume",
        "on-end",
    ]
    assert all(item["status"] == "completed" and item["exitCode"] == 0 for item in finished)
    assert all(isinstance(item["durationMs"], int) for item in finished)
    ended = [
        (item["reason"], item["targetSessionId"]) for item in lifecycle if item["status"] == "ended"
    ]
    assert ended == [("clear", first), ("close", cleared), ("shutdown", resumed)]


def test_resume_fires_session_start_exactly_once_and_its_context_is_restored_next_time(
    spawn: Spawn, hooks: Hooks, tmp_path: Path
) -> None:
    hooks.write({"SessionStart": [{"matcher": "resume", "hooks": [hooks.hook("ctx", "context")]}]})
    server = spawn(env=hooks.env)
    server.initialize()
    started = server.request("thread/start", {"cwd": str(tmp_path)})
    tid = started["thread"]["threadId"]
    server.request("thread/close", {"threadId": tid, "sessionId": started["sessionId"]})
    session = server.request("thread/resume", {"threadId": tid})["session"]["sessionId"]
    (run,) = finals(server, 1)
    assert run["status"] == "completed"
    assert run["promptSection"] == "hook:SessionStart:ctx"
    assert run["sessionId"] == session

    sections = items_of(server, tid, "prompt_section")
    assert [(s["name"], s["content"], s["cacheable"]) for s in sections] == [
        ("hook:SessionStart:ctx", f"context for {tid} (resume)", False)
    ]
    server.request("thread/close", {"threadId": tid, "sessionId": session})
    report = server.request("thread/resume", {"threadId": tid})
    restored = next(s for s in report["subsystems"] if s["name"] == "prompt_sections")
    assert restored["status"] == "restored"
    assert [(s["name"], s["content"]) for s in restored["state"]["sections"]] == [
        ("hook:SessionStart:ctx", f"context for {tid} (resume)")
    ]
    finals(server, 2)
    server.shutdown()
    assert [run["payload"]["source"] for run in hooks.runs()] == ["resume", "resume"]


def test_a_fork_is_a_startup_whose_hook_context_lands_in_the_fork(
    spawn: Spawn, hooks: Hooks, tmp_path: Path
) -> None:
    hooks.write({"SessionStart": [{"matcher": "startup", "hooks": [hooks.hook("ctx", "context")]}]})
    server = spawn(env=hooks.env)
    server.initialize()
    started = server.request("thread/start", {"cwd": str(tmp_path)})
    parent = started["thread"]["threadId"]
    server.request(
        "thread/record",
        {"threadId": parent, "sessionId": started["sessionId"], "items": [message("hi")]},
    )
    finals(server, 1)
    fork = server.request("thread/fork", {"threadId": parent})
    child = fork["thread"]["threadId"]
    finals(server, 2)

    payload = hooks.runs()[1]["payload"]
    assert (payload["threadId"], payload["source"]) == (child, "startup")
    assert payload["forkedFrom"]["threadId"] == parent
    assert payload["sessionId"] == fork["sessionId"]
    sections = items_of(server, child, "prompt_section")
    assert sections[-1]["content"] == f"context for {child} (startup)"
    assert all(
        s["content"] != f"context for {child} (startup)"
        for s in items_of(server, parent, "prompt_section")
    )
    server.request("thread/close", {"threadId": child, "sessionId": fork["sessionId"]})
    report = server.request("thread/resume", {"threadId": child})
    restored = next(s for s in report["subsystems"] if s["name"] == "prompt_sections")
    assert [s["content"] for s in restored["state"]["sections"]] == [
        f"context for {child} (startup)"
    ]
    assert len(hooks.runs()) == 2  # the fork's resume is not a startup


class OrderedResponses(dict):
    """Remembers how many notifications had arrived when each response arrived."""

    def __init__(self, server: ServerProcess) -> None:
        super().__init__()
        self.server = server
        self.notifications_before: dict[Any, int] = {}

    def __setitem__(self, key: Any, value: Any) -> None:
        self.notifications_before[key] = len(self.server.notifications)
        super().__setitem__(key, value)


def test_a_hanging_hook_is_killed_at_its_timeout_and_never_delays_the_answer(
    spawn: Spawn, hooks: Hooks, tmp_path: Path
) -> None:
    hooks.write(
        {
            "SessionStart": [
                {"matcher": "resume", "hooks": [hooks.hook("slow", "sleep", "60", timeout=1)]}
            ]
        }
    )
    server = spawn(env=hooks.env)
    server.initialize()
    server.responses = OrderedResponses(server)  # type: ignore[assignment]
    started = server.request("thread/start", {"cwd": str(tmp_path)})
    tid = started["thread"]["threadId"]
    server.request("thread/close", {"threadId": tid, "sessionId": started["sessionId"]})
    msg_id = server.request_async("thread/resume", {"threadId": tid})
    report = server.response(msg_id)["result"]
    assert report["status"] == "ready"
    before = server.notifications[: server.responses.notifications_before[msg_id]]  # type: ignore[attr-defined]
    assert not [n for n in before if n["method"] == "lifecycle/hook"]  # the answer came first

    pid = wait_for_run(hooks, "sleep")["pid"]
    (run,) = finals(server, 1)
    assert run["status"] == "timed_out"
    wait_dead(pid)
    # Still answering, and still writing the thread.
    session = report["session"]["sessionId"]
    server.request(
        "thread/record", {"threadId": tid, "sessionId": session, "items": [message("after")]}
    )
    assert server.request("thread/list", {})["threads"][0]["threadId"] == tid
    (timed_out,) = [i for i in items_of(server, tid, "lifecycle") if i["status"] == "timed_out"]
    assert timed_out["hook"] == "slow"
    assert timed_out["durationMs"] >= 1000


def test_failing_hooks_are_recorded_as_failed_and_change_nothing_else(
    spawn: Spawn, hooks: Hooks, tmp_path: Path
) -> None:
    hooks.write(
        {
            "SessionStart": [
                {
                    "matcher": "startup|resume",
                    "hooks": [hooks.hook("crashes", "exit1"), hooks.hook("babbles", "badjson")],
                }
            ]
        }
    )
    server = spawn(env=hooks.env)
    server.initialize()
    started = server.request("thread/start", {"cwd": str(tmp_path)})
    tid = started["thread"]["threadId"]
    runs = {run["hook"]: run for run in finals(server, 2)}
    assert runs["crashes"]["status"] == "failed"
    assert runs["crashes"]["exitCode"] == 1
    assert "could not reach its service" in runs["crashes"]["stderr"]
    assert runs["babbles"]["status"] == "failed"
    assert runs["babbles"]["exitCode"] == 0
    assert "not JSON" in runs["babbles"]["error"]

    server.request(
        "thread/record",
        {"threadId": tid, "sessionId": started["sessionId"], "items": [message("hi")]},
    )
    server.request("thread/close", {"threadId": tid, "sessionId": started["sessionId"]})
    report = server.request("thread/resume", {"threadId": tid})
    assert report["status"] == "ready"
    assert [m["content"] for m in report["messages"]["items"]] == ["hi"]
    finals(server, 4)
    kinds = {item["type"] for item in items_of(server, tid, "lifecycle")}
    assert kinds == {"lifecycle"}
    assert items_of(server, tid, "prompt_section") == []
    failed = [i for i in items_of(server, tid, "lifecycle") if i["status"] == "failed"]
    assert sorted(i["hook"] for i in failed) == ["babbles", "babbles", "crashes", "crashes"]


def test_workspace_hooks_run_only_in_a_trusted_workspace(
    spawn: Spawn, hooks: Hooks, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    (workspace / ".sessiond").mkdir(parents=True)
    marker = tmp_path / "workspace-hook-ran"
    hooks.write(
        {"SessionStart": [{"hooks": [hooks.hook("touch", "touch", str(marker))]}]},
        workspace / ".sessiond" / "hooks.json",
    )
    hooks.write({"SessionStart": [{"hooks": [hooks.hook("user", "ok")]}]})
    server = spawn(env=hooks.env)
    server.initialize([str(workspace)], trusted=False)
    started = server.request("thread/start", {"cwd": str(workspace)})
    tid = started["thread"]["threadId"]
    server.request("thread/close", {"threadId": tid, "sessionId": started["sessionId"]})
    server.request("thread/resume", {"threadId": tid})
    assert [run["hook"] for run in finals(server, 2)] == ["user", "user"]
    assert not marker.exists()

    folder = {"path": str(workspace), "name": "ws"}
    server.notify(
        "workspace/didChangeWorkspaceFolders",
        {"removed": [folder], "added": [{**folder, "trusted": True}]},
    )
    server.request("thread/start", {"cwd": str(workspace)})
    assert sorted(run["hook"] for run in finals(server, 4)[2:]) == ["touch", "user"]
    assert marker.exists()


def test_entry_point_hooks_run_in_process_and_add_context(
    spawn: Spawn, hooks: Hooks, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    dist = site / "sessiond_demo_hooks-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: sessiond-demo-hooks\nVersion: 1.0\n"
    )
    (dist / "entry_points.txt").write_text(
        "[sessiond.hooks]\nproject-notes = sessiond_demo_hooks:notes\n"
    )
    (site / "sessiond_demo_hooks.py").write_text(
        "import json, os\n"
        f"LOG = {str(hooks.log)!r}\n"
        "def notes(payload):\n"
        "    with open(LOG, 'a') as out:\n"
        "        run = {'pid': os.getpid(), 'mode': 'entry', 'payload': payload}\n"
        "        out.write(json.dumps(run) + '\\n')\n"
        "    return {'additionalContext': 'notes for ' + payload['source']}\n"
        "notes.matcher = 'startup|resume'\n"
    )
    server = spawn(env={**hooks.env, "PYTHONPATH": str(site)})
    server.initialize()
    started = server.request("thread/start", {"cwd": str(tmp_path)})
    tid = started["thread"]["threadId"]
    (run,) = finals(server, 1)
    assert (run["hook"], run["hookType"], run["status"]) == ("project-notes", "python", "completed")
    assert run["origin"] == "entry_point:sessiond-demo-hooks"
    (section,) = items_of(server, tid, "prompt_section")
    assert (section["name"], section["content"]) == (
        "hook:SessionStart:project-notes",
        "notes for startup",
    )
    server.request("thread/close", {"threadId": tid, "sessionId": started["sessionId"]})
    server.request("thread/resume", {"threadId": tid})
    finals(server, 2)
    assert [run["payload"]["source"] for run in hooks.runs()] == ["startup", "resume"]
    assert {run["pid"] for run in hooks.runs()} == {server.proc.pid}  # in process


@pytest.mark.parametrize("ending", ["shutdown", "eof"])
def test_hook_processes_do_not_outlive_the_server(
    spawn: Spawn, hooks: Hooks, tmp_path: Path, ending: str
) -> None:
    hooks.write({"SessionStart": [{"hooks": [hooks.hook("slow", "sleep", "60", timeout=120)]}]})
    server = spawn(env=hooks.env)
    server.initialize()
    server.request("thread/start", {"cwd": str(tmp_path)})
    pid = wait_for_run(hooks, "sleep")["pid"]
    assert alive(pid)
    if ending == "shutdown":
        assert server.shutdown() == 0
    else:
        assert server.proc.stdin is not None
        server.proc.stdin.close()
        assert server.proc.wait(timeout=HANG_GUARD) == 0
    wait_dead(pid)


def _ended_records(home: Path, thread_id: str) -> list[tuple[str, str]]:
    lines = [json.loads(line) for line in thread_file(home, thread_id).read_text().splitlines()]
    return [
        (line["reason"], line["targetSessionId"])
        for line in lines
        if line["type"] == "lifecycle" and line["status"] == "ended"
    ]


def test_a_client_gone_without_shutdown_ends_its_sessions_with_their_hooks(
    spawn: Spawn, hooks: Hooks, home: Path, tmp_path: Path
) -> None:
    """A killed editor (end of input, no `shutdown`): its session's end is recorded, its
    SessionEnd hooks run (reason `disconnect`), and the thread is free for the next one."""
    hooks.write({"SessionEnd": [{"hooks": [hooks.hook("on-end", "ok")]}]})
    server = spawn(env=hooks.env)
    server.initialize([str(tmp_path)])
    started = server.request("thread/start", {"cwd": str(tmp_path)})
    tid, sid = started["thread"]["threadId"], started["sessionId"]
    assert server.proc.stdin is not None
    server.proc.stdin.close()
    assert server.proc.wait(timeout=HANG_GUARD) == 0
    payload = wait_for_run(hooks, "ok")["payload"]
    assert (payload["hookEventName"], payload["reason"], payload["sessionId"]) == (
        "SessionEnd",
        "disconnect",
        sid,
    )
    assert _ended_records(home, tid) == [("disconnect", sid)]
    again = spawn()
    again.initialize()
    assert again.request("thread/resume", {"threadId": tid})["session"]["sessionId"] != sid


async def test_a_websocket_client_gone_without_shutdown_ends_its_sessions_with_their_hooks(
    ws_server: Callable[..., WsServerProcess], hooks: Hooks, home: Path, tmp_path: Path
) -> None:
    """The server keeps serving others: the gone client's session is recorded as ended,
    its SessionEnd hooks run and are announced to the clients still connected, and the
    thread can be resumed by another client at once."""
    hooks.write({"SessionEnd": [{"hooks": [hooks.hook("on-end", "ok")]}]})
    server = ws_server(env=hooks.env)
    alpha = await WsClient.open(server.record, name="alpha", folders=[str(tmp_path)])
    beta = await WsClient.open(server.record, name="beta")
    started = await alpha.request("thread/start", {"cwd": str(tmp_path)})
    tid, sid = started["thread"]["threadId"], started["sessionId"]
    await alpha.close()  # gone without `shutdown`

    def finished() -> list[dict[str, Any]]:
        return [
            n["params"]
            for n in beta.notifications
            if n["method"] == "lifecycle/hook" and n["params"]["status"] in FINAL
        ]

    await beta.wait_for(lambda: finished())
    [announced] = finished()
    assert (announced["event"], announced["reason"], announced["sessionId"]) == (
        "SessionEnd",
        "disconnect",
        sid,
    )
    payload = wait_for_run(hooks, "ok")["payload"]
    assert (payload["reason"], payload["sessionId"]) == ("disconnect", sid)
    resumed = await beta.request("thread/resume", {"threadId": tid})
    assert resumed["session"]["sessionId"] != sid
    assert _ended_records(home, tid) == [("disconnect", sid)]
    await beta.close()
