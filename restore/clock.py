"""The time records are stamped with and freshness is judged at, and the test-only way to
move it.

`SESSIOND_TEST_CLOCK=<file>`, for tests only: the file holds a number of seconds (a float)
the process's clock runs ahead of the system's, read each time the clock is asked. Records
are stamped by it and `thread/continue` judges by it, so a test moves time forward by
writing the file, in real server processes, instead of waiting for an idle limit or a
day to pass (tests/test_continue.py, tests/test_continue_concurrency.py). A missing or
unreadable file is no offset. Unset (read once, when this module is imported), nothing of
it runs.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

ENV = "SESSIOND_TEST_CLOCK"
TEST_CLOCK = os.environ.get(ENV) or None


def now() -> datetime:
    """Now, aware, in UTC (ahead by the test clock's offset where one is set)."""
    current = datetime.now(UTC)
    if TEST_CLOCK is None:
        return current
    try:
        with open(TEST_CLOCK, encoding="ascii") as file:
            offset = float(file.read().strip() or 0)
    except (OSError, ValueError):
        return current
    return current + timedelta(seconds=offset)


def parse_ts(ts: str) -> datetime:
    """A stored timestamp (`2026-03-10T12:00:00.123456Z`), aware, in UTC."""
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).astimezone(UTC)
