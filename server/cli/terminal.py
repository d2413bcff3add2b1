"""Text for a person's terminal: recorded strings made safe to print, times as a person
says them, and aligned columns.

Titles, messages and branch names come from clients and repositories: `safe` (kept in
restore/render/text.py, which every document style shares) shows each control character
and bidirectional override as a visible escape instead of sending it to the terminal.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from restore.render.text import plural, safe

__all__ = ["clip", "plural", "print_json", "relative_time", "safe", "table", "width"]


def width(text: str) -> int:
    """Columns `text` takes on a terminal (wide CJK characters take two)."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def clip(text: str, columns: int) -> str:
    """At most `columns` wide, with an ellipsis when cut."""
    if width(text) <= columns:
        return text
    out, used = [], 0
    for char in text:
        used += width(char)
        if used > columns - 1:
            break
        out.append(char)
    return "".join(out) + "…"


def relative_time(iso: str | None, now: datetime | None = None) -> str:
    """How long ago, as the extension's thread rows say it: `just now`, `5 min ago`, `3h ago`,
    `2d ago`, `2w ago`, else the date."""
    if not iso:
        return "-"
    try:
        then = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return iso[:10]
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    seconds = ((now or datetime.now(UTC)) - then).total_seconds()
    minutes, hours, days = int(seconds // 60), int(seconds // 3600), int(seconds // 86400)
    if seconds < 45:
        return "just now"
    if minutes < 60:
        return f"{max(1, minutes)} min ago"
    if hours < 24:
        return f"{hours}h ago"
    if days < 7:
        return f"{days}d ago"
    if days < 30:
        return f"{days // 7}w ago"
    return iso[:10]


def table(header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> str:
    """Columns padded to their widest cell (header included); `right` aligns numbers.
    The last column is not padded, so lines carry no trailing blanks."""
    cells = [list(header), *[list(row) for row in rows]]
    widths = [max(width(row[i]) for row in cells) for i in range(len(header))]
    lines = []
    for row in cells:
        parts = []
        for i, cell in enumerate(row):
            pad = " " * (widths[i] - width(cell))
            if i == len(row) - 1:
                parts.append(pad + cell if i in right else cell)
            else:
                parts.append(pad + cell if i in right else cell + pad)
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def print_json(value: Any) -> None:
    """One JSON value on its own line of stdout (`--json`: for scripts, not a person)."""
    import sys

    import orjson

    sys.stdout.buffer.write(orjson.dumps(value) + b"\n")
