"""6. todos: the task list. Never reset by clear or compact (users lose it elsewhere)."""

from __future__ import annotations

from typing import Any

from restore.engine.outcome import Outcome

NAME = "todos"


def initial() -> dict[str, Any]:
    return {"items": []}


def reduce(state: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    if item.get("type") == "todos" and isinstance(item.get("items"), list):
        return {"items": item["items"]}
    return state


def validate(state: dict[str, Any], ctx: Any) -> Any:
    return Outcome("restored" if state["items"] else "empty", state)
