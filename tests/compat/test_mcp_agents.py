"""`sessiond mcp` configured in the real agents as their users configure it — Claude Code
(`--mcp-config`), Codex (`[mcp_servers]` in its config.toml), Gemini CLI (`mcpServers` in
its settings) — each run headless against the mock model, which calls sessiond's
`search_sessions` tool the way a model does; the test asserts that the tool's answer,
naming the thread planted in the agent's folder (and not the one of another folder),
reached the model in the agent's next request.

The agent starts `sessiond mcp` itself, as its own child, in its own folder: the scope is
the agent's working directory, as docs/mcp.md says.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.agents.clis import AgentHome
from tests.agents.mock_model import Call, Reply, Request
from tests.compat.conftest import Agents, import_from
from tests.support.mcp_client import McpProcess
from tests.support.rpc_client import REPO
from tests.test_mcp import plant

WORD = "quetzalcoatl"
CLAUDE_TOOL = "mcp__sessiond__search_sessions"  # Claude Code's name: mcp__<server>__<tool>
PROMPT = f"[[recall]] what did we decide about the {WORD} migration before?"


def recall(request: Request) -> Reply:
    """Call whichever offered tool is sessiond's `search_sessions` (each agent names MCP
    tools its own way), once, then end the turn. Claude Code in `-p` mode defers MCP tools
    behind its `ToolSearch` tool and Codex behind the Responses API's `tool_search`: there
    the model first loads it, as a real model does."""
    if request.aside or request.scenario() != "recall":
        return Reply(text="A short summary of the session.")
    last = max(i for i, t in enumerate(request.turns) if t.role == "user" and t.text)
    called = [c for t in request.turns[last + 1 :] for c in t.calls]
    if any(c.endswith("search_sessions") for c in called):
        return Reply(text="Found it in an earlier session.")
    for name in request.tools:
        namespace, _, tool = name.rpartition(".")  # OpenAI Responses: `namespace.name`
        if tool.endswith("search_sessions"):
            return Reply(calls=(Call(tool, {"query": WORD}, namespace=namespace or None),))
    if "ToolSearch" in request.tools and "ToolSearch" not in called:
        return Reply(calls=(Call("ToolSearch", {"query": "select:" + CLAUDE_TOOL}),))
    if "tool_search" in request.tools and "tool_search_call" not in called:
        return Reply(calls=(Call("tool_search", {"query": "search sessions", "limit": 5}),))
    return Reply(text=f"no search_sessions tool among {request.tools}")


def server_entry(home: Path) -> dict[str, Any]:
    """`sessiond --home HOME mcp`, as this checkout runs it, with nothing in its
    environment (Gemini CLI refuses to set PYTHONPATH for an MCP server): the interpreter
    is told where the checkout is. An installed sessiond is `{"command": "sessiond",
    "args": ["mcp"]}` (docs/mcp.md)."""
    launch = f"import sys; sys.path.insert(0, {str(REPO)!r}); from server.cli.main import main; "
    launch += "sys.exit(main())"
    return {"command": sys.executable, "args": ["-c", launch, "--home", str(home), "mcp"]}


def the_answer(agents: Agents) -> str:
    """The tool result the model received after it called search_sessions."""
    assert agents.model is not None
    results = [r for request in agents.model.main_requests() for r in request.results()]
    assert results, [request.tools for request in agents.model.main_requests()]
    return "\n".join(results)


def planted(home: Path, agent: AgentHome, tmp_path: Path) -> tuple[str, str]:
    (ours,) = plant(home, agent.repo, [f"we chose to run the {WORD} migration in two steps"])
    (theirs,) = plant(home, tmp_path / "elsewhere", [f"the {WORD} of another project"])
    return ours, theirs


@pytest.mark.parametrize("configured", ["claude mcp add", "--mcp-config"])
def test_claude_code_gets_a_search_sessions_answer_naming_the_planted_thread(
    agents: Agents, home: Path, tmp_path: Path, configured: str
) -> None:
    agent = agents.start(recall)
    ours, theirs = planted(home, agent, tmp_path)
    entry = server_entry(home)
    if configured == "claude mcp add":  # in the user's settings: started in every project
        add = [str(agent.bins / "claude"), "mcp", "add", "--scope", "user", "sessiond", "--",
               entry["command"], *entry["args"]]  # fmt: skip
        agent.run(add).check()
        run = agent.claude(PROMPT)
    else:
        config = agent.root / "mcp.json"
        config.write_text(json.dumps({"mcpServers": {"sessiond": entry}}))
        run = agent.claude(PROMPT, args=("--mcp-config", str(config), "--strict-mcp-config"))
    run.check()
    answer = the_answer(agents)
    assert ours in answer and theirs not in answer, answer
    assert "migration in two steps" in answer
    # the session just run, imported, and found the same way: its resume is Claude Code's
    import_from(home, "claude", agent.claude_projects)
    with McpProcess(home, agent.repo) as mcp:
        found = mcp.text("search_sessions", query=WORD, agent="claude-code")
        (imported,) = set(re.findall(r"^\d+\. ([0-9a-f-]{36}) ", found, re.MULTILINE))
        command = mcp.text("resume_command", thread=imported).splitlines()[0]
    assert command.endswith(f"claude --resume {run.session_id}"), command
    assert command.startswith(f"command: cd {agent.repo}")


def test_codex_gets_a_search_sessions_answer_naming_the_planted_thread(
    agents: Agents, home: Path, tmp_path: Path
) -> None:
    agent = agents.start(recall)
    ours, theirs = planted(home, agent, tmp_path)
    agent.write_codex_config(model="gpt-5.5")  # the classic tool set: MCP tools as functions
    entry = server_entry(home)
    with (agent.codex_home / "config.toml").open("a") as config:
        config.write(f"\n[mcp_servers.sessiond]\ncommand = {json.dumps(entry['command'])}\n"
                     f"args = {json.dumps(entry['args'])}\n"
                     "required = true\n")  # fmt: skip
    agent.codex(PROMPT).check()
    answer = the_answer(agents)
    assert ours in answer and theirs not in answer, answer


def test_gemini_cli_gets_a_search_sessions_answer_naming_the_planted_thread(
    agents: Agents, home: Path, tmp_path: Path
) -> None:
    agent = agents.start(recall)
    ours, theirs = planted(home, agent, tmp_path)
    agent.write_gemini_settings(mcpServers={"sessiond": {**server_entry(home), "trust": True}})
    agent.gemini(PROMPT).check()
    answer = the_answer(agents)
    assert ours in answer and theirs not in answer, answer
