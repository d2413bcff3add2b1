"""9. cost: tokens and money, cumulative across sessions; never reset by clear or resume.

A model without a known price (an imported session's, say) counts its tokens and is
marked `priced: false`, so its `usd` of 0 is never read as free.

Sub-agents run in threads of their own, and what they cost is the parent's too (Claude
Code's own total includes them): the state remembers the child threads the parent's
operations started (`childThreadId`), the resume reads their costs (the context's
`subagents`), and the restored state shows them as a line of their own (`subagents`) and
in the totals (`own` keeps the thread's own share).
"""

from __future__ import annotations

from typing import Any

NAME = "cost"


def initial() -> dict[str, Any]:
    return {"inputTokens": 0, "outputTokens": 0, "usd": 0.0, "byModel": {},
            "subagentThreads": []}  # fmt: skip


def _add(target: dict[str, Any], item: dict[str, Any]) -> None:
    target["inputTokens"] += int(item.get("inputTokens") or 0)
    target["outputTokens"] += int(item.get("outputTokens") or 0)
    target["usd"] = round(target["usd"] + float(item.get("usd") or 0.0), 10)


def reduce(state: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    """Updates `state` in place."""
    kind = item.get("type")
    if kind == "cost":
        _add(state, item)
        model = str(item.get("model") or "unknown")
        per_model = state["byModel"].setdefault(
            model, {"inputTokens": 0, "outputTokens": 0, "usd": 0.0}
        )
        _add(per_model, item)
        if item.get("priced") is False:
            per_model["priced"] = False
    elif kind == "operation" and isinstance(item.get("childThreadId"), str):
        children = state.setdefault("subagentThreads", [])  # absent from older snapshots
        if item["childThreadId"] not in children:
            children.append(item["childThreadId"])
    return state


def with_subagents(state: dict[str, Any], subagents: list[dict[str, Any]]) -> dict[str, Any]:
    """The thread's cost with its sub-agents' (each `{threadId, title, cost}`, `cost` a
    state of this subsystem or None when the thread is missing) added: totals and
    `byModel` cover both, `own` is the thread's share, `subagents` theirs."""
    result = {key: value for key, value in state.items() if key != "subagentThreads"}
    if not subagents:
        return result
    by_model = {model: dict(row) for model, row in state["byModel"].items()}
    line: dict[str, Any] = {"threads": len(subagents), "inputTokens": 0, "outputTokens": 0,
                            "usd": 0.0, "missing": 0, "items": []}  # fmt: skip
    for child in subagents:
        cost = child.get("cost")
        entry = {"threadId": child["threadId"], "title": child.get("title")}
        if cost is None:
            line["missing"] += 1
            line["items"].append({**entry, "missing": True})
            continue
        _add(line, cost)
        tokens = {key: cost[key] for key in ("inputTokens", "outputTokens", "usd")}
        line["items"].append({**entry, **tokens})
        for model, row in cost["byModel"].items():
            target = by_model.setdefault(model, {"inputTokens": 0, "outputTokens": 0, "usd": 0.0})
            _add(target, row)
            if row.get("priced") is False:
                target["priced"] = False
    own = {key: state[key] for key in ("inputTokens", "outputTokens", "usd")}
    total = dict(own)
    _add(total, line)
    return {**result, **total, "byModel": by_model, "own": own, "subagents": line}


def validate(state: dict[str, Any], ctx: Any) -> Any:
    from restore.subsystems import Outcome

    restored = with_subagents(state, getattr(ctx, "subagents", None) or [])
    status = "restored" if restored["byModel"] or restored.get("subagents") else "empty"
    missing = restored.get("subagents", {}).get("missing")
    reason = (
        f"{missing} sub-agent thread(s) not found: their cost is not counted" if missing else None
    )
    return Outcome(status, restored, reason)
