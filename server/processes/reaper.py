"""Every process a hook starts, found and killed: none outlives its timeout or the server.

A hook runs in its own process group, and killing the group reaches the children that stay
in it. A process can leave the group (`setsid`, `setpgid`), and a double fork re-parents it
to init, where no group kill or parent finds it. So, on Linux:

- the server becomes a child subreaper (`prctl(PR_SET_CHILD_SUBREAPER)`) when its hooks are
  first needed: an orphaned descendant is re-parented to the server instead of init, and
  stays in the server's process tree;
- each hook run is tagged with `SESSIOND_HOOK_RUN=<run id>` in its environment, which every
  descendant inherits (`/proc/<pid>/environ` keeps what a process started with);
- at a hook's timeout the run's group is killed and then every descendant of the server
  carrying its tag; at exit, every descendant carrying any tag. Kill rounds repeat until
  none is left, so a process forking meanwhile is caught by the next round;
- processes the server adopted this way are reaped (`Orphans`), so no zombie stays behind;
  only those: a child that asyncio or subprocess waits for is never taken from them.

Limits (docs/security.md): a descendant that both leaves the group and clears its
environment is not recognised; elsewhere than Linux only the process group is killed. A
cgroup per hook would close both gaps, but needs a delegated cgroup the user rarely has.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

logger = logging.getLogger("sessiond.hooks")

MARKER = "SESSIOND_HOOK_RUN"
PR_SET_CHILD_SUBREAPER = 36
KILL_ROUNDS = 50
FINISHED_GROUPS_KEPT = 1024
_ROUND_PAUSE = 0.01
_subreaper = False


def become_subreaper() -> bool:
    """Make orphaned descendants this process's children (Linux); False where unsupported."""
    global _subreaper
    if _subreaper or not sys.platform.startswith("linux"):
        return _subreaper
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        _subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        _subreaper = False
    if not _subreaper:
        logger.info("not a child subreaper: a hook's detached descendants may outlive it")
    return _subreaper


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def kill_tagged(runs: set[str] | None) -> set[int]:
    """SIGKILL every live descendant tagged with one of `runs` (None: any run); returns the
    killed pids, which the caller reaps once they are its children."""
    return kill_marked(MARKER, lambda tag: _tag_matches(tag, runs), below=os.getpid())


def kill_marked(
    marker: str, matches: Callable[[str | None], bool], *, below: int | None
) -> set[int]:
    """SIGKILL, in rounds until none is left, every live process whose environment's
    `marker` value `matches`: among the descendants of `below`, or (None) among every
    process whose environment this user may read. Returns the killed pids."""
    killed: set[int] = set()
    me = os.getpid()
    for _ in range(KILL_ROUNDS):
        candidates = descendants(below) if below is not None else live_processes()
        victims = [
            pid
            for pid in candidates
            if pid not in killed and pid != me and matches(_tag_of(pid, marker))
        ]
        if not victims:
            break
        for pid in victims:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        time.sleep(_ROUND_PAUSE)  # let a fork in progress finish, so the next round sees it
    return killed


class Orphans:
    """What the server must reap as a subreaper: processes of finished hooks it adopted.

    Only these are ever waited for, never a child someone else waits for (asyncio for a
    hook's own process, subprocess for git): a tagged child of a finished run, seen alive,
    or a zombie in a finished hook's process group that is not its leader."""

    def __init__(self) -> None:
        self.pending: set[int] = set()
        self.finished_groups: dict[int, None] = {}  # insertion-ordered, bounded
        self._lock = threading.Lock()  # tended on worker threads, fed from the loop

    def add(self, pids: set[int]) -> None:
        with self._lock:
            self.pending |= pids

    def finished(self, pgid: int) -> None:
        with self._lock:
            self.finished_groups[pgid] = None
            while len(self.finished_groups) > FINISHED_GROUPS_KEPT:
                del self.finished_groups[next(iter(self.finished_groups))]

    def tend(self, active_runs: set[str]) -> None:
        """Adopt what finished hooks left behind and reap whatever of it has exited.
        `active_runs` is read after the scan, so a hook started meanwhile is never taken."""
        me = os.getpid()
        table = _process_table()
        active = frozenset(active_runs)
        with self._lock:
            for pid, (ppid, state, group) in table.items():
                if ppid != me:
                    continue
                if state == "Z":
                    if group in self.finished_groups and group != pid:
                        self.pending.add(pid)
                elif (tag := _tag_of(pid)) is not None and tag not in active:
                    self.pending.add(pid)
            self.pending = reap(self.pending)


def reap(pids: set[int]) -> set[int]:
    """`waitpid` each pid that is our exited child; returns the ones still to reap later."""
    left = set()
    for pid in pids:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            if os.path.exists(f"/proc/{pid}"):
                left.add(pid)  # not (yet) our child: its parent may still be dying
            continue
        if done == 0:
            left.add(pid)
    return left


def live_processes() -> list[int]:
    """Every live (non-zombie) process in /proc (empty elsewhere)."""
    return [pid for pid, (_, state, _) in _process_table().items() if state != "Z"]


def descendants(root: int) -> list[int]:
    """Every live (non-zombie) process below `root`, from /proc (empty elsewhere)."""
    table = _process_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: list[int] = []
    stack = list(children.get(root, ()))
    while stack:
        pid = stack.pop()
        if table[pid][1] != "Z":
            found.append(pid)
        stack.extend(children.get(pid, ()))
    return found


def _process_table() -> dict[int, tuple[int, str, int]]:
    """pid -> (parent pid, state letter, process group) of every process in /proc."""
    table: dict[int, tuple[int, str, int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read().decode(errors="replace")
        except OSError:
            continue  # gone meanwhile
        fields = stat.rsplit(")", 1)[-1].split()  # the name may hold spaces and parentheses
        if len(fields) > 2 and fields[1].isdigit() and fields[2].lstrip("-").isdigit():
            table[int(entry)] = (int(fields[1]), fields[0], int(fields[2]))
    return table


def _tag_of(pid: int, marker: str = MARKER) -> str | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = handle.read()
    except OSError:
        return None
    prefix = marker.encode() + b"="
    for entry in environ.split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix) :].decode(errors="replace")
    return None


def _tag_matches(tag: str | None, runs: set[str] | None) -> bool:
    return tag is not None and (runs is None or tag in runs)
