"""Named crash and pause points for fault tests: a real SIGKILL, or a real wait, at a
precise moment.

Set `SESSIOND_CRASH_AT=<name>` in the server's environment and the process kills itself
with SIGKILL when it reaches that point, exactly like `kill -9` from outside, but at a
moment an outside killer could only hit by luck. `SESSIOND_CRASH_AT=<name>:<directory>`
arms it only while `<directory>/<name>.armed` exists: a long-lived server is killed at the
point when a test chooses, after any number of requests (tests/sequences/).

Set `SESSIOND_PAUSE_AT=<name>:<directory>` and every thread that reaches the point waits
there: it creates `<directory>/<name>.reached` and goes on once `<directory>/<name>.go`
exists. A test then knows that work is in progress, not just likely to be, and can show
what else goes on meanwhile (tests/test_read_fairness.py) without comparing speeds.

Unset, either point costs one lookup.
"""

from __future__ import annotations

import os
import signal
import time

PAUSE_POLL = 0.01  # seconds between looks for the `.go` file (only while paused)


def crash_point(name: str) -> None:
    wanted = os.environ.get("SESSIOND_CRASH_AT")
    if not wanted:
        return
    point, _, directory = wanted.partition(":")
    armed = not directory or os.path.exists(os.path.join(directory, f"{name}.armed"))
    if point == name and armed:
        os.kill(os.getpid(), signal.SIGKILL)


def pause_point(name: str) -> None:
    wanted = os.environ.get("SESSIOND_PAUSE_AT")
    if not wanted:
        return
    point, _, directory = wanted.partition(":")
    if point != name or not directory:
        return
    from pathlib import Path  # here: every spawn imports this module, few ever pause

    (Path(directory) / f"{name}.reached").touch()
    go = Path(directory) / f"{name}.go"
    while not go.exists():
        time.sleep(PAUSE_POLL)
