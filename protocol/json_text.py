"""JSON as the agents and editors really write it: a lone UTF-16 surrogate mended, not a
whole message or line lost.

Node's `JSON.stringify` writes a string's lone surrogate (half of an emoji, left by a
truncation at a UTF-16 offset: a tool output cut to N characters, a model's broken
stream) as an escape, `"\\ud83d"`. RFC 8259 leaves such text's meaning open; orjson
refuses it, and with it the line or message that holds it: a Claude Code transcript's
answer skipped as `invalid_json`, an ACP agent's update dropped by the proxy, a record
refused as a parse error (anthropics/claude-code#69927: the same half character then
broke every later request of that session). Here each lone surrogate escape becomes
U+FFFD, what a UTF-16 decoder shows for it, and the rest is parsed as it is; a pair
(`\\ud83d\\ude00`) and an escaped backslash before `u` (`\\\\ud83d`, text) are left alone.

No module imports pydantic here: the server's read loop uses it.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

_ESCAPES = re.compile(
    rb"(\\\\)"  # an escaped backslash: what follows it is text, not an escape
    rb"|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"  # a pair: one character
    rb"|\\u[dD][89a-fA-F][0-9a-fA-F]{2}"  # a lone half
)
_MAY_HOLD = re.compile(rb"\\u[dD][89a-fA-F]")


def _mend(match: re.Match[bytes]) -> bytes:
    text = match.group()
    return text if match.group(1) or len(text) == 12 else rb"\ufffd"


def loads(data: bytes | str) -> tuple[Any, bool]:
    """`data` parsed, and whether a lone surrogate escape in it was mended. Raises
    `orjson.JSONDecodeError` as `orjson.loads` does for anything else."""
    try:
        return orjson.loads(data), False
    except orjson.JSONDecodeError:
        raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
        if not _MAY_HOLD.search(raw):
            raise
        mended = _ESCAPES.sub(_mend, raw)
        if mended == raw:
            raise
        return orjson.loads(mended), True


def deepest_past(value: Any, limit: int) -> int | None:
    """How deep `value` (parsed JSON) nests, when deeper than `limit` (the value itself is
    level 1); else None. Without recursion, so no depth can overflow the check itself."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest if deepest > limit else None
