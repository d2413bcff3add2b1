"""8. attribution: which changes are the agent's and which the user's, per file.

A `permission_decision` (the user allowed or rejected an agent's tool call, ACP
`session/request_permission`) counts as `approved` / `rejected` on the files the tool call
touches: an approved change is still the agent's, but the user saw it first.
"""

from __future__ import annotations

from typing import Any

from restore.engine.outcome import Outcome

NAME = "attribution"


def initial() -> dict[str, Any]:
    return {"files": {}}


def reduce(state: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    """Updates `state` in place."""
    if item.get("type") == "file_edit" and isinstance(item.get("path"), str):
        author = "user" if item.get("author") == "user" else "agent"
        entry = state["files"].setdefault(item["path"], {"agent": 0, "user": 0})
        entry[author] += 1
        entry["lastAuthor"] = author
    elif item.get("type") == "permission_decision" and isinstance(item.get("paths"), list):
        decision = "approved" if item.get("allowed") is True else "rejected"
        for path in item["paths"]:
            if isinstance(path, str):
                entry = state["files"].setdefault(path, {"agent": 0, "user": 0})
                entry[decision] = entry.get(decision, 0) + 1
    return state


def validate(state: dict[str, Any], ctx: Any) -> Any:
    history = ctx.results.get("file_history")
    checked = history.state["files"] if history else []
    # A file sessiond may not read (outside the workspace, not a regular file) is unknown,
    # not "changed by someone else".
    outside = [f["path"] for f in checked if f.get("diverged") and not f.get("refused")]
    unchecked = {f["path"] for f in checked if f.get("refused")}
    files = {
        path: {**entry, "changedOutsideAgent": path in outside}
        | ({"unchecked": True} if path in unchecked else {})
        for path, entry in state["files"].items()
    }
    if not files:
        return Outcome("empty", {"files": {}})
    if outside:
        reason = "changed outside the agent: " + ", ".join(outside)
        return Outcome("invalidated", {"files": files}, reason)
    return Outcome("restored", {"files": files})
