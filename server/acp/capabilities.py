"""What AGENT is told of the editor's `clientCapabilities`: all of it, but for native
sub-agent sessions, which sessiond does not record yet.

An editor that declares them (the draft ACP subagents RFD's `clientCapabilities.subagents`,
or JetBrains AIR's `nativeSubagentSessions` in `_meta.jetbrains.air.capabilities`) gets,
from claude-agent-acp 0.71+ and codex-acp 1.7+, each sub-agent as a session of its own:
its tool calls and answers arrive under a session id no `session/new` named. The proxy
forwarded those but recorded none of them, so a kill -9, a `session/load` or `sessiond
show` lost all the sub-agent did. Without the capability the same agents send the
sub-agent's calls in the parent session, marked with the call that started it, and those
are recorded under it (restore/sources/acp.py, `parentOperationId`). A capability is an
offer the agent may leave unused, so every editor renders that form.
"""

from __future__ import annotations

from typing import Any

NATIVE_SUBAGENTS = "subagents"
"""The draft RFD's client capability (agentclientprotocol/agent-client-protocol#1992)."""
AIR_NATIVE_SUBAGENTS = "nativeSubagentSessions"
"""JetBrains AIR's name for the same, in `_meta.jetbrains.air.capabilities`."""


def for_agent(params: dict[str, Any]) -> dict[str, Any]:
    """The editor's `initialize` params as AGENT gets them: native sub-agent sessions
    not offered; the rest as sent (a copy where something is taken out)."""
    capabilities = params.get("clientCapabilities")
    if not isinstance(capabilities, dict):
        return params
    kept = {k: v for k, v in capabilities.items() if k != NATIVE_SUBAGENTS}
    air = _air(kept.get("_meta"))
    listed = air.get("capabilities") if air is not None else None
    if air is not None and isinstance(listed, list) and AIR_NATIVE_SUBAGENTS in listed:
        meta, without = kept["_meta"], [c for c in listed if c != AIR_NATIVE_SUBAGENTS]
        jetbrains = {**meta["jetbrains"], "air": {**air, "capabilities": without}}
        kept["_meta"] = {**meta, "jetbrains": jetbrains}
    if kept == capabilities:
        return params
    return {**params, "clientCapabilities": kept}


def _air(meta: Any) -> dict[str, Any] | None:
    jetbrains = meta.get("jetbrains") if isinstance(meta, dict) else None
    air = jetbrains.get("air") if isinstance(jetbrains, dict) else None
    return air if isinstance(air, dict) else None
