"""Hooks stay inside their bounds: run only from a trusted folder (judged on resolved
paths), never stall the server on a special `hooks.json`, and leave no process behind.

Threats: a folder the user did not trust reaching a trusted folder's hooks through
`TRUSTED/../UNTRUSTED`; a `hooks.json` that is a FIFO; a hook (user-configured, so not
malicious, but careless) whose daemon double-forks or calls setsid to escape its group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import Any

from tests.faults.helpers import Spawn, start
from tests.support.processes import alive
from tests.support.wait import eventually
from tests.test_hooks import Hooks, finals, wait_dead

DAEMON = """
import os, sys, time
pid_file, then = sys.argv[1], sys.argv[2]
if os.fork() == 0:
    os.setsid()  # leaves the hook's process group and session
    if os.fork() == 0:  # double fork: re-parented when its parent exits
        with open(pid_file + ".tmp", "w") as out:
            out.write(str(os.getpid()))
        os.rename(pid_file + ".tmp", pid_file)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        time.sleep(600)
    os._exit(0)
os.wait()
while not os.path.exists(pid_file):
    time.sleep(0.01)
if then == "hang":
    time.sleep(600)
"""


def _daemon_hook(tmp_path: Path, hooks: Hooks, then: str, timeout: float) -> Path:
    """A SessionStart hook that leaves a double-forked, setsid sleeper; returns its pid file."""
    script = tmp_path / "daemon.py"
    script.write_text(DAEMON)
    pid_file = tmp_path / "daemon.pid"
    command = f"{sys.executable} {script} {pid_file} {then}"
    hook = {"type": "command", "name": "daemon", "command": command, "timeout": timeout}
    hooks.write({"SessionStart": [{"hooks": [hook]}]})
    return pid_file


def _wait_pid(pid_file: Path) -> int:
    eventually(pid_file.exists, "the hook's daemon started", every=0.02)
    return int(pid_file.read_text())


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _serve_daemon_hook(spawn: Spawn, tmp_path: Path, then: str, timeout: float) -> tuple[Any, int]:
    """A server whose first session's hook left a detached sleeper; (server, its pid)."""
    hooks = Hooks(tmp_path)
    pid_file = _daemon_hook(tmp_path, hooks, then, timeout)
    server = spawn(env=hooks.env)
    server.initialize()
    start(server, tmp_path)
    return server, _wait_pid(pid_file)


def test_a_hook_that_double_forks_is_killed_whole_at_its_timeout(
    spawn: Spawn, tmp_path: Path
) -> None:
    server, daemon = _serve_daemon_hook(spawn, tmp_path, "hang", timeout=1)
    try:
        (run,) = finals(server, 1)
        assert run["status"] == "timed_out"
        wait_dead(daemon)
        assert server.request("thread/list", {})["threads"]  # still serving
    finally:
        _kill(daemon)


def test_a_detached_daemon_of_a_finished_hook_does_not_outlive_the_server(
    spawn: Spawn, tmp_path: Path
) -> None:
    server, daemon = _serve_daemon_hook(spawn, tmp_path, "exit", timeout=30)
    try:
        (run,) = finals(server, 1)
        assert run["status"] == "completed"
        assert alive(daemon)  # a finished hook may leave a job running while the server runs
        assert server.shutdown() == 0
        wait_dead(daemon)
    finally:
        _kill(daemon)


def _running_with(text: str) -> list[int]:
    """Live processes whose command line holds `text`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if text.encode() in Path(f"/proc/{entry}/cmdline").read_bytes() and alive(
                    int(entry)
                ):
                    found.append(int(entry))
    return found


def test_nothing_a_hook_started_outlives_a_kill_9_of_the_server(
    spawn: Spawn, tmp_path: Path
) -> None:
    """Killed, the server kills nothing: its watchdog does. The hook is still running
    (its timeout far off) and its sleeper left its group and session; both are gone."""
    server, daemon = _serve_daemon_hook(spawn, tmp_path, "hang", timeout=300)
    hook_processes = _running_with(str(tmp_path / "daemon.pid"))
    try:
        assert daemon in hook_processes and len(hook_processes) >= 2  # the hook, the sleeper
        os.kill(server.proc.pid, signal.SIGKILL)
        for pid in hook_processes:
            wait_dead(pid)
    finally:
        for pid in hook_processes:
            _kill(pid)


def test_a_cwd_spelled_through_a_trusted_folder_runs_no_workspace_hook(
    spawn: Spawn, tmp_path: Path
) -> None:
    hooks = Hooks(tmp_path)
    hooks.write({"SessionStart": [{"hooks": [hooks.hook("user-level", "ok")]}]})
    trusted, untrusted = tmp_path / "trusted", tmp_path / "untrusted"
    untrusted.mkdir()
    (trusted / ".sessiond").mkdir(parents=True)
    hooks.write(
        {"SessionStart": [{"hooks": [hooks.hook("workspace-level", "ok")]}]},
        trusted / ".sessiond" / "hooks.json",
    )
    server = spawn(env=hooks.env)
    folders = [{"path": str(trusted), "trusted": True}, {"path": str(untrusted), "trusted": False}]
    server.request("initialize", {"protocolVersion": 1, "workspaceFolders": folders})
    started = server.request("thread/start", {"cwd": f"{trusted}/../untrusted"})["thread"]
    assert started["workspaceFolder"] == str(untrusted)
    assert [run["hook"] for run in finals(server, 1)] == ["user-level"]
    announced = [n["params"] for n in server.notifications if n["method"] == "lifecycle/hook"]
    assert {n["hook"] for n in announced} == {"user-level"}
    # The same folder, spelled plainly and trusted, does run its hooks (the trap is armed).
    start(server, trusted)
    assert sorted(run["hook"] for run in finals(server, 3)[1:]) == ["user-level", "workspace-level"]


def test_a_fifo_as_hooks_json_holds_no_answer(spawn: Spawn, tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    os.mkfifo(config / "hooks.json")
    server = spawn(env={"SESSIOND_CONFIG_HOME": str(config)})
    server.initialize()
    tid, _ = start(server, tmp_path)
    assert [t["threadId"] for t in server.request("thread/list", {})["threads"]] == [tid]
    start(server, tmp_path)  # hooks are looked up again for the next session: still answered
    # Said once looked up.
    eventually(lambda: "a FIFO, not a regular file" in server.stderr(), "the FIFO refused")
