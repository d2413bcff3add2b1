"""`sessiond usage` and `usage/report`: tokens and cost per day, week, month, session and
5-hour block, from the index (no transcript read again), on both stores.

Real parts: Claude Code transcripts as the CLI writes them (tests/support/import_fixtures.py)
imported by a real `sessiond import`, a real `sessiond usage` process, a real server over a
pipe recording cost items live; the prices are genai-prices' own (restore/agents/pricing.py).
The check against ccusage itself on transcripts the real CLIs wrote is
tests/compat/test_usage_ccusage.py."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from restore.agents import pricing
from tests.conftest import BOTH_STORES
from tests.support.import_fixtures import ClaudeSession
from tests.support.rpc_client import RpcError, ServerProcess
from tests.test_postgres import sessiond_cli

pytestmark = BOTH_STORES

SONNET = "claude-sonnet-4-5-20250929"
UNKNOWN = "claude-future-9"  # on no price list: its calls count tokens, never $0
EVENING = datetime.fromisoformat("2026-11-30T23:10:00+00:00")  # 18:10 in New York


def usage(home: Path, store: str | None, *args: str) -> dict[str, Any]:
    shared = ["--store", store] if store else []
    done = sessiond_cli("--home", str(home), *shared, "usage", *args, "--json",
                        env={"TZ": "UTC"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def transcripts(root: Path, tmp_path: Path) -> tuple[ClaudeSession, ClaudeSession]:
    """Two projects: one session over midnight UTC (and a call at 06:00, a new 5-hour
    block), one of a model no price list knows."""
    alpha, beta = tmp_path / "alpha", tmp_path / "beta"
    alpha.mkdir()
    beta.mkdir()
    first = ClaudeSession(root, alpha, "main", model=SONNET, started=EVENING)
    first.user("add the parser")
    first.say("done", tokens=(100, 200, 3000))  # 23:10:14
    first.clock += timedelta(minutes=60)
    first.say("and the tests", tokens=(10, 50, 4000))  # 00:10:21, the next day in UTC
    first.clock = datetime.fromisoformat("2026-12-01T06:30:00+00:00")
    first.say("later", tokens=(1, 2, 3))  # over 5 hours after the block's start: a new one
    second = ClaudeSession(root, beta, "main", model=UNKNOWN, started=EVENING)
    second.user("hello")
    second.say("hi", tokens=(7, 8, 9))
    first.save()
    second.save()
    return first, second


def sonnet_usd(fresh: int, output: int, read: int) -> float:
    found = pricing.usd(SONNET, fresh=fresh, cache_write=0, cache_read=read, output=output,
                        provider="anthropic", at="2026-12-01")  # fmt: skip
    assert found is not None
    return found


def test_days_sessions_and_blocks_of_imported_sessions(
    home: Path, tmp_path: Path, store_url: str | None
) -> None:
    root = tmp_path / "claude" / "projects"
    transcripts(root, tmp_path)
    shared = ["--store", store_url] if store_url else []
    done = sessiond_cli("--home", str(home), *shared, "import", "claude", "--from", str(root))
    assert done.returncode == 0, done.stderr

    daily = usage(home, store_url, "daily", "--timezone", "UTC", "--by", "model")
    first, second = daily["rows"]
    assert first["key"] == "2026-11-30" and second["key"] == "2026-12-01"
    assert (first["inputTokens"], first["outputTokens"], first["cacheReadTokens"]) == (
        100 + 7, 200 + 8, 3000 + 9)  # fmt: skip
    parts = {part["name"]: part for part in first["breakdown"]}
    assert parts[UNKNOWN]["usd"] is None and parts[UNKNOWN]["unpricedCalls"] == 1
    assert parts[SONNET]["usd"] == pytest.approx(sonnet_usd(100, 200, 3000), abs=1e-6)
    assert first["usd"] == parts[SONNET]["usd"] and first["unpricedCalls"] == 1
    assert (second["inputTokens"], second["outputTokens"]) == (10 + 1, 50 + 2)
    assert second["usd"] == pytest.approx(sonnet_usd(10, 50, 4000) + sonnet_usd(1, 2, 3))
    assert daily["totals"]["calls"] == 4 and daily["totals"]["totalTokens"] == sum(
        (100, 200, 3000, 10, 50, 4000, 1, 2, 3, 7, 8, 9))  # fmt: skip

    # The same calls in New York's days: three on the 30th (06:30Z is 01:30 on the 1st).
    evening, night = usage(home, store_url, "daily", "--timezone", "America/New_York")["rows"]
    assert (evening["key"], evening["calls"], night["key"]) == ("2026-11-30", 3, "2026-12-01")
    rows = usage(home, store_url, "daily", "-z", "America/New_York", "--since", "20261201")
    assert [row["key"] for row in rows["rows"]] == ["2026-12-01"]
    assert rows["rows"][0]["calls"] == 1 and rows["since"] == "2026-12-01"

    monthly = usage(home, store_url, "monthly", "-z", "UTC")
    assert [row["key"] for row in monthly["rows"]] == ["2026-11", "2026-12"]
    weekly = usage(home, store_url, "weekly", "-z", "UTC")  # Monday the 30th starts the week
    assert [row["key"] for row in weekly["rows"]] == ["2026-11-30"]
    weekly = usage(home, store_url, "weekly", "-z", "UTC", "--start-of-week", "tuesday")
    assert [row["key"] for row in weekly["rows"]] == ["2026-11-24", "2026-12-01"]

    sessions = usage(home, store_url, "session", "--by", "project")["rows"]
    assert sorted((row["project"], row["calls"]) for row in sessions) == [
        (str(tmp_path / "alpha"), 3), (str(tmp_path / "beta"), 1)]  # fmt: skip
    assert all(row["agent"] == "claude-code" for row in sessions)

    blocks = usage(home, store_url, "blocks")["rows"]
    assert [(b["startAt"], b["endAt"], b["calls"]) for b in blocks] == [
        ("2026-11-30T23:00:00.000Z", "2026-12-01T04:00:00.000Z", 3),
        ("2026-12-01T06:00:00.000Z", "2026-12-01T11:00:00.000Z", 1),
    ]

    by_agent = usage(home, store_url, "monthly", "--by", "agent", "-z", "UTC")["rows"][0]
    assert [part["name"] for part in by_agent["breakdown"]] == ["claude-code"]

    table = sessiond_cli("--home", str(home), *shared, "usage", "daily", "-z", "UTC",
                         "--by", "model")  # fmt: skip
    assert table.returncode == 0, table.stderr
    line = next(line for line in table.stdout.splitlines() if line.strip().startswith(UNKNOWN))
    assert line.rstrip().endswith("unpriced")  # never $0.00
    assert "+" in next(line for line in table.stdout.splitlines() if line.startswith("2026-11-30"))


def test_calls_recorded_live_are_reported_at_once_and_after_a_restart(
    spawn: Callable[..., ServerProcess], home: Path, store_url: str | None
) -> None:
    server = spawn()
    server.initialize()
    started = server.request("thread/start", {"cwd": str(home)})
    thread_id, session = started["thread"]["threadId"], started["sessionId"]
    items = [{"type": "cost", "id": f"c{n}", "model": SONNET, "inputTokens": 1000 + n,
              "cacheReadTokens": 600, "cacheWriteTokens": 300, "outputTokens": 50,
              "usd": 0.25} for n in range(3)]  # fmt: skip
    items.append({"type": "cost", "id": "u", "model": UNKNOWN, "inputTokens": 5,
                  "outputTokens": 5, "usd": 0, "priced": False})  # fmt: skip
    server.request("thread/record", {"threadId": thread_id, "sessionId": session,
                                     "items": items})  # fmt: skip
    # A sub-agent's thread: its calls are its parent's session's.
    child = server.request("thread/start", {"cwd": str(home), "parentThreadId": thread_id})
    sub = {"type": "cost", "id": "s", "model": SONNET, "inputTokens": 10, "outputTokens": 1,
           "usd": 0.5}  # fmt: skip
    server.request("thread/record", {"threadId": child["thread"]["threadId"],
                                     "sessionId": child["sessionId"], "items": [sub]})  # fmt: skip
    found = server.request("usage/report", {"report": "session", "by": "model",
                                            "timezone": "UTC"})  # fmt: skip
    (row,) = found["rows"]
    assert row["threadId"] == thread_id and row["calls"] == 5 and row["unpricedCalls"] == 1
    assert (row["inputTokens"], row["cacheReadTokens"], row["cacheWriteTokens"]) == (
        3 * 100 + 3 + 5 + 10, 1800, 900)  # fmt: skip
    assert row["usd"] == pytest.approx(1.25)
    parts = {part["name"]: part["usd"] for part in row["breakdown"]}
    assert parts == {SONNET: pytest.approx(1.25), UNKNOWN: None}

    with pytest.raises(RpcError) as bad:
        server.request("usage/report", {"report": "daily", "timezone": "Mars/Olympus"})
    assert (bad.value.kind, bad.value.data["field"]) == ("InvalidParams", "timezone")
    with pytest.raises(RpcError) as bad:
        server.request("usage/report", {"since": "yesterday"})
    assert bad.value.data["field"] == "since"

    server.shutdown()
    assert usage(home, store_url, "session", "-z", "UTC")["rows"][0]["calls"] == 5
    if store_url is None:  # the index is derived: rebuilt from the thread files, the same
        for path in home.glob("index.sqlite3*"):
            os.unlink(path)
        again = usage(home, store_url, "session", "-z", "UTC")
        assert again["rows"][0]["calls"] == 5 and again["totals"] == found["totals"]
    daily = usage(home, store_url, "daily", "-z", "UTC")
    assert daily["totals"] == found["totals"]  # the day's sums, kept apart, agree

    # A deleted thread's calls are gone from every report.
    shared = ["--store", store_url] if store_url else []
    for deleted in (child["thread"]["threadId"], thread_id):
        gone = sessiond_cli("--home", str(home), *shared, "delete", "--yes", deleted)
        assert gone.returncode == 0, gone.stderr
    for report in ("daily", "session", "blocks"):
        assert usage(home, store_url, report)["rows"] == []
