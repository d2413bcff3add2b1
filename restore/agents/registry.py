"""The imported agents, by wire name or command-line name: protocol/agents.py's list, each
entry's folder (`restore/agents/<id with _ for ->/`, its `AGENT`) loaded when first asked
for, so naming one agent loads no other (and a server that imports nothing loads none).

Nothing else in sessiond names an agent: the command line, the protocol's literals, the
handoff, `sessiond doctor`, `--follow` and the VS Code labels all come from here or from
protocol/agents.py. An agent's folder imports nothing of this module (no import circle).
"""

from __future__ import annotations

import functools
import importlib

from protocol.agents import AGENT_FLAGS, AGENT_IDS, AGENTS, by_flag, by_id
from restore.agents.api import Agent

__all__ = [
    "AGENT_FLAGS",
    "AGENT_IDS",
    "all_agents",
    "by_flag",
    "get",
    "handoff_command",
    "imported",
    "named",
]


@functools.cache
def get(agent_id: str) -> Agent:
    """The agent of a wire name (`claude-code`); KeyError for one no line names."""
    info = by_id(agent_id)
    if info is None:
        raise KeyError(agent_id)
    agent = importlib.import_module(f"restore.agents.{info.folder}").AGENT
    if not isinstance(agent, Agent) or agent.info != info:
        raise TypeError(f"restore/agents/{info.folder}: AGENT is not the agent {agent_id!r}")
    return agent


def named(flag: str) -> Agent:
    """The agent of a command-line name (`claude`); KeyError for another."""
    info = by_flag(flag)
    if info is None:
        raise KeyError(flag)
    return get(info.id)


def all_agents() -> list[Agent]:
    return [get(info.id) for info in AGENTS]


def imported(agent_id: object) -> bool:
    """Whether threads of this `origin.agent` mirror an imported session."""
    return isinstance(agent_id, str) and agent_id in AGENT_IDS


def handoff_command(agent_id: str, session_id: str) -> list[str] | None:
    """`claude --resume ID`, `codex resume ID`, …; None for an agent sessiond cannot hand
    to, or for an id that is not a plain name."""
    if not imported(agent_id):
        return None
    return get(agent_id).handoff(session_id)
