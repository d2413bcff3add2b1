"""5. messages: the history the next model call sees — after the last clear/compact.

The state keeps the seqs of every message after the boundary, as ranges of consecutive
seqs, and no message bodies, so its size (and a snapshot's) stays small for long threads:
resume reads the newest bodies from the file by seq (`newest`), and clients page further
back with `thread/read`. A compact boundary carries the summary and is the first entry; a
rewind drops what came after the turn it rewinds to.
"""

from __future__ import annotations

from typing import Any

from restore.engine.outcome import Outcome

NAME = "messages"


def initial() -> dict[str, Any]:
    return {"boundarySeq": 0, "boundaryType": None, "ranges": [], "count": 0}


def _restart(item: dict[str, Any]) -> dict[str, Any]:
    return {**initial(), "boundarySeq": item["seq"], "boundaryType": item["type"]}


def _add(state: dict[str, Any], item: dict[str, Any]) -> None:
    seq, ranges = item["seq"], state["ranges"]
    if ranges and ranges[-1][1] == seq - 1:
        ranges[-1][1] = seq
    else:
        ranges.append([seq, seq])
    state["count"] += 1


def _cut(state: dict[str, Any], cut: int) -> None:
    """Forget every message after seq `cut`."""
    kept = [[start, min(end, cut)] for start, end in state["ranges"] if start <= cut]
    state["ranges"] = kept
    state["count"] = sum(end - start + 1 for start, end in kept)


def reduce(state: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    """Updates `state` in place (the seq list would be quadratic to copy)."""
    kind = item.get("type")
    if kind == "message":
        _add(state, item)
    elif kind == "clear_boundary":
        return _restart(item)
    elif kind == "compact_boundary":
        state = _restart(item)
        _add(state, item)  # the summary is what the next model call starts from
    elif kind == "rewind_boundary" and isinstance(item.get("toSeq"), int):
        _cut(state, item["toSeq"])
    return state


def newest(state: dict[str, Any], limit: int) -> list[int]:
    """The seqs of the newest `limit` messages after the boundary, ascending."""
    seqs: list[int] = []
    for start, end in reversed(state["ranges"]):
        take = min(limit - len(seqs), end - start + 1)
        seqs[:0] = range(end - take + 1, end + 1)
        if len(seqs) >= limit:
            break
    return seqs


def validate(state: dict[str, Any], ctx: Any) -> Any:
    summary = {
        "boundarySeq": state["boundarySeq"],
        "boundaryType": state["boundaryType"],
        "count": state["count"],
    }
    return Outcome("restored" if state["count"] else "empty", summary)
