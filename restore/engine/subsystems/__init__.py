"""The eleven restorable subsystems, in the one fixed restore order.

Invariant: each subsystem module is a pure reducer over items (`initial`, `reduce`) plus a
validator (`validate`) that judges the reduced state against the current environment
through a `RestoreContext`; none does I/O itself. States are plain JSON values, so a
snapshot is just their serialization, and snapshot + tail equals a full replay.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from restore.engine import SUBSYSTEM_NAMES
from restore.engine.outcome import Outcome, RestoreContext
from restore.engine.subsystems import (
    attribution,
    cost,
    file_history,
    messages,
    model_override,
    operations,
    permissions,
    prompt_sections,
    todos,
    verifier,
    worktree,
)

RESTORE_ORDER: tuple[ModuleType, ...] = (
    worktree,
    permissions,
    model_override,
    prompt_sections,
    messages,
    todos,
    file_history,
    attribution,
    cost,
    operations,
    verifier,
)
if tuple(module.NAME for module in RESTORE_ORDER) != SUBSYSTEM_NAMES:  # the same, said twice
    raise ImportError("restore.engine.SUBSYSTEM_NAMES is not the restore order")

__all__ = ["RESTORE_ORDER", "Outcome", "RestoreContext", "ThreadState", "Validator"]


@dataclass
class ThreadState:
    """Every subsystem's reduced state for one thread, up to `seq`."""

    states: dict[str, Any] = field(
        default_factory=lambda: {m.NAME: m.initial() for m in RESTORE_ORDER}
    )
    seq: int = 0

    def apply(self, item: dict[str, Any]) -> None:
        for module in RESTORE_ORDER:
            self.states[module.NAME] = module.reduce(self.states[module.NAME], item)
        seq = item.get("seq")
        if isinstance(seq, int) and seq > self.seq:
            self.seq = seq

    def apply_all(self, items: list[dict[str, Any]]) -> ThreadState:
        for item in items:
            self.apply(item)
        return self

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "states": self.states}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ThreadState:
        states = data["states"]
        missing = [m.NAME for m in RESTORE_ORDER if m.NAME not in states]
        if missing:
            raise ValueError(f"snapshot lacks subsystems {missing}")
        return cls(states=dict(states), seq=int(data["seq"]))


Validator = Callable[[Any, RestoreContext], Outcome]
