"""9. cost: tokens and money, cumulative across sessions; never reset by clear or resume.

A model without a known price (an imported session's, say) counts its tokens and is
marked `priced: false`, so its `usd` of 0 is never read as free.

Sub-agents run in threads of their own, and what they cost is the parent's too (Claude
Code's own total includes them): the state remembers the child threads the parent's
operations started (`childThreadId`), the resume reads their costs (the context's
`subagents`), and the restored state shows them as a line of their own (`subagents`) and
in the totals (`own` keeps the thread's own share).

An agent's own running totals can hold model calls no transcript line does (Claude Code's
`/compact`): the importer records what they hold beyond the transcript's replies as
`cost_reported` items. Those include the sub-agents' calls, which the children's threads
already count, so the restored state shows what is left once the children's costs are
taken out (per model, never below zero) as a line of its own, `unrecorded`, and in the
totals.
"""

from __future__ import annotations

from typing import Any

from restore.engine.outcome import Outcome

NAME = "cost"
TOKENS = ("inputTokens", "outputTokens")


def initial() -> dict[str, Any]:
    return {"inputTokens": 0, "outputTokens": 0, "usd": 0.0, "byModel": {}, "subagentThreads": []}


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
    elif kind == "cost_reported":
        reported = state.setdefault("reported", {})  # absent from older snapshots
        model = str(item.get("model") or "unknown")
        row = reported.setdefault(model, {"inputTokens": 0, "outputTokens": 0, "usd": 0.0})
        _add(row, item)
        if item.get("priced") is False:
            row["priced"] = False
    elif kind == "operation" and isinstance(item.get("childThreadId"), str):
        children = state.setdefault("subagentThreads", [])  # absent from older snapshots
        if item["childThreadId"] not in children:
            children.append(item["childThreadId"])
    return state


def with_subagents(state: dict[str, Any], subagents: list[dict[str, Any]]) -> dict[str, Any]:
    """The thread's cost with its sub-agents' (each `{threadId, title, cost}`, `cost` a
    state of this subsystem or None when the thread is missing) and what only the agent's
    own totals hold (`reported`, less the sub-agents' costs) added: totals and `byModel`
    cover them all, `own` is the thread's share, `subagents` and `unrecorded` theirs."""
    result = {k: v for k, v in state.items() if k not in ("subagentThreads", "reported")}
    reported = state.get("reported") or {}
    if not subagents and not reported:
        return result
    by_model = {model: dict(row) for model, row in state["byModel"].items()}
    own = {key: state[key] for key in ("inputTokens", "outputTokens", "usd")}
    total = dict(own)
    lines: dict[str, Any] = {}
    children: dict[str, dict[str, Any]] = {}  # the sub-agents' costs per model
    if subagents:
        line = lines["subagents"] = _subagents_line(subagents, children)
        _add(total, line)
        _merge(by_model, children)
    unrecorded = _unrecorded(reported, children)
    if unrecorded is not None:
        lines["unrecorded"] = unrecorded
        _add(total, unrecorded)
        _merge(by_model, unrecorded["byModel"])
    return {**result, **total, "byModel": by_model, "own": own, **lines}


def _subagents_line(
    subagents: list[dict[str, Any]], per_model: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The sub-agents' line; their costs per model are added to `per_model`."""
    line: dict[str, Any] = {
        "threads": len(subagents),
        "inputTokens": 0,
        "outputTokens": 0,
        "usd": 0.0,
        "missing": 0,
        "items": [],
    }
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
        _merge(per_model, cost["byModel"])
    return line


def _unrecorded(
    reported: dict[str, dict[str, Any]], children: dict[str, dict[str, Any]]
) -> dict[str, Any] | None:
    """What the agent's totals hold beyond the transcript's replies and the sub-agents'
    threads, per model (None: nothing)."""
    line: dict[str, Any] = {"inputTokens": 0, "outputTokens": 0, "usd": 0.0, "byModel": {}}
    for model, row in reported.items():
        theirs = children.get(model, {})
        left = {
            key: max(0, row[key] - theirs.get(key, 0)) for key in ("inputTokens", "outputTokens")
        }
        left["usd"] = max(0.0, round(row["usd"] - float(theirs.get("usd") or 0.0), 10))
        if not any(left.values()):
            continue
        if row.get("priced") is False:
            left["priced"] = False
        line["byModel"][model] = left
        _add(line, left)
    return line if line["byModel"] else None


def _merge(by_model: dict[str, dict[str, Any]], rows: dict[str, dict[str, Any]]) -> None:
    for model, row in rows.items():
        target = by_model.setdefault(model, {"inputTokens": 0, "outputTokens": 0, "usd": 0.0})
        _add(target, row)
        if row.get("priced") is False:
            target["priced"] = False


def validate(state: dict[str, Any], ctx: Any) -> Any:
    restored = with_subagents(state, getattr(ctx, "subagents", None) or [])
    status = "restored" if restored["byModel"] or restored.get("subagents") else "empty"
    missing = restored.get("subagents", {}).get("missing")
    counted = "is counted only as the agent's own totals hold it (`unrecorded`)"
    how = counted if "unrecorded" in restored else "is not counted"
    reason = f"{missing} sub-agent thread(s) not found: their cost {how}" if missing else None
    return Outcome(status, restored, reason)
