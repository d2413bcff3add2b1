"""An imported session's identity in sessiond: the thread each revision of it becomes."""

from __future__ import annotations

import re
import uuid

NAMESPACE = uuid.UUID("5e551070-1a7e-4d1e-9c0d-1a9000000000")
SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""A session id sessiond names a thread, a file or a command argument after: a plain name
(it comes from a file: no option, no path, no shell)."""


def thread_id_for(agent: str, session_id: str, revision: int) -> str:
    """The thread of a source session's revision: the same on every machine and run."""
    name = f"{agent}/{session_id}" + (f"/r{revision}" if revision > 1 else "")
    return str(uuid.uuid5(NAMESPACE, name))
