"""7. file_history: every agent edit (path, before/after blob, turn), checked against disk.

A file whose content no longer matches the agent's last edit is `diverged`: the agent must
not assume its own version is still there. The state keeps the latest edit per file (a
rewind reads the full history from the thread file), so it stays small. An edit recorded
without its contents (`contentKnown: false`: an imported diff) cannot be checked against
the disk, so its `diverged` is null rather than a guess.
"""

from __future__ import annotations

from typing import Any

from restore.engine.outcome import Outcome

NAME = "file_history"
FIELDS = ("path", "beforeSha", "afterSha", "author", "operationId", "turnId", "seq")


def initial() -> dict[str, Any]:
    return {"latest": {}, "edits": 0}


def reduce(state: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    """Updates `state` in place."""
    if item.get("type") == "file_edit" and isinstance(item.get("path"), str):
        edit = {key: item.get(key) for key in FIELDS}
        if item.get("contentKnown") is False:
            edit["contentKnown"] = False
        state["latest"][item["path"]] = edit
        state["edits"] += 1
    return state


def validate(state: dict[str, Any], ctx: Any) -> Any:
    files = []
    for path, edit in state["latest"].items():
        current = ctx.file_sha(path)  # None too for a path outside the workspace
        diverged = None if edit.get("contentKnown") is False else current != edit["afterSha"]
        entry = {**edit, "currentSha": current, "diverged": diverged}
        if refused := ctx.why_unreadable(path):
            entry["refused"] = refused
        files.append(entry)
    result = {"files": files, "edits": state["edits"]}
    if not files:
        return Outcome("empty", result)
    diverged = [f["path"] for f in files if f["diverged"]]
    if diverged:
        return Outcome("invalidated", result, "changed since the last edit: " + ", ".join(diverged))
    return Outcome("restored", result)
