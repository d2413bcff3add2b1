"""An imported session's identity in sessiond, and how to continue it in its own agent."""

from __future__ import annotations

import re
import uuid

from restore.sources import claude_code, codex, gemini

IMPORTED_AGENTS = (claude_code.AGENT, codex.AGENT, gemini.AGENT)
NAMESPACE = uuid.UUID("5e551070-1a7e-4d1e-9c0d-1a9000000000")
SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def thread_id_for(agent: str, session_id: str, revision: int) -> str:
    """The thread of a source session's revision: the same on every machine and run."""
    name = f"{agent}/{session_id}" + (f"/r{revision}" if revision > 1 else "")
    return str(uuid.uuid5(NAMESPACE, name))


def handoff_command(agent: str, session_id: str) -> list[str] | None:
    """`claude --resume ID` / `codex resume ID` / `gemini --resume ID`; None for an agent
    sessiond cannot hand to, or for an id that is not a plain name (it comes from a file:
    no option, no shell)."""
    if not SAFE_ID.fullmatch(session_id):
        return None
    if agent == claude_code.AGENT:
        return claude_code.handoff(session_id)
    if agent == codex.AGENT:
        return codex.handoff(session_id)
    if agent == gemini.AGENT:
        return gemini.handoff(session_id)
    return None
