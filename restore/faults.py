"""Named crash points for crash-consistency tests: a real SIGKILL at a precise moment.

Set `SESSIOND_CRASH_AT=<name>` in the server's environment and the process kills itself
with SIGKILL when it reaches that point, exactly like `kill -9` from outside, but at a
moment an outside killer could only hit by luck. Unset, a crash point costs one lookup.
"""

from __future__ import annotations

import os
import signal


def crash_point(name: str) -> None:
    if os.environ.get("SESSIOND_CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
