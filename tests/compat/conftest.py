"""The real-agent compatibility suite: each test runs a real CLI (Claude Code, Codex, Gemini
CLI; versions pinned in tests/agents/package-lock.json) headless against the mock model,
then asserts on what sessiond makes of the transcript the CLI wrote.

`SESSIOND_AGENTS=latest` runs the same suite against each package's @latest
(`python -m tests.compat.latest` does that and prints the versions tested).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.agents import install
from tests.agents.clis import AgentHome
from tests.agents.mock_model import MockModel, Script
from tests.rpc_client import ServerProcess
from tests.test_cli import sessiond


@pytest.fixture(scope="session")
def agent_bins() -> Path:
    return install.bin_dir(latest=os.environ.get("SESSIOND_AGENTS") == "latest")


class Agents:
    """A mock model and an AgentHome around it, started per test with the test's script."""

    def __init__(self, root: Path, bins: Path) -> None:
        self.root = root
        self.bins = bins
        self.model: MockModel | None = None

    def start(self, script: Script) -> AgentHome:
        assert self.model is None, "one mock model per test"
        self.model = MockModel(script).__enter__()
        return AgentHome(self.root / "agents", self.model, self.bins)

    def close(self) -> None:
        if self.model is not None:
            self.model.__exit__(None, None, None)


@pytest.fixture
def agents(tmp_path: Path, agent_bins: Path) -> Iterator[Agents]:
    started = Agents(tmp_path, agent_bins)
    try:
        yield started
    finally:
        started.close()
        if started.model is not None:
            assert not started.model.errors, started.model.errors  # a script bug, not a pass


def import_from(home: Path, agent: str, source: Path) -> dict[str, Any]:
    """`sessiond import AGENT --from SOURCE --json`, a real process; its summary."""
    done = sessiond(home, "import", agent, "--from", str(source), "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def resume(server: ServerProcess, thread_id: str, **params: Any) -> dict[str, Any]:
    return server.request("thread/resume", {"threadId": thread_id, **params})


def states(report: dict[str, Any]) -> dict[str, Any]:
    return {entry["name"]: entry["state"] for entry in report["subsystems"]}
