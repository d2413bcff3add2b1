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
from tests.support.rpc_client import ServerProcess
from tests.test_cli import sessiond


@pytest.fixture(scope="session")
def agent_bins() -> Path:
    """The pinned CLIs (installed before the run: the run has no network), or @latest as
    `python -m tests.compat.latest` installed them just before it."""
    return install.bin_dir(latest=os.environ.get("SESSIOND_AGENTS") == "latest", fetch=False)


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


# --- the compatibility table (docs/import.md) ---------------------------------------------
#
# Each test says which agent and which columns it proves (`@pytest.mark.compat("codex",
# "edits", "todos")`); a cell is ✓ when every test of it passed, ✗ when one failed, — when
# none covers it. A whole run of the suite checks docs/import.md's table against the run
# (`SESSIOND_COMPAT_TABLE=write` rewrites it); `python -m tests.compat.latest` prints the
# table for @latest.

AGENT_NAMES = {"claude-code": "Claude Code", "codex": "Codex", "gemini": "Gemini CLI",
               "opencode": "OpenCode", "kilo": "Kilo", "qwen-code": "Qwen Code",
               "copilot": "GitHub Copilot CLI", "pi": "Pi",
               "codex-acp": "codex-acp",
               "claude-agent-acp": "claude-agent-acp", "gemini-acp": "gemini --acp"}  # fmt: skip
PACKAGE_OF = {"claude-code": "@anthropic-ai/claude-code", "codex": "@openai/codex",
              "gemini": "@google/gemini-cli", "opencode": "opencode-ai", "kilo": "@kilocode/cli",
              "qwen-code": "@qwen-code/qwen-code", "copilot": "@github/copilot",
              "pi": "@earendil-works/pi-coding-agent",
              "codex-acp": "@agentclientprotocol/codex-acp",
              "claude-agent-acp": "@agentclientprotocol/claude-agent-acp",
              "gemini-acp": "@google/gemini-cli"}  # fmt: skip
COLUMNS = ("messages", "todos", "edits", "cost", "model", "permissions", "sub-agents",
           "resume", "compaction")  # fmt: skip
TABLE_START, TABLE_END = "<!-- compat-table:start -->", "<!-- compat-table:end -->"
DOC = Path(__file__).resolve().parents[2] / "docs" / "import.md"
_outcomes: dict[tuple[str, str], list[bool]] = {}
_files_seen: set[str] = set()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "compat(agent, *columns): a real-agent test and the table cells it proves"
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    """The compat files of the tests this run will run (after any deselection: scripts/test
    runs the PostgreSQL tests apart); a part of the suite proves only part of the table."""
    for item in session.items:
        if item.get_closest_marker("compat") is not None:
            _files_seen.add(item.path.name)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        marker = item.get_closest_marker("compat")
        if marker is None:
            continue
        agent, *columns = marker.args
        assert agent in AGENT_NAMES, f"{item.nodeid}: unknown agent {agent!r}"
        assert all(c in COLUMNS for c in columns), f"{item.nodeid}: columns are {COLUMNS}"


def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> None:
    marker = item.get_closest_marker("compat")
    if marker is None or call.when != "call":
        return
    agent, *columns = marker.args
    for column in columns:
        _outcomes.setdefault((agent, column), []).append(call.excinfo is None)


def table(versions: dict[str, str]) -> str:
    """The markdown table of what this run proved, per agent."""
    agents = [a for a in AGENT_NAMES if any(key[0] == a for key in _outcomes)]
    head = "| agent | version | " + " | ".join(COLUMNS) + " |"
    rows = [head, "|" + "---|" * (len(COLUMNS) + 2)]
    for agent in agents:
        cells = []
        for column in COLUMNS:
            results = _outcomes.get((agent, column))
            cells.append("—" if not results else "✓" if all(results) else "✗")
        version = versions.get(PACKAGE_OF[agent], "?")
        rows.append(f"| {AGENT_NAMES[agent]} | {version} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _outcomes:
        return
    whole = {p.name for p in Path(__file__).parent.glob("test_*.py")
             if "pytest.mark.compat" in p.read_text()}  # fmt: skip
    if _files_seen != whole or session.config.option.keyword or session.config.option.markexpr:
        return  # a part of the suite: its table would be partial
    if hasattr(session.config, "workerinput"):
        return  # an xdist worker runs a part of what it collected
    bins = install.bin_dir(latest=os.environ.get("SESSIOND_AGENTS") == "latest", fetch=False)
    fresh = table(install.installed_versions(bins))
    if os.environ.get("SESSIOND_AGENTS") == "latest":
        print(f"\n\nCompatibility with @latest:\n{fresh}\n")
        return
    text = DOC.read_text()
    start, end = text.index(TABLE_START) + len(TABLE_START), text.index(TABLE_END)
    if text[start:end].strip() == fresh:
        return
    if os.environ.get("SESSIOND_COMPAT_TABLE") == "write":
        DOC.write_text(text[:start] + "\n" + fresh + "\n" + text[end:])
        return
    print(f"\n\ndocs/import.md's compatibility table is not what this run proved:\n{fresh}\n"
          "(SESSIOND_COMPAT_TABLE=write ./scripts/test tests/compat rewrites it)")  # fmt: skip
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
