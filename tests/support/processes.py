"""Processes seen from outside, through /proc (Linux)."""

from __future__ import annotations

from pathlib import Path


def alive(pid: int) -> bool:
    """Running (a zombie nobody reaped yet counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def command_line(pid: int, limit: int = 300) -> str:
    """`pid`'s command line, as one line, cut at `limit` characters."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    text = raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")
    return text if len(text) <= limit else text[: limit - 1] + "…"
