"""Gemini CLI: `~/.gemini/tmp/<project>/chats/session-*.jsonl` (store.py), its records
(parser.py), `gemini --resume ID`, Google's prices."""

from protocol.agents import info
from restore.agents.api import Agent
from restore.agents.gemini.parser import AGENT as ID
from restore.agents.gemini.parser import GeminiParser, handoff
from restore.agents.gemini.store import GeminiFiles

AGENT = Agent(info(ID), GeminiFiles(), GeminiParser, handoff)
