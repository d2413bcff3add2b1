"""Recorded text made safe to show, and counted nouns: shared by the terminal
(server/cli/terminal.py) and every document style.

Titles, messages and branch names come from clients and repositories. Printed raw, an
escape sequence in one could move the cursor, rewrite earlier lines, retitle the window or
hide text; so every control character (C0, DEL, C1) and every bidirectional override is
shown as a visible escape (`\\x1b`, `\\u202e`) instead.
"""

from __future__ import annotations

import re
from typing import Any

# Bidi embeddings, overrides and isolates (Trojan Source): they reorder what is shown.
_BIDI = "\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}]")
_UNSAFE_IN_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def safe(text: str, *, one_line: bool = False) -> str:
    """`text` with nothing a terminal would act on; tabs and newlines are kept unless
    `one_line` (a table cell), where they too are shown as escapes."""
    return (_UNSAFE_IN_LINE if one_line else _UNSAFE).sub(_visible, text)


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """`1 thread file`, `3 thread files`."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"


def content_text(value: Any) -> str:
    """Message content as text: parts joined, images and other non-text parts named."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for part in value:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, dict):
                parts.append(f"[{part.get('type', 'part')}]")
            else:
                parts.append(str(part))
        return "\n".join(parts)
    return "" if value is None else str(value)
