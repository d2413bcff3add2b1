"""Sessions an agent will delete before sessiond has them: its retention setting (Claude
Code's `cleanupPeriodDays`, Gemini CLI's `sessionRetention`, Qwen Code's cleanup of its
sub-agents' transcripts) against what the import ledger says was imported.

Only names and stats are read (the store's listing of its session files); a session counts
as imported when the ledger has it as it is now (its size and mtime). `sessiond doctor`
says what this finds; `--follow` imports each session as it is written, long before."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISREG

from restore.agents.api import Agent
from restore.agents.files import FileStore, Retention
from restore.imports.ledger import ImportLedger

SOON = 7 * 86_400.0
"""A session this close to its deletion is called out."""


@dataclass(frozen=True)
class AtRisk:
    """An agent whose retention setting will delete sessions not imported yet."""

    agent: Agent
    retention: Retention
    waiting: int
    """Sessions the setting applies to that sessiond does not have as they are."""
    soon: int
    """Of those, the ones within SOON of being deleted (or past it: deleted next start)."""


def at_risk(agent: Agent, ledger: ImportLedger, now: float | None = None) -> AtRisk | None:
    """The agent's sessions its retention will delete that are not imported (None: it
    keeps them, or none is waiting)."""
    store = agent.store
    if not isinstance(store, FileStore):
        return None
    retention = store.retention()
    if retention is None:
        return None
    root = agent.default_root().expanduser().absolute()
    if not root.is_dir():
        return None
    known = ledger.all(agent.id)
    now = time.time() if now is None else now
    waiting = soon = 0
    for path in store.session_files(root):
        if not store.retained(root, path):
            continue
        try:
            stat = os.lstat(path)
        except OSError:
            continue
        if not S_ISREG(stat.st_mode):
            continue
        entry = known.get(str(path))
        if entry is not None and (entry.size, entry.mtimeNs) == (stat.st_size, stat.st_mtime_ns):
            continue
        waiting += 1
        soon += now - stat.st_mtime >= retention.seconds - SOON
    return AtRisk(agent, retention, waiting, soon) if waiting else None


def at_risk_all(
    ledger_path: Path, now: float | None = None, *, read_only: bool = False
) -> list[AtRisk]:
    """Every imported agent's (an agent whose store is not on this machine says nothing);
    `read_only`: the data directory's ledger is read, never written."""
    from restore.agents.registry import all_agents

    ledger = ImportLedger(ledger_path, read_only=read_only)
    try:
        return [risk for agent in all_agents() if (risk := at_risk(agent, ledger, now))]
    finally:
        ledger.close()
