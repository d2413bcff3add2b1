"""Text from threads made safe to print on a terminal.

Titles, previews and message content are whatever a client recorded. Printed raw, an
escape sequence in them is obeyed by the terminal: an OSC 52 sequence writes the
clipboard, others clear the screen, retitle the window or hide the text that follows.
Every control character (C0 but tab and newline, DEL, C1) and the bidirectional
overrides of "Trojan Source" are shown as visible `\\xNN` / `\\uNNNN` escapes instead.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_LINE_BREAKS = re.compile(r"[\t\n]")


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, one_line: bool = False) -> str:
    """`text` with every terminal control made visible; `one_line` also turns tabs and
    newlines into spaces (a row of a table)."""
    text = _UNSAFE.sub(_shown, text)
    return _LINE_BREAKS.sub(" ", text) if one_line else text
