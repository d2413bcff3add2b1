"""9. cost: tokens and money, cumulative across sessions; never reset by clear or resume.

A model without a known price (an imported session's, say) counts its tokens and is
marked `priced: false`, so its `usd` of 0 is never read as free.
"""

from __future__ import annotations

from typing import Any

NAME = "cost"


def initial() -> dict[str, Any]:
    return {"inputTokens": 0, "outputTokens": 0, "usd": 0.0, "byModel": {}}


def _add(target: dict[str, Any], item: dict[str, Any]) -> None:
    target["inputTokens"] += int(item.get("inputTokens") or 0)
    target["outputTokens"] += int(item.get("outputTokens") or 0)
    target["usd"] = round(target["usd"] + float(item.get("usd") or 0.0), 10)


def reduce(state: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    """Updates `state` in place."""
    if item.get("type") == "cost":
        _add(state, item)
        model = str(item.get("model") or "unknown")
        per_model = state["byModel"].setdefault(
            model, {"inputTokens": 0, "outputTokens": 0, "usd": 0.0}
        )
        _add(per_model, item)
        if item.get("priced") is False:
            per_model["priced"] = False
    return state


def validate(state: dict[str, Any], ctx: Any) -> Any:
    from restore.subsystems import Outcome

    return Outcome("restored" if state["byModel"] else "empty", state)
