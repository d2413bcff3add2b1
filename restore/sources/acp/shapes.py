"""What ACP sends, as sessiond reads it: the update kinds that are chunks, tool states and
their order, the limits a recorded field keeps to, and the small parts a recorder builds
items from (`Recorded`, deterministic operation ids, merged content blocks)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

CHUNKS = {
    "user_message_chunk": ("assistant", False),  # from AGENT: its words, not the person's
    "agent_message_chunk": ("assistant", False),
    "agent_thought_chunk": ("assistant", True),
}
OPEN_STATES = frozenset({"planned", "started"})
TOOL_TEXT_LIMIT = 4000
"""Characters of one tool call's input or output a priming block carries."""
PROBE = 200
"""Characters of a prompt or answer looked for in AGENT's replay (`lost_turns`)."""
PRIMING_LIMIT = 200_000
"""Characters of history a priming block carries at most: the newest entries win."""
TOOL_STATES = {
    "pending": "planned",
    "in_progress": "started",
    "completed": "committed",
    "failed": "failed",
}
RANK = {"planned": 0, "started": 1, "committed": 2, "failed": 2}
READ_ONLY_KINDS = frozenset({"read", "search", "think", "fetch"})
TOOL_FIELDS = ("title", "kind", "status", "content", "locations", "rawInput", "rawOutput")
TODO_STATUSES = frozenset({"pending", "in_progress", "completed"})
OPERATION_ID_MAX = 128
SESSION_CAPABILITIES = ("list", "resume", "close", "delete")
SESSION_STATE = ("modes", "models", "configOptions")
"""What of AGENT's session answer the editor keeps showing (its mode and model pickers)."""
"""What `sessiond acp` answers itself, whatever AGENT supports."""


@dataclass
class Recorded:
    """Items to append, in order, and the blobs they name (store those first)."""

    items: list[dict[str, Any]] = field(default_factory=list)
    blobs: dict[str, bytes] = field(default_factory=dict)
    shown: list[dict[str, Any]] = field(default_factory=list)
    """`session/update` params made here (not AGENT's) that the editor must be sent too."""

    def add(self, other: Recorded) -> Recorded:
        self.items += other.items
        self.blobs.update(other.blobs)
        self.shown += other.shown
        return self


@dataclass
class _Parts:
    """Content blocks merged as they stream: consecutive text chunks are kept as pieces
    and joined once, when the message ends (joining at every chunk copied the whole text
    so far each time: 20,000 chunks of 1 KB took minutes)."""

    parts: list[dict[str, Any]] = field(default_factory=list)
    _texts: list[str] = field(default_factory=list)

    def add(self, block: Any) -> None:
        if not isinstance(block, dict):
            return
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            self._texts.append(block["text"])
            return
        if isinstance(block.get("type"), str):
            self._close_text()
            self.parts.append(dict(block))

    def done(self) -> list[dict[str, Any]]:
        self._close_text()
        return self.parts

    def _close_text(self) -> None:
        if self._texts:
            self.parts.append({"type": "text", "text": "".join(self._texts)})
            self._texts = []


@dataclass
class _Message:
    ord: int
    kind: str
    message_id: str | None
    parts: _Parts


@dataclass
class _Tool:
    operation_id: str
    fields: dict[str, Any]
    state: str | None = None
    parent: str | None = None
    """The operation of the call that started this one's sub-agent, if any."""
    recorded_input: Any = None
    """The `rawInput` an operation item of this call carries already (for search)."""


def sha_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _object(value: Any) -> dict[str, Any]:
    """`value` if it is a JSON object, else an empty one (a field a peer left out or
    sent as something else)."""
    return value if isinstance(value, dict) else {}


def _clean(item: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in item.items() if value is not None}


def _operation_id(scope: str, tool_call_id: str) -> str:
    """Unique in the thread: tool call ids are unique only within one AGENT session."""
    candidate = f"{scope}:{tool_call_id}"
    if len(candidate) <= OPERATION_ID_MAX:
        return candidate
    return f"{scope}:{sha_of(tool_call_id.encode())[:40]}"


def _merged(blocks: Iterable[Any]) -> list[dict[str, Any]]:
    """Text blocks merged into one text part; other content blocks kept as they are."""
    parts = _Parts()
    for block in blocks:
        parts.add(block)
    return parts.done()


def _paths(tool: dict[str, Any]) -> list[str]:
    found: list[str] = []
    for location in tool.get("locations") or []:
        if isinstance(location, dict) and isinstance(location.get("path"), str):
            found.append(location["path"])
    for content in tool.get("content") or []:
        diff = isinstance(content, dict) and content.get("type") == "diff"
        if diff and isinstance(content.get("path"), str):
            found.append(content["path"])
    return list(dict.fromkeys(found))


def _text_blob(text: Any, blobs: dict[str, bytes]) -> str | None:
    if not isinstance(text, str):
        return None
    data = text.encode()
    sha = sha_of(data)
    blobs[sha] = data
    return sha
