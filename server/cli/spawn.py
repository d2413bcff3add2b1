"""Starting the shared server a window connects to, when none answers: one at a time.

Two windows opening at once must end with one server. Each starts
`sessiond serve --ws 0 --linger SECONDS --shared`, detached in its own session so it
outlives the window that started it; such a server starts listening only under an
exclusive `flock` on `servers/spawn.lock` in the data dir (`claim`), after looking again:
if a server already answers, it exits at once (status 0) and the window connects to that
one. The lock is the server's, so a window (or the editor, which has no flock) only has to
start it and wait. The server ends itself once no client has been attached for the grace
(server/transport/linger.py). Nothing secret is on its command line: it makes its own
token and publishes it in its 0600 discovery file.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from restore.faults import pause_point
from restore.home.files import private_dirs
from server.transport.discovery import checked_servers_dir, live_servers

SPAWN_LOCK = "spawn.lock"
SPAWN_LOG = "spawned.log"
"""The spawned servers' stderr (no token is ever written there), appended, 0600."""
SPAWN_LOG_MAX = 1 << 20
"""Past this many bytes the log is kept as `spawned.log.1` (the one before it dropped) and
a new one begun, so years of windows opening leave at most about 2 MiB behind."""
STARTUP_SECONDS = 30.0
"""How long a spawned server may take to publish its discovery file (a hang guard: it
normally takes well under a second)."""


def _open_log(path: Path) -> int:
    """The spawned server's stderr, appended; rotated once past `SPAWN_LOG_MAX`. A server
    still writing to the old file goes on writing to it under its new name."""
    try:
        if os.lstat(path).st_size > SPAWN_LOG_MAX:
            os.replace(path, path.with_name(path.name + ".1"))
    except FileNotFoundError:  # none yet, or another window rotated it just now
        pass
    return os.open(
        path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600
    )


@asynccontextmanager
async def spawn_lock(home: Path) -> AsyncIterator[None]:
    """Held by a shared server while it looks again and, if nothing answers, starts
    listening and publishes its discovery file."""
    directory = checked_servers_dir(home)  # never a link's target
    private_dirs(directory)
    fd = os.open(directory / SPAWN_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        await asyncio.to_thread(fcntl.flock, fd, fcntl.LOCK_EX)  # released when fd closes
        yield
    finally:
        os.close(fd)


@asynccontextmanager
async def claim(
    home: Path, answering: Callable[[Path], Awaitable[dict[str, Any] | None]]
) -> AsyncIterator[dict[str, Any] | None]:
    """A shared server's start: under the spawn lock, the record of a server that already
    answers (then this one must not listen), else None, the lock held until the block ends
    (once this server's discovery file is written)."""
    async with spawn_lock(home):
        running = await answering(home)
        if running is None:
            pause_point("shared-server-claimed")  # tests: the lock held, not yet listening
        yield running


def server_argv(home: Path, linger: float) -> list[str]:
    return [
        sys.executable,
        "-m",
        "server.cli",
        "--home",
        str(home),
        "serve",
        "--ws",
        "0",
        "--linger",
        f"{linger:g}",
        "--shared",
    ]


async def spawn_server(
    home: Path, linger: float, store: str | None = None
) -> dict[str, Any] | None:
    """Start a shared WebSocket server; its discovery record once written, or None when it
    found another server answering and left (connect to that one). A shared store's URL
    goes in its environment (SESSIOND_STORE), never its argv."""
    directory = checked_servers_dir(home)  # never a link's target
    private_dirs(directory)
    env = {**os.environ, "SESSIOND_STORE": store} if store else None
    log_fd = _open_log(directory / SPAWN_LOG)
    try:
        process = subprocess.Popen(
            server_argv(home, linger),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log_fd,
            cwd=home,  # holds no window's directory busy
            env=env,
            start_new_session=True,  # a window's Ctrl-C or hang-up does not reach it
        )
    finally:
        os.close(log_fd)
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        for record in live_servers(home):
            if record.get("pid") == process.pid:
                return record
        if process.poll() == 0:
            return None
        if process.poll() is not None:
            raise OSError(
                f"the sessiond server it started exited ({process.returncode}); "
                f"what it said is in {directory / SPAWN_LOG}"
            )
        await asyncio.sleep(0.005)
    raise OSError(f"the sessiond server it started published no port in {STARTUP_SECONDS:g} s")
