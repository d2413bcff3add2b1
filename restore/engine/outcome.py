"""What a subsystem's validator is given and decides: the world as `RestoreContext` shows
it, and the `Outcome`. Apart from the subsystems' package (which imports every subsystem)
so that each subsystem imports it without importing itself back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass
class Outcome:
    """What a validator decided: `restored`, `invalidated`, `empty` or `error`, and why."""

    status: str
    state: Any
    reason: str | None = None


class RestoreContext(Protocol):
    """What validators may ask about the world; the engine implements it with real I/O."""

    recorded: dict[str, Any]
    current: dict[str, Any]
    drift: list[dict[str, Any]]
    available_models: list[str] | None
    results: dict[str, Outcome]
    subagents: list[dict[str, Any]]
    """The sub-agent threads this one started, each `{threadId, title, cost}` (`cost`: that
    thread's cost state with its own sub-agents', None when it is missing)."""

    def file_sha(self, path: str) -> str | None: ...

    def read_text(self, path: str) -> str | None: ...

    def why_unreadable(self, path: str) -> str | None:
        """Why `file_sha`/`read_text` gave None for a path that may exist: outside the
        workspace, not a regular file, too large. None: it simply is not there."""
        ...
