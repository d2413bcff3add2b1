"""`eventually()`: the one way a test waits for something another process does."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

HANG_GUARD = 60.0
"""Seconds before a test gives up waiting (a guard against a hang, not a performance
limit: nothing here says how fast anything must be)."""


def eventually(
    check: Callable[[], T],
    what: str = "the awaited change",
    *,
    patience: float = HANG_GUARD,
    every: float = 0.05,
) -> T:
    """`check()`'s first truthy result, looked at every `every` seconds; a failure
    naming `what` if none came within `patience`."""
    deadline = time.monotonic() + patience
    while not (found := check()):
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(every)
    return found
