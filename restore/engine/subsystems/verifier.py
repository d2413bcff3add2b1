"""11. verifier: the last checkpoint of each verifier (e.g. tests 7/9 at HEAD X).

A checkpoint is trusted only while nothing it verified has moved: HEAD, a verified file, or
an agent edit made after it. Otherwise it comes back invalidated or pending — never as a
pass the code no longer earns.
"""

from __future__ import annotations

from typing import Any

from restore.engine.outcome import Outcome

NAME = "verifier"
FIELDS = ("name", "passed", "total", "headSha", "seq")


def initial() -> dict[str, Any]:
    return {"checkpoints": {}, "lastEffectSeq": 0}


def reduce(state: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    """Updates `state` in place."""
    kind = item.get("type")
    if kind == "verifier" and isinstance(item.get("name"), str):
        state["checkpoints"][item["name"]] = {key: item.get(key) for key in FIELDS}
    elif kind == "file_edit" or (
        kind == "operation"
        and item.get("effect") == "side_effect"
        and item.get("state") in ("started", "committed")
    ):
        state["lastEffectSeq"] = max(state["lastEffectSeq"], int(item.get("seq") or 0))
    return state


def validate(state: dict[str, Any], ctx: Any) -> Any:
    head = ctx.current.get("headSha")
    history = ctx.results.get("file_history")
    diverged = any(f.get("diverged") for f in (history.state["files"] if history else []))
    checkpoints = []
    problems = []
    for checkpoint in state["checkpoints"].values():
        reasons = []
        if checkpoint.get("headSha") and head and checkpoint["headSha"] != head:
            reasons.append("HEAD moved")
        if diverged:
            reasons.append("a verified file changed")
        if (checkpoint.get("seq") or 0) < state["lastEffectSeq"]:
            reasons.append("pending: edits since it ran")
        checkpoints.append({**checkpoint, "valid": not reasons, "reasons": reasons})
        if reasons:
            problems.append(f"{checkpoint['name']}: {', '.join(reasons)}")
    result = {
        "checkpoints": checkpoints,
        "pending": any("pending: edits since it ran" in c["reasons"] for c in checkpoints),
    }
    if not checkpoints:
        return Outcome("empty", result)
    if problems:
        return Outcome("invalidated", result, "; ".join(problems))
    return Outcome("restored", result)
