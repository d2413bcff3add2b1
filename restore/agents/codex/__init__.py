"""Codex: `~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl` (store.py), its records
(parser.py), `codex resume ID`, OpenAI's prices."""

from protocol.agents import info
from restore.agents.api import Agent
from restore.agents.codex.parser import AGENT as ID
from restore.agents.codex.parser import CodexParser, handoff
from restore.agents.codex.store import CodexFiles

AGENT = Agent(info(ID), CodexFiles(), CodexParser, handoff)
