"""7. file_history: every agent edit (path, before/after blob, turn), checked against disk.

A file whose content no longer matches the agent's last edit is `diverged`: the agent must
not assume its own version is still there.
"""

from __future__ import annotations

from typing import Any

NAME = "file_history"
FIELDS = ("path", "beforeSha", "afterSha", "author", "operationId", "turnId", "seq")


def initial() -> dict[str, Any]:
    return {"edits": []}


def reduce(state: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    """Updates `state` in place."""
    if item.get("type") == "file_edit" and isinstance(item.get("path"), str):
        state["edits"].append({key: item.get(key) for key in FIELDS})
    return state


def latest_by_path(state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    latest: dict[str, dict[str, Any]] = {}
    for edit in state["edits"]:
        latest[edit["path"]] = edit
    return latest


def validate(state: dict[str, Any], ctx: Any) -> Any:
    from restore.subsystems import Outcome

    files = []
    for path, edit in latest_by_path(state).items():
        current = ctx.file_sha(path)
        files.append({**edit, "currentSha": current, "diverged": current != edit["afterSha"]})
    result = {"files": files, "edits": len(state["edits"])}
    if not files:
        return Outcome("empty", result)
    diverged = [f["path"] for f in files if f["diverged"]]
    if diverged:
        return Outcome("invalidated", result, "changed since the last edit: " + ", ".join(diverged))
    return Outcome("restored", result)
