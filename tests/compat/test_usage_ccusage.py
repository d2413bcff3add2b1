"""`sessiond usage daily` against ccusage (npm `ccusage`, pinned in tests/agents/package.json)
on the same transcripts, which the real Claude Code and Codex CLIs wrote against the mock
model: per day, the four token counts equal and the cost within 1% (docs/usage.md says why
the cost may differ at all: two price lists).

ccusage runs offline (`--offline`: its bundled prices) with HOME, CLAUDE_CONFIG_DIR and
CODEX_HOME on the test's folders, so it reads these transcripts and nothing else; its
spend ledger and cache go under that HOME too."""

from __future__ import annotations

import json
import subprocess
from itertools import count
from pathlib import Path
from typing import Any

import pytest

from tests.agents.clis import AgentHome
from tests.agents.mock_model import Reply, Request, Usage
from tests.compat.conftest import Agents, import_from
from tests.test_cli import sessiond

CLAUDE_MODEL = "claude-sonnet-4-5-20250929"
CODEX_MODEL = "gpt-5"
TOKENS = ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens")


def varied() -> Any:
    """Each model call its own token counts (cache reads and writes included, every other
    call's writes partly kept for an hour, which cost more), so a call counted twice or
    missed, or priced at the wrong rate, shows in the totals."""
    calls = count(1)

    def script(request: Request) -> Reply:
        n = next(calls)
        return Reply(text=f"Answer {n}.", usage=Usage(
            input_tokens=6000 + 17 * n, output_tokens=40 + 3 * n,  # OpenAI's: cached included
            cache_read_tokens=4000 + 101 * n, cache_write_tokens=700 + 11 * n,
            cache_write_1h_tokens=300 * (n % 2)))  # fmt: skip

    return script


def ccusage(agent: AgentHome, *args: str) -> dict[str, Any]:
    env = agent.env(CLAUDE_CONFIG_DIR=str(agent.home / ".claude"),
                    CODEX_HOME=str(agent.codex_home), LOG_LEVEL="0")  # fmt: skip
    done = subprocess.run([str(agent.bins / "ccusage"), *args, "--json", "--offline",
                           "--timezone", "UTC"], env=env, capture_output=True, text=True,
                          timeout=300, cwd=agent.home)  # fmt: skip
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def tokens(row: dict[str, Any]) -> tuple[int, int, int, int]:
    """ccusage's four counts of a row, in TOKENS' order."""
    counts = row.get("tokenCounts", row)  # a block's are under `tokenCounts`, named longer
    read = counts.get("cacheReadTokens", counts.get("cacheReadInputTokens"))
    written = counts.get("cacheCreationTokens", counts.get("cacheCreationInputTokens"))
    return counts["inputTokens"], counts["outputTokens"], read, written


def ours(home: Path, *args: str) -> dict[str, Any]:
    done = sessiond(home, "usage", *args, "--json", "--timezone", "UTC")
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def test_daily_tokens_equal_ccusage_and_cost_is_within_one_percent(
    agents: Agents, tmp_path: Path
) -> None:
    agent = agents.start(varied())
    agent.write_codex_config(model=CODEX_MODEL)
    for prompt in ("first question", "second question"):
        agent.claude(prompt, args=("--model", CLAUDE_MODEL)).check()
    agent.codex("a codex question").check()
    home = tmp_path / "sessiond"
    import_from(home, "claude", agent.claude_projects)
    import_from(home, "codex", agent.codex_sessions)
    daily = ours(home, "daily", "--by", "agent")
    theirs = {row["period"]: row for row in ccusage(agent, "daily")["daily"]}
    assert daily["rows"], "the CLIs wrote no usage"
    assert sorted(theirs) == [row["key"] for row in daily["rows"]]
    for row in daily["rows"]:
        other = theirs[row["key"]]
        assert tuple(row[name] for name in TOKENS) == tokens(other), (row, other)
        assert row["totalTokens"] == other["totalTokens"]
        assert row["unpricedCalls"] == 0
        assert row["usd"] == pytest.approx(other["totalCost"], rel=0.01), (row, other)
        # Both agents counted: each agent's calls are in the day's totals.
        assert {part["name"] for part in row["breakdown"]} == {"claude-code", "codex"}
    assert daily["totals"]["cacheWriteTokens"] > 0 and daily["totals"]["cacheReadTokens"] > 0

    # Weeks (Monday's, as ccusage 20's) and months the same.
    for report in ("weekly", "monthly"):
        theirs = {row["period"]: row for row in ccusage(agent, report)[report]}
        mine = ours(home, report)
        assert {row["key"]: tuple(row[n] for n in TOKENS) for row in mine["rows"]} == {
            key: tokens(row) for key, row in theirs.items()}  # fmt: skip

    # Sessions: ccusage's session ids are our threads (three: two Claude Code, one Codex).
    sessions = ours(home, "session")["rows"]
    assert sorted(tuple(row[n] for n in TOKENS) for row in sessions) == sorted(
        tokens(row) for row in ccusage(agent, "session")["session"])  # fmt: skip
    assert len(sessions) == 3

    # Blocks: ccusage's are Claude Code's alone (its billing); ours hold every agent's
    # calls, and their Claude Code part is ccusage's block.
    blocks = ours(home, "blocks", "--by", "agent")["rows"]
    theirs = {row["startTime"]: row for row in ccusage(agent, "blocks")["blocks"]
              if not row.get("isGap")}  # fmt: skip
    assert sorted(theirs) == [block["startAt"] for block in blocks]
    for block in blocks:
        (claude,) = [part for part in block["breakdown"] if part["name"] == "claude-code"]
        other = theirs[block["startAt"]]
        assert tuple(claude[n] for n in TOKENS) == tokens(other)
        assert block["endAt"] == other["endTime"]
        assert claude["usd"] == pytest.approx(other["costUSD"], rel=0.01)
