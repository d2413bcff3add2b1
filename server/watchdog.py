"""No process AGENT started outlives `sessiond acp`, not even after a kill -9 of it.

AGENT itself dies with sessiond (PR_SET_PDEATHSIG, server/acp.py), but that signal reaches
AGENT only: what AGENT started (a tool call's shell, a language server) is re-parented to
init and keeps running, in AGENT's process group or, after `setsid`, outside it. A process
that is killed cannot clean up after itself, so another one has to:

- before anything else, `sessiond acp` forks a watchdog: a copy of itself that moves to a
  session of its own (a signal to the editor's process group does not reach it), drops
  every file descriptor but the read end of a pipe whose only writer is sessiond, and
  blocks reading it. No exec, no import, no work on the editor's path beyond the fork;
- AGENT's environment carries `SESSIOND_ACP_AGENT=<the watchdog's tag>` (appended to an
  outer sessiond's, when nested), which everything AGENT starts inherits
  (`/proc/<pid>/environ` keeps what a process started with), and sessiond writes each
  AGENT's process group to the pipe;
- when sessiond is gone — however it ended, the kernel closes its end of the pipe — the
  watchdog reads end-of-file and kills those process groups, then every process carrying
  its tag, in rounds until none is left (server/reaper.py's `kill_marked`), and exits.

Limits (docs/security.md): a process that both left AGENT's process group and cleared or
replaced its environment is not recognised; elsewhere than Linux only the process groups
are killed; a kill -9 of the watchdog itself (e.g. of sessiond's whole process group
with the watchdog, which left it) takes the guarantee with it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import uuid

logger = logging.getLogger("sessiond.acp")

MARKER = "SESSIOND_ACP_AGENT"
_SEPARATOR = ","


class Watchdog:
    """sessiond's side: the pipe to the watchdog process, and the tag AGENT carries."""

    def __init__(self, pid: int, pipe: int, tag: str) -> None:
        self.pid = pid
        self.tag = tag
        self._pipe: int | None = pipe

    @classmethod
    def start(cls) -> Watchdog:
        """Fork the watchdog. Call it before any thread or event loop exists."""
        tag = uuid.uuid4().hex
        read, write = os.pipe()  # neither end is inherited by anything sessiond spawns
        pid = os.fork()
        if pid == 0:  # the watchdog: never returns
            try:
                _watch(read, tag)
            finally:
                os._exit(0)
        os.close(read)
        return cls(pid, write, tag)

    def environment(self) -> dict[str, str]:
        """AGENT's environment: sessiond's own, tagged."""
        outer = os.environ.get(MARKER)
        return {**os.environ, MARKER: f"{outer}{_SEPARATOR}{self.tag}" if outer else self.tag}

    def guard(self, pgid: int) -> None:
        """AGENT's process group: killed when sessiond is gone."""
        self._tell(f"+{pgid}\n")

    def release(self, pgid: int) -> None:
        """The group was killed and is empty: its id may be reused, never kill it again."""
        self._tell(f"-{pgid}\n")

    def _tell(self, line: str) -> None:
        if self._pipe is None:
            return
        try:
            os.write(self._pipe, line.encode())
        except OSError as exc:  # it was killed: AGENT still dies with us (PDEATHSIG)
            logger.warning("the watchdog is gone (%s): AGENT's children may outlive sessiond", exc)
            os.close(self._pipe)
            self._pipe = None


def _watch(read: int, tag: str) -> None:
    """The watchdog process: wait for sessiond's end, then kill what AGENT left."""
    os.setsid()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)  # it ends when sessiond ends, not before
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # the editor's pipes: their end-of-file must not wait for us
        os.dup2(null, fd)
    for fd in _open_fds():
        if fd > 2 and fd != read:
            with contextlib.suppress(OSError):
                os.close(fd)
    groups: set[int] = set()
    pending = b""
    while chunk := os.read(read, 4096):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line[:1] == b"+":
                groups.add(int(line[1:]))
            elif line[:1] == b"-":
                groups.discard(int(line[1:]))
    kill_everything(groups, tag)


def kill_everything(groups: set[int], tag: str) -> None:
    """Kill the process groups, then every process tagged `tag`, then the groups again (a
    member forking meanwhile)."""
    from server import reaper

    for pgid in groups:
        reaper.kill_group(pgid)
    reaper.kill_marked(
        MARKER, lambda value: value is not None and tag in value.split(_SEPARATOR), below=None
    )
    for pgid in groups:
        reaper.kill_group(pgid)


def _open_fds() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return list(range(3, 256))
