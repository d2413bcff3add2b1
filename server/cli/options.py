"""What several commands share and `main` must not own (they import it, it imports them):
the one-line failure, and argument types whose refusal names what they take."""

from __future__ import annotations

import argparse

MAX_LIMIT = 200
MIN_FRAME = 1024
"""The smallest `--max-frame`: less could not hold a client's `initialize`."""
THREAD_ID_HELP = "a thread id, or its first 4 or more hex digits (as list and search print)"


class CommandError(Exception):
    """A known failure of a command, printed as one line: `sessiond: <message>`."""


def limit(text: str) -> int:
    """`--limit`: 1 to 200 (a page of the store), else argparse's one-line usage error."""
    return _at_least(text, 1, MAX_LIMIT, f"takes a number from 1 to {MAX_LIMIT}")


def frame_size(text: str) -> int:
    """`--max-frame`: bytes, MIN_FRAME or more."""
    return _at_least(text, MIN_FRAME, None, f"takes a number of bytes, {MIN_FRAME} or more")


def _at_least(text: str, low: int, high: int | None, takes: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if value < low or (high is not None and value > high):
        raise argparse.ArgumentTypeError(f"{takes}, not {text!r}")
    return value
