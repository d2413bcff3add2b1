"""3. model_override: the model chosen for the thread, invalid if the client lacks it."""

from __future__ import annotations

from typing import Any

from restore.engine.outcome import Outcome

NAME = "model_override"


def initial() -> dict[str, Any]:
    return {}


def reduce(state: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    kind = item.get("type")
    if kind == "model_override" and isinstance(item.get("model"), str):
        return {"model": item["model"]}
    if kind == "session_meta" and isinstance(item.get("model"), str) and not state:
        return {"model": item["model"]}
    return state


def validate(state: dict[str, Any], ctx: Any) -> Any:
    if not state:
        return Outcome("empty", state)
    available = ctx.available_models
    if available is not None and state["model"] not in available:
        return Outcome("invalidated", state, f"model {state['model']} is not available")
    return Outcome("restored", state)
