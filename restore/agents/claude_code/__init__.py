"""Claude Code: `~/.claude/projects/<encoded cwd>/<sessionId>.jsonl` (store.py), its records
(parser.py), `claude --resume ID`, Anthropic's prices."""

from protocol.agents import info
from restore.agents.api import Agent
from restore.agents.claude_code.parser import AGENT as ID
from restore.agents.claude_code.parser import ClaudeCodeParser, handoff
from restore.agents.claude_code.store import ClaudeCodeFiles

AGENT = Agent(info(ID), ClaudeCodeFiles(), ClaudeCodeParser, handoff)
