"""Qwen Code: `~/.qwen/projects/<encoded cwd>/chats/<sessionId>.jsonl` (store.py), its records
(parser.py), `qwen --resume ID`, priced by model name (any OpenAI-compatible provider)."""

from protocol.agents import info
from restore.agents.api import Agent
from restore.agents.qwen_code.parser import AGENT as ID
from restore.agents.qwen_code.parser import QwenCodeParser, handoff
from restore.agents.qwen_code.store import QwenCodeFiles

AGENT = Agent(info(ID), QwenCodeFiles(), QwenCodeParser, handoff)
