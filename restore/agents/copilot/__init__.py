"""GitHub Copilot CLI: `~/.copilot/session-state/<id>/events.jsonl` (store.py; its todo list
in `session.db` beside), its events (parser.py; a sub-agent's, tagged in the same file, to a
thread of their own), `copilot --resume ID`, priced by model name (your own key's provider)."""

from protocol.agents import info
from restore.agents.api import Agent
from restore.agents.copilot.parser import AGENT as ID
from restore.agents.copilot.parser import CopilotParser, handoff
from restore.agents.copilot.store import CopilotFiles

AGENT = Agent(info(ID), CopilotFiles(), CopilotParser, handoff)
