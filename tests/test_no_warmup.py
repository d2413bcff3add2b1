"""No warmup (docs/architecture.md): `initialize` reads no thread, opens no
index, loads no store driver, starts no watcher and reads no hook config. Proved from a
real server process through `sessiond/debug` (SESSIOND_DEBUG=1), which reports its modules
and open files."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.rpc_client import ServerProcess
from tests.support.wait import eventually

Spawn = Callable[..., ServerProcess]
HOOK = Path(__file__).with_name("support") / "hook_program.py"
# Modules that are only loaded when a request needs them.
LAZY_MODULES = (
    "git",  # no Python git library: the probe runs the git command (restore/engine/gitcli.py)
    "watchfiles",
    "sqlite3",  # the thread index: thread/list
    "pydantic",  # param validation: the first request after initialize
    "restore.service",
    "restore.stores.embedded.index",
    "restore.stores",
    "psycopg",  # the PostgreSQL driver: only a postgresql:// store, at its first request
    "server.hooks",  # lifecycle hooks and their configuration
)


def loaded(report: dict[str, Any], name: str) -> bool:
    return any(module == name or module.startswith(name + ".") for module in report["modules"])


def test_initialize_loads_nothing_a_later_request_would_need(
    spawn: Spawn, home: Path, tmp_path: Path
) -> None:
    # A data dir with a thread and an index, user and trusted-workspace hook configs whose
    # hooks would leave a mark: initialize must touch none of them.
    first = spawn()
    first.initialize()
    first.request("thread/start", {"cwd": str(tmp_path)})
    first.request("thread/list", {})
    assert first.shutdown() == 0
    data_files = sorted(str(p) for p in home.rglob("*") if p.is_file())
    marker = tmp_path / "a-hook-ran"
    touch = {
        "type": "command",
        "command": f"{sys.executable} {HOOK} {tmp_path / 'log'} touch {marker}",
    }
    config = {"SessionStart": [{"hooks": [touch]}], "SessionEnd": [{"hooks": [touch]}]}
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "hooks.json").write_text(json.dumps(config))
    workspace = tmp_path / "ws"
    (workspace / ".sessiond").mkdir(parents=True)
    (workspace / ".sessiond" / "hooks.json").write_text(json.dumps(config))

    server = spawn(env={"SESSIOND_DEBUG": "1", "SESSIOND_CONFIG_HOME": str(tmp_path / "config")})
    server.initialize([str(workspace)], trusted=True)
    report = server.request("sessiond/debug")

    assert [name for name in LAZY_MODULES if loaded(report, name)] == []
    assert report["threadServiceCreated"] is False
    assert report["hooksCreated"] is False
    opened = [path for path in report["openFiles"] if path.startswith("/") and "/dev/" not in path]
    assert [path for path in opened if str(home) in path or "hooks.json" in path] == []
    assert sorted(str(p) for p in home.rglob("*") if p.is_file()) == data_files
    assert not marker.exists()

    # The same report after requests that need them: the test can see what it asserts.
    server.request("thread/list", {})
    server.request("thread/start", {"cwd": str(workspace)})
    after = server.request("sessiond/debug")
    assert loaded(after, "sqlite3") and loaded(after, "restore.service")
    assert not loaded(after, "psycopg")  # the embedded store never imports the driver
    assert loaded(after, "server.hooks.lifecycle") and after["hooksCreated"] is True
    # The hook config was live all along: now it ran.
    eventually(marker.exists, "the SessionStart hook ran")


def test_the_debug_method_exists_only_when_asked_for(server: ServerProcess) -> None:
    reply = server.response(server.request_async("sessiond/debug"))
    assert reply["error"]["data"]["kind"] == "MethodNotFound"


# Modules a window's first `thread/list` does not need (issue 26): the resume engine, the
# judge and the git runner come with the first resume or start.
NOT_FOR_A_LIST = ("restore.service.resume", "restore.engine.judge", "restore.engine.gitcli")


def test_a_list_loads_neither_the_resume_engine_nor_git(spawn: Spawn, tmp_path: Path) -> None:
    first = spawn()
    first.initialize()
    tid = first.request("thread/start", {"cwd": str(tmp_path)})["thread"]["threadId"]
    assert first.shutdown() == 0

    server = spawn(env={"SESSIOND_DEBUG": "1"})
    server.initialize([str(tmp_path)], trusted=True)
    assert [t["threadId"] for t in server.request("thread/list", {})["threads"]] == [tid]
    report = server.request("sessiond/debug")
    assert [name for name in NOT_FOR_A_LIST if loaded(report, name)] == []

    server.request("thread/resume", {"threadId": tid})
    after = server.request("sessiond/debug")
    assert [name for name in NOT_FOR_A_LIST if loaded(after, name)] == list(NOT_FOR_A_LIST)
