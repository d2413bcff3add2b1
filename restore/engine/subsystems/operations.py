"""10. operations: the ledger of side-effecting tool calls and what to do with open ones.

Each operation moves forward only: planned → started → committed | failed. Resume sorts
every open one into a recovery class, so an agent never repeats a side effect blindly:

- planned → `not_started` (safe to run);
- started, read-only or idempotent tool → `safe_to_retry`;
- started, side-effecting tool → `needs_review` (never re-run automatically);
- committed, result not persisted → `committed_result_missing` (recover the result).

For edits sessiond applies itself (`fs/applyEdit`) the content hash decides instead:
file == after → committed; file == before → not applied; anything else → conflict.
"""

from __future__ import annotations

from typing import Any

from restore.engine.outcome import Outcome

NAME = "operations"
APPLY_EDIT_TOOL = "fs/applyEdit"
RANK = {"planned": 0, "started": 1, "committed": 2, "failed": 2}
FIELDS = (
    "operationId", "tool", "argsDigest", "effect", "state", "resultPersisted", "turnId",
    "path", "beforeSha", "afterSha",
)  # fmt: skip


def initial() -> dict[str, Any]:
    return {"open": {}, "closed": {}}


def is_closed(op: dict[str, Any]) -> bool:
    return op["state"] == "failed" or (op["state"] == "committed" and bool(op["resultPersisted"]))


def transition(state: dict[str, Any], item: dict[str, Any]) -> str:
    """How a new operation item relates to the ledger: "new", "duplicate" or "conflict"."""
    op_id = item["operationId"]
    if op_id in state["closed"]:
        return "duplicate" if item["state"] == state["closed"][op_id] else "conflict"
    current = state["open"].get(op_id)
    if current is None:
        return "new"
    old, new = RANK[current["state"]], RANK[item["state"]]
    if new > old:
        return "new"
    if item["state"] == current["state"]:
        if item["state"] == "committed" and item.get("resultPersisted"):
            return "new"  # the result was persisted later: that closes the operation
        return "duplicate"
    return "conflict"


def reduce(state: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    """Updates `state` in place; a conflicting item (rejected at record time) is ignored."""
    if item.get("type") != "operation" or not isinstance(item.get("operationId"), str):
        return state
    if item.get("state") not in RANK or transition(state, item) != "new":
        return state
    op_id = item["operationId"]
    merged = {**state["open"].get(op_id, {})}
    merged.update({key: item[key] for key in FIELDS if item.get(key) is not None})
    merged.setdefault("resultPersisted", False)
    merged["seq"] = item.get("seq")
    if is_closed(merged):
        state["open"].pop(op_id, None)
        state["closed"][op_id] = merged["state"]
    else:
        state["open"][op_id] = merged
    return state


def classify(op: dict[str, Any], ctx: Any) -> tuple[str, str | None]:
    """The recovery class of an open operation, and how it was decided."""
    if op.get("tool") == APPLY_EDIT_TOOL and op.get("path") and op["state"] != "planned":
        current = ctx.file_sha(op["path"])
        if current == op.get("afterSha"):
            return "committed_result_missing", "hash: the file holds the edit"
        if current == op.get("beforeSha"):
            return "not_started", "hash: the file is unchanged; the edit was not applied"
        return "needs_review", "hash: the file matches neither side of the edit"
    if op["state"] == "planned":
        return "not_started", None
    if op["state"] == "committed":
        return "committed_result_missing", None
    if op.get("effect") in ("read", "idempotent"):
        return "safe_to_retry", None
    return "needs_review", None


def validate(state: dict[str, Any], ctx: Any) -> Any:
    pending = []
    for op in state["open"].values():
        recovery, decided_by = classify(op, ctx)
        entry = {
            "operationId": op["operationId"],
            "tool": op.get("tool"),
            "state": op["state"],
            "recovery": recovery,
            "effect": op.get("effect"),
            "argsDigest": op.get("argsDigest"),
            "seq": op.get("seq"),
        }
        if decided_by:
            entry["decidedBy"] = decided_by
        if op.get("path"):
            entry["path"] = op["path"]
        pending.append(entry)
    result = {"open": pending, "closed": len(state["closed"])}
    if not pending:
        return Outcome("empty" if not state["closed"] else "restored", result)
    attention = [
        p for p in pending if p["recovery"] in ("needs_review", "committed_result_missing")
    ]
    reason = f"{len(pending)} open operation(s), {len(attention)} need attention"
    return Outcome("restored", result, reason)
