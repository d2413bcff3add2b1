"""`sessiond acp` leaves no process behind: not AGENT, not what AGENT started, in its
process group or out of it (`setsid`), however sessiond ends — a real kill -9 included.
The real chain: the SDK's client → a real `sessiond acp` → tests/support/acp_agent.py, whose
`spawn` prompt starts the grandchildren."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.acp_editor import agent_log, fake_agent, sessiond_acp, wait_for
from tests.support.processes import alive
from tests.test_acp import text


def children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry))
    return found


async def _spawn(run: Any, repo: Path, state: Path) -> tuple[int, list[int], int]:
    """A session whose AGENT started two sleeps (one in its group, one that left it):
    (AGENT's pid, the sleeps' pids, the watchdog's pid)."""
    session = (await run.conn.new_session(cwd=str(repo))).session_id
    await run.conn.prompt(session_id=session, prompt=text("spawn"))
    spawned = next(e for e in agent_log(state) if e["event"] == "spawned")
    (watchdog,) = [pid for pid in children_of(run.process.pid) if pid != spawned["pid"]]
    return spawned["pid"], spawned["pids"], watchdog


@pytest.mark.parametrize("how", ["kill -9", "editor closes"])
async def test_nothing_agent_started_outlives_sessiond_not_even_a_process_that_left_its_group(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path], how: str
) -> None:
    repo = make_repo("repo")
    state = tmp_path / "agent"
    survivors: list[int] = []
    try:
        async with sessiond_acp(home, fake_agent(state)) as run:
            agent_pid, (in_group, left_group), watchdog = await _spawn(run, repo, state)
            survivors = [agent_pid, in_group, left_group, watchdog]
            assert all(alive(pid) for pid in survivors)
            assert os.getpgid(in_group) == agent_pid != os.getpgid(left_group)
            if how == "kill -9":
                run.kill9()
                await run.process.wait()
        assert run.process.returncode is not None
        await wait_for(lambda: not any(alive(pid) for pid in survivors), "every process gone")
    finally:
        for pid in survivors:  # a failed run must not leave its sleeps behind
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


async def test_the_watchdog_is_out_of_sessionds_process_group_and_ignores_sigterm_and_sigint(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    """An editor that stops its agent with a signal to the agent's process group (or a
    Ctrl-C in a terminal) must not take the watchdog first: it left that group, and it
    still cleans up after the kill -9 that follows."""
    repo = make_repo("repo")
    state = tmp_path / "agent"
    survivors: list[int] = []
    try:
        async with sessiond_acp(home, fake_agent(state)) as run:
            agent_pid, grandchildren, watchdog = await _spawn(run, repo, state)
            survivors = [agent_pid, *grandchildren, watchdog]
            assert os.getpgid(watchdog) != os.getpgid(run.process.pid)
            os.kill(watchdog, signal.SIGTERM)
            os.kill(watchdog, signal.SIGINT)
            await asyncio.sleep(0.2)
            assert alive(watchdog)
            run.kill9()
            await run.process.wait()
        await wait_for(lambda: not any(alive(pid) for pid in survivors), "every process gone")
    finally:
        for pid in survivors:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
