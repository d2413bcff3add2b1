"""No process AGENT started outlives `sessiond acp`, not even after a kill -9 of it.

AGENT itself dies with sessiond (PR_SET_PDEATHSIG, server/acp/agent.py), but that signal reaches
AGENT only: what AGENT started (a tool call's shell, a language server) is re-parented to
init and keeps running, in AGENT's process group or, after `setsid`, outside it. A process
that is killed cannot clean up after itself, so another one has to:

- at start, `sessiond acp` spawns a watchdog: a `/bin/sh` in a session of its own (a
  signal to the editor's process group does not reach it) that ignores SIGINT, SIGTERM and
  SIGHUP and reads, on its stdin, a pipe whose only writer is sessiond;
- AGENT's environment carries `SESSIOND_ACP_AGENT=<the watchdog's tag>` (appended to an
  outer sessiond's, when nested), which everything AGENT starts inherits
  (`/proc/<pid>/environ` keeps what a process started with), and sessiond writes each
  AGENT's process group to the pipe;
- when sessiond is gone — however it ended, the kernel closes its end of the pipe — the
  shell reads end-of-file and execs Python on this module, which kills those process
  groups, then every process carrying the tag, in rounds until none is left
  (server/processes/reaper.py's `kill_marked`), and exits.

A server's lifecycle hooks get the same guarantee (server/hooks/lifecycle.py): their watchdog is
spawned at the first hook a server runs, with the marker `SESSIOND_HOOKS_OF`, and each
hook run's process group is guarded while it runs.

Why a shell and not a fork of sessiond: a forked CPython copies nothing at once, but every
page sessiond touches afterwards (reference counts touch most) is copied on write — spawn
to `initialize` answered measured +6.5 ms median over no watchdog, against +3 ms for this
shell (40 interleaved runs, ~136 ms) — and it would keep a copy of sessiond's memory for
the whole session. `posix_spawn` of `sh` returns in 0.5 ms and a shell waiting on `read`
costs next to nothing; Python starts only to kill (45 ms from the kill -9 to the last
process gone).

Limits (docs/security.md): a process that both left AGENT's process group and cleared or
replaced its environment is not recognised; elsewhere than Linux only the process groups
are killed; a kill -9 of the watchdog itself (only a kill aimed at it, its session or
its cgroup reaches it) takes the guarantee with it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import uuid
from pathlib import Path

from restore.child_env import child_environment

logger = logging.getLogger("sessiond.acp")

MARKER = "SESSIOND_ACP_AGENT"
_SEPARATOR = ","


_SCRIPT = """trap '' INT TERM HUP
set -f
groups=
while IFS= read -r line; do groups="$groups $line"; done
exec "$0" -c 'import sys; from server.processes.watchdog import main; main(sys.argv[1:])' \\
  "$@" $groups
"""
"""The watchdog while sessiond lives: collect the pipe's lines (`+PGID`, `-PGID`) until
end-of-file, then hand them to `main` with the marker and the tag."""


class Watchdog:
    """sessiond's side: the pipe to the watchdog process, and the tag AGENT carries."""

    def __init__(self, pid: int, pipe: int, tag: str, marker: str) -> None:
        self.pid = pid
        self.tag = tag
        self.marker = marker
        self._pipe: int | None = pipe

    @classmethod
    def start(cls, marker: str = MARKER) -> Watchdog | None:
        """Spawn the watchdog for the processes that will carry `marker` (AGENT's, or a
        server's hook runs); None where it cannot run (it is then logged)."""
        tag = uuid.uuid4().hex
        read, write = os.pipe()  # close-on-exec: only the watchdog gets the read end
        package_root = str(Path(__file__).resolve().parent.parent)
        path = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))
        env = child_environment({"PYTHONPATH": path})  # where this sessiond's code is
        try:
            pid = os.posix_spawn(
                "/bin/sh",
                ["sh", "-c", _SCRIPT, sys.executable, marker, tag],
                env,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, read, 0),
                    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                    (os.POSIX_SPAWN_DUP2, 1, 2),
                ],
                setsid=True,
            )
        except OSError as exc:
            logger.warning("no watchdog (%s): AGENT's children may outlive sessiond", exc)
            os.close(write)
            return None
        finally:
            os.close(read)
        return cls(pid, write, tag, marker)

    def environment(self) -> dict[str, str]:
        """AGENT's environment: sessiond's own without the store's credentials, tagged."""
        return child_environment(self.tagged())

    def tagged(self) -> dict[str, str]:
        """The entry that marks a process as the watchdog's to kill (appended to an outer
        sessiond's tag, when nested)."""
        outer = os.environ.get(self.marker)
        return {self.marker: f"{outer}{_SEPARATOR}{self.tag}" if outer else self.tag}

    def guard(self, pgid: int) -> None:
        """AGENT's process group: killed when sessiond is gone."""
        self._tell(f"+{pgid}\n")

    def release(self, pgid: int) -> None:
        """The group was killed or has ended: its id may be reused, never kill it again."""
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


def main(argv: list[str]) -> None:
    """The watchdog after sessiond's end: `MARKER TAG [+PGID|-PGID]...`, in the order
    written."""
    marker, tag, *lines = argv
    groups: set[int] = set()
    for line in lines:
        with contextlib.suppress(ValueError):
            if line[:1] == "+":
                groups.add(int(line[1:]))
            elif line[:1] == "-":
                groups.discard(int(line[1:]))
    kill_everything(groups, tag, marker)


def kill_everything(groups: set[int], tag: str, marker: str = MARKER) -> None:
    """Kill the process groups, then every process tagged `tag`, then the groups again (a
    member forking meanwhile)."""
    from server.processes import reaper

    for pgid in groups:
        reaper.kill_group(pgid)
    reaper.kill_marked(
        marker, lambda value: value is not None and tag in value.split(_SEPARATOR), below=None
    )
    for pgid in groups:
        reaper.kill_group(pgid)
