"""The agents whose sessions sessiond imports: the one list every agent name comes from.

A line here names an agent on the wire (`ThreadOrigin.agent`, `Handoff.agent`, the search
filter), on the command line (`sessiond import <flag>`, `serve --follow`), in `sessiond
doctor` and in the VS Code extension (its labels and install hints come from this table,
through protocol/schema.json). What sessiond knows of each agent's store, records and
resume command is its folder, `restore/agents/<id with _ for ->/` (restore/agents/registry.py).
Adding an agent: its folder, one line here, its compatibility tests.
"""

from __future__ import annotations


class AgentInfo:
    """An agent as people and clients name it. A plain class, not a dataclass: the command
    line reads this table before its first answer, and dataclasses imports inspect and
    typing (tests/test_no_warmup.py)."""

    __slots__ = ("flag", "id", "install", "name")

    def __init__(self, id: str, name: str, flag: str, install: str) -> None:
        self.id = id
        """The wire name (`origin.agent`), and its folder's (`-` as `_`)."""
        self.name = name
        """What a person calls it: labels ("Resume in Claude Code"), summaries."""
        self.flag = flag
        """The command-line name: `sessiond import <flag>`, `serve --follow <flag>,…`."""
        self.install = install
        """How a person installs its CLI, for when its program is not on PATH."""

    def __repr__(self) -> str:
        return f"AgentInfo({self.id!r})"

    @property
    def folder(self) -> str:
        return self.id.replace("-", "_")


AGENTS: tuple[AgentInfo, ...] = (
    AgentInfo("claude-code", "Claude Code", "claude", "npm install -g @anthropic-ai/claude-code"),
    AgentInfo("codex", "Codex", "codex", "npm install -g @openai/codex"),
    AgentInfo("gemini", "Gemini CLI", "gemini", "npm install -g @google/gemini-cli"),
    AgentInfo("opencode", "OpenCode", "opencode", "npm install -g opencode-ai"),
    AgentInfo("kilo", "Kilo", "kilo", "npm install -g @kilocode/cli"),
    AgentInfo("qwen-code", "Qwen Code", "qwen", "npm install -g @qwen-code/qwen-code"),
    AgentInfo("copilot", "GitHub Copilot CLI", "copilot", "npm install -g @github/copilot"),
    AgentInfo("pi", "Pi", "pi", "npm install -g @earendil-works/pi-coding-agent"),
)
AGENT_IDS: tuple[str, ...] = tuple(agent.id for agent in AGENTS)
AGENT_FLAGS: tuple[str, ...] = tuple(agent.flag for agent in AGENTS)
THREAD_AGENTS: tuple[str, ...] = (*AGENT_IDS, "acp")
"""What a thread's origin names: an imported agent's id, or `acp` (`sessiond acp`)."""
SEARCH_AGENTS: tuple[str, ...] = ("sessiond", *AGENT_IDS, "acp")
"""What search filters on: those, and `sessiond` for threads sessiond's protocol made."""


def by_id(agent_id: str) -> AgentInfo | None:
    return next((agent for agent in AGENTS if agent.id == agent_id), None)


def info(agent_id: str) -> AgentInfo:
    """The entry of an agent this table lists (KeyError for any other)."""
    found = by_id(agent_id)
    if found is None:
        raise KeyError(agent_id)
    return found


def by_flag(flag: str) -> AgentInfo | None:
    return next((agent for agent in AGENTS if agent.flag == flag), None)


def to_json() -> dict[str, dict[str, str]]:
    """The table as protocol/schema.json carries it (`agents`), for clients."""
    return {
        agent.id: {"name": agent.name, "flag": agent.flag, "install": agent.install}
        for agent in AGENTS
    }
