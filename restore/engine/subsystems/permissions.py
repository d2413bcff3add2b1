"""2. permissions: approval mode, sandbox policy, tool profile — from the record only.

Never guessed from prompt text. A dangerous mode (bypass, full access) is not restored
as is: it comes back downgraded to asking, and the report says so.
"""

from __future__ import annotations

from typing import Any

from restore.engine.outcome import Outcome

NAME = "permissions"
DANGEROUS_APPROVAL = frozenset(
    {"bypass", "bypassPermissions", "never", "yolo", "dangerously-skip-permissions"}
)
DANGEROUS_SANDBOX = frozenset({"danger-full-access"})
SAFE_APPROVAL = "on-request"
SAFE_SANDBOX = "workspace-write"


def initial() -> dict[str, Any]:
    return {}


def _fields(source: dict[str, Any]) -> dict[str, Any]:
    return {k: source.get(k) for k in ("approvalMode", "sandbox", "toolProfile")}


def reduce(state: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    kind = item.get("type")
    if kind == "permissions":
        return _fields(item)
    if kind == "session_meta" and isinstance(item.get("permissions"), dict) and not state:
        return _fields(item["permissions"])
    return state


def downgrade(state: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The state to restore and what was downgraded (empty when nothing was)."""
    restored = dict(state)
    changes: list[str] = []
    if restored.get("approvalMode") in DANGEROUS_APPROVAL:
        changes.append(f"approvalMode {restored['approvalMode']} -> {SAFE_APPROVAL}")
        restored["downgradedFrom"] = {"approvalMode": restored["approvalMode"]}
        restored["approvalMode"] = SAFE_APPROVAL
    if restored.get("sandbox") in DANGEROUS_SANDBOX:
        changes.append(f"sandbox {restored['sandbox']} -> {SAFE_SANDBOX}")
        restored.setdefault("downgradedFrom", {})["sandbox"] = restored["sandbox"]
        restored["sandbox"] = SAFE_SANDBOX
    return restored, changes


def validate(state: dict[str, Any], ctx: Any) -> Any:
    if not state:
        return Outcome("empty", state)
    restored, changes = downgrade(state)
    if changes:
        reason = "dangerous mode downgraded on resume: " + "; ".join(changes)
        return Outcome("restored", restored, reason)
    return Outcome("restored", restored)
