"""1. worktree: where the thread runs — cwd, repo root and identity, branch, HEAD, worktree.

Never invalidated silently: every difference with the current environment is drift.
"""

from __future__ import annotations

from typing import Any

from restore.engine.outcome import Outcome

NAME = "worktree"
FIELDS = ("cwd", "repoRoot", "repoId", "branch", "headSha", "worktree")


def initial() -> dict[str, Any]:
    return {}


def reduce(state: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    if item.get("type") == "session_meta":
        return {key: item.get(key) for key in FIELDS}
    return state


def validate(state: dict[str, Any], ctx: Any) -> Any:
    if not state:
        return Outcome("empty", state)
    blocking = [d["field"] for d in ctx.drift if d["severity"] == "block"]
    warning = [d["field"] for d in ctx.drift if d["severity"] == "warn"]
    if blocking:
        return Outcome("invalidated", state, "workspace differs: " + ", ".join(blocking))
    if warning:
        return Outcome("restored", state, "moved since: " + ", ".join(warning))
    return Outcome("restored", state)
