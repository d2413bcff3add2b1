"""How to continue an imported session in the agent that keeps it (the agent's own resume)."""

from __future__ import annotations

from restore.sources import claude_code, codex

IMPORTED_AGENTS = (claude_code.AGENT, codex.AGENT)


def handoff_command(agent: str, session_id: str) -> list[str] | None:
    """`claude --resume ID` / `codex resume ID`; None for an agent sessiond cannot hand to."""
    if agent == claude_code.AGENT:
        return claude_code.handoff(session_id)
    if agent == codex.AGENT:
        return codex.handoff(session_id)
    return None
