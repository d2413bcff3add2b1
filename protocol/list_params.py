"""`thread/list` params taken without pydantic when they are plainly valid.

`thread/list` is the first request of every editor window (bench J1: spawn → first page).
Importing pydantic and building a validator costs a fresh process ~80 ms, more than the
rest of that answer. Params whose values already have their exact JSON types and bounds
are taken here; anything else (a coercion, an out-of-range value, a wrong type) goes to
the pydantic model `protocol.methods.ThreadListParams`, which gives the one answer or
error. tests/test_list_params.py holds both to the same result, on generated params too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_PAGE = 200
DEFAULT_PAGE = 50
MAX_SEARCH = 500
MAX_CURSOR = 1000


@dataclass(frozen=True, slots=True)
class ListParams:
    """The fields `ThreadListParams` has, with its defaults."""

    cwd: str | None = None
    workspaceFolder: str | None = None
    archived: bool = False
    search: str | None = None
    cursor: str | None = None
    limit: int = DEFAULT_PAGE


_TEXT_LIMITS: dict[str, int | None] = {
    "cwd": None,
    "workspaceFolder": None,
    "search": MAX_SEARCH,
    "cursor": MAX_CURSOR,
}


def plainly_valid(params: Any) -> ListParams | None:
    """The params, when every known field is exactly of its type and in bounds; None
    means "ask pydantic". Unknown fields are ignored, as `Params` ignores them."""
    if not isinstance(params, dict):
        return None
    for name, limit in _TEXT_LIMITS.items():
        value = params.get(name)
        if value is not None and (
            not isinstance(value, str) or (limit is not None and len(value) > limit)
        ):
            return None
    archived = params.get("archived", False)
    limit = params.get("limit", DEFAULT_PAGE)
    if type(archived) is not bool or type(limit) is not int or not 1 <= limit <= MAX_PAGE:
        return None
    return ListParams(
        cwd=params.get("cwd"),
        workspaceFolder=params.get("workspaceFolder"),
        archived=archived,
        search=params.get("search"),
        cursor=params.get("cursor"),
        limit=limit,
    )
