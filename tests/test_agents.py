"""One list of agents (protocol/agents.py), one folder each (restore/agents/<id>/): what the
command line offers, what the protocol accepts, the handoff and the VS Code extension's
"Resume in <Agent>" commands all come from it, so an agent added there is offered
everywhere, and nowhere else names one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from protocol.agents import AGENT_FLAGS, AGENT_IDS, AGENTS
from protocol.methods import Handoff, ThreadOrigin
from restore.agents import registry
from restore.agents.api import Agent
from tests.support.rpc_client import REPO
from tests.test_cli import sessiond


def test_every_listed_agent_has_its_folder_and_each_name_is_one_agents() -> None:
    assert len(set(AGENT_IDS)) == len(AGENT_IDS) and len(set(AGENT_FLAGS)) == len(AGENT_FLAGS)
    for info in AGENTS:
        agent = registry.get(info.id)
        assert isinstance(agent, Agent) and agent.info == info
        assert info.id == agent.parser.AGENT  # the parser names its items' agent the same
        assert registry.named(info.flag) is agent
        assert (REPO / "restore" / "agents" / info.folder / "__init__.py").is_file()
    folders = {p.parent.name for p in (REPO / "restore" / "agents").glob("*/__init__.py")}
    assert folders == {info.folder for info in AGENTS}  # no folder the list leaves out
    with pytest.raises(KeyError):
        registry.get("acp")  # recorded through `sessiond acp`, not imported


def test_the_protocol_accepts_the_listed_agents_and_no_other() -> None:
    for agent_id in AGENT_IDS:
        assert ThreadOrigin(agent=agent_id, sessionId="s").agent == agent_id
        assert Handoff(agent=agent_id, command=["x"], cwd=None).agent == agent_id
    assert ThreadOrigin(agent="acp", sessionId="s").agent == "acp"
    with pytest.raises(ValidationError):
        ThreadOrigin(agent="cursor", sessionId="s")
    with pytest.raises(ValidationError):
        Handoff(agent="acp", command=["x"], cwd=None)
    schema = json.loads((REPO / "protocol" / "schema.json").read_text())
    assert list(schema["agents"]) == list(AGENT_IDS)
    assert schema["$defs"]["Handoff"]["properties"]["agent"]["enum"] == list(AGENT_IDS)


def test_the_command_line_offers_every_agent_with_where_its_store_is(tmp_path: Path) -> None:
    done = sessiond(tmp_path / "home", "import", "--help")
    assert done.returncode == 0, done.stderr
    text = "".join(done.stdout.split())  # argparse wraps lines, at a hyphen too
    for agent in registry.all_agents():
        assert f"{agent.flag}:" in text
        assert "".join(agent.store.ROOT_HELP.split()) in text
    refused = sessiond(tmp_path / "home", "import", "cursor")
    assert refused.returncode == 2 and "invalid choice: 'cursor'" in refused.stderr
    wrong = sessiond(tmp_path / "home", "serve", "--stdio", "--follow", "codex,cursor")
    assert wrong.returncode != 0
    assert f"cannot follow cursor (choose from {', '.join(AGENT_FLAGS)})" in wrong.stderr


def test_a_handoff_is_the_agents_own_resume_and_only_for_a_plain_session_id() -> None:
    for agent in registry.all_agents():
        command = registry.handoff_command(agent.id, "abc-123")
        assert command is not None and "abc-123" in command
    assert registry.handoff_command("acp", "abc-123") is None
    assert registry.handoff_command("claude-code", "--help") is None


def test_the_vs_code_extension_offers_resume_in_every_agent() -> None:
    """package.json's commands are generated from the schema's agents (`npm run generate`;
    the extension's `npm test` fails when they are stale): one per agent, titled by its
    name, shown for that agent's threads."""
    manifest = json.loads((REPO / "vscode-extension" / "package.json").read_text())
    commands = {c["command"]: c["title"] for c in manifest["contributes"]["commands"]}
    palette = {
        c["command"]: c.get("when") for c in manifest["contributes"]["menus"]["commandPalette"]
    }
    for info in AGENTS:
        command = "sessiond.resumeIn" + "".join(p.title() for p in info.id.split("-"))
        assert commands[command] == f"Resume in {info.name}"
        assert palette[command] == f"sessiond.transcriptAgent == '{info.id}'"
    generated = (REPO / "vscode-extension" / "src" / "protocol.generated.ts").read_text()
    listed = re.search(r"export const AGENTS\b[^=]*= (\{.*?\n\});", generated, re.DOTALL)
    assert listed is not None and list(json.loads(listed.group(1))) == list(AGENT_IDS)
