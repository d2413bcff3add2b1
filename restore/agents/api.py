"""What sessiond knows about one agent, behind one small interface: each agent's folder
(`restore/agents/<id>/`) makes one `Agent` of its parts, and the registry lists them.

- `store`: where its sessions are kept and how to list them (`FileStore`: one file per
  session under a root; `DatabaseStore`: rows of one SQLite database), with the
  environment variables that move it;
- `parser`: its records → sessiond items (pure; `restore/agents/parsing.py`);
- `resume`: its handoff, the command that continues a session in the agent itself;
- the price source (`parser.PROVIDER`) and how it is followed live (the store's
  `watched`/`touches`) come with those.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from protocol.agents import AgentInfo
from restore.agents.identity import SAFE_ID

if TYPE_CHECKING:  # the registry (resume, search) reads an agent's names without these
    from restore.agents.database import DatabaseStore
    from restore.agents.files import FileStore
    from restore.agents.parsing import SourceParser


@dataclass(frozen=True)
class Agent:
    """One agent: its names (protocol/agents.py), its store, its parser, its handoff."""

    info: AgentInfo
    store: FileStore | DatabaseStore
    parser: type[SourceParser]
    resume: Callable[[str], list[str]]
    """The command that continues session `id` in the agent (checked against its CLI)."""

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def flag(self) -> str:
        return self.info.flag

    @property
    def name(self) -> str:
        return self.info.name

    def handoff(self, session_id: str) -> list[str] | None:
        """The agent's own resume of `session_id`; None for an id that is not a plain name
        (it comes from a file: no option, no shell)."""
        if not SAFE_ID.fullmatch(session_id):
            return None
        return self.resume(session_id)

    def default_root(self) -> Path:
        return self.store.default_root()
