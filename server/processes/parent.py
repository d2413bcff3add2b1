"""A child that dies with sessiond: the pre-exec function AGENT (server/acp/agent.py) and
the export's writer (server/handlers/export.py) are started with."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1


def die_with_parent() -> Callable[[], None] | None:
    """A pre-exec function that makes the child get SIGKILL when this process dies (Linux).

    prctl is looked up before the fork: the child only calls it. If this process died
    before the call, the child would miss the signal: it checks its parent and exits."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def setup() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(1)

    return setup
