"""OpenCode: one SQLite database, `~/.local/share/opencode/opencode.db` (store.py), its rows
(parser.py), `opencode --session ID`, each message's provider's prices."""

from protocol.agents import info
from restore.agents.api import Agent
from restore.agents.opencode.parser import AGENT as ID
from restore.agents.opencode.parser import OpenCodeParser, handoff
from restore.agents.opencode.store import OpenCodeDatabase

AGENT = Agent(info(ID), OpenCodeDatabase(), OpenCodeParser, handoff)
