"""Kilo (Kilo Code's CLI, a fork of OpenCode): the same rows in its own database,
`~/.local/share/kilo/kilo.db` ($XDG_DATA_HOME, $KILO_DB), mapped by OpenCode's parser with
Kilo's own tools named; `kilo --session ID`. The fork keeps OpenCode's tables and row shapes
(checked against 7.7.7): only names differ, so this folder is those names."""

from __future__ import annotations

from typing import ClassVar

from protocol.agents import info
from restore.agents.api import Agent
from restore.agents.opencode.parser import IDEMPOTENT_TOOLS, KNOWN_TOOLS, READ_TOOLS, OpenCodeParser
from restore.agents.opencode.store import OpenCodeDatabase

ID = "kilo"
KILO_READ_TOOLS = frozenset({"board_read", "kilo_local_recall"})
KILO_TOOLS = (
    frozenset(
        {
            "background_process",
            "board_post",
            "schedule_wakeup",
            "cancel_wakeup",
            "repo_clone",
            "suggest",
        }
    )
    | KILO_READ_TOOLS
)
"""What Kilo 7.7 offers beyond OpenCode's tools: a shared board between agents (read, post),
background processes, wake-ups it schedules for itself, cloning a repository."""


def handoff(session_id: str) -> list[str]:
    """Kilo's terminal UI on that session (`kilo --session ID`, checked against 7.7.7's
    `--help`)."""
    return ["kilo", "--session", session_id]


class KiloParser(OpenCodeParser):
    AGENT = ID
    READ_TOOLS: ClassVar[frozenset[str]] = READ_TOOLS | KILO_READ_TOOLS
    IDEMPOTENT_TOOLS: ClassVar[frozenset[str]] = IDEMPOTENT_TOOLS
    KNOWN_TOOLS: ClassVar[frozenset[str]] = KNOWN_TOOLS | KILO_TOOLS


class KiloDatabase(OpenCodeDatabase):
    DATABASE = "kilo.db"
    APP = "kilo"
    DB_ENV = "KILO_DB"
    ROOT_HELP = "$XDG_DATA_HOME/kilo (else ~/.local/share/kilo): kilo.db"


AGENT = Agent(info(ID), KiloDatabase(), KiloParser, handoff)
