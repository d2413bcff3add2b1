"""The restore engine: judge a thread's reduced state against the world, in fixed order.

Given every subsystem's state (snapshot + tail, or full replay) and the current
environment, it answers the restore contract's questions: where does it run (drift),
what may it do, what has it done (the operation ledger), how far is verification. It
does no I/O of its own beyond what its `Workspace` reads: only files inside the thread's
recorded workspace (restore/access.py), never a FIFO or a device.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from restore.access import Scope
from restore.environment import Workspace, detect_drift
from restore.subsystems import RESTORE_ORDER, Outcome, ThreadState


@dataclass
class EngineContext:
    """The `RestoreContext` validators see."""

    recorded: dict[str, Any]
    current: dict[str, Any]
    workspace: Workspace
    available_models: list[str] | None = None
    subagents: list[dict[str, Any]] = field(default_factory=list)
    drift: list[dict[str, Any]] = field(default_factory=list)
    results: dict[str, Outcome] = field(default_factory=dict)

    def file_sha(self, path: str) -> str | None:
        return self.workspace.file_sha(path)

    def read_text(self, path: str) -> str | None:
        return self.workspace.read_text(path)

    def why_unreadable(self, path: str) -> str | None:
        return self.workspace.why_unreadable(path)


@dataclass
class Judgement:
    drift: list[dict[str, Any]]
    blocked: bool
    outcomes: list[tuple[str, Outcome]]

    def outcome(self, name: str) -> Outcome:
        return dict(self.outcomes)[name]

    def subsystem_reports(self) -> list[dict[str, Any]]:
        return [
            {"name": name, "status": o.status, "reason": o.reason, "state": o.state}
            for name, o in self.outcomes
        ]


def judge(
    state: ThreadState,
    current: dict[str, Any],
    available_models: list[str] | None = None,
    subagents: list[dict[str, Any]] | None = None,
) -> Judgement:
    """Run every validator in the fixed order; each may read the outcomes before it.
    `subagents`: the costs of the sub-agent threads this one started (the cost line)."""
    recorded = state.states["worktree"]
    ctx = EngineContext(
        recorded=recorded,
        current=current,
        workspace=Workspace(Scope.of_thread(recorded)),
        available_models=available_models,
        subagents=subagents or [],
    )
    # No session_meta was read (an empty or damaged file): where the thread ran is unknown,
    # and unknown must never pass for "here".
    ctx.drift = (
        detect_drift(recorded, current)
        if recorded
        else [{"field": "cwd", "recorded": None, "current": current["cwd"], "severity": "block"}]
    )
    for module in RESTORE_ORDER:
        try:
            outcome = module.validate(state.states[module.NAME], ctx)
        except Exception as exc:  # one broken subsystem must not hide the others
            outcome = Outcome("error", None, f"{type(exc).__name__}: {exc}")
        ctx.results[module.NAME] = outcome
    blocked = any(entry["severity"] == "block" for entry in ctx.drift)
    return Judgement(ctx.drift, blocked, [(m.NAME, ctx.results[m.NAME]) for m in RESTORE_ORDER])
