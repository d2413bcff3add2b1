"""Pi: `~/.pi/agent/sessions/--<cwd>--/<time>_<id>.jsonl` (store.py), its session tree (parser.py;
`--fork`ed sessions as forks), `pi --session ID`, priced by model name (any provider)."""

from protocol.agents import info
from restore.agents.api import Agent
from restore.agents.pi.parser import AGENT as ID
from restore.agents.pi.parser import PiParser, handoff
from restore.agents.pi.store import PiFiles

AGENT = Agent(info(ID), PiFiles(), PiParser, handoff)
