"""Whose is it: a process, a listening port, the other end of a connection.

A discovery file names a pid and a port; after the server it describes died uncleanly,
another local user may hold both (a port is anyone's to bind once freed, a pid anyone's to
be given). So "alive" means alive **and ours**: a process whose `/proc/<pid>` is owned by
another uid is a stranger (EPERM from `kill(pid, 0)` says the same where there is no
`/proc`), and so is a TCP socket whose owner, as the kernel reports it, is another uid.

The owner of a TCP socket comes from the kernel's socket diagnostics (netlink
`NETLINK_SOCK_DIAG`, what `ss` uses; unprivileged, one exact lookup by address and port,
~20 µs), because TCP carries no credentials: `SO_PEERCRED` exists only for Unix sockets.
Why not `/proc/net/tcp`: reading it costs a line per socket on the machine, per lookup,
and the server looks up every connection it accepts (a flood would make that quadratic).
Where neither exists (not Linux) the answer is None: unknown, and the handshake's proof
(server/transport/proof.py) is what remains.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import sys
from collections.abc import Iterator
from pathlib import Path

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_NLMSG_ERROR = 2
_NO_COOKIE = 0xFFFFFFFF
_ALL_STATES = 0xFFFFFFFF
_UID_AT = 16 + 4 + 48 + 12
"""Where `idiag_uid` is in the answer: after the netlink header (16), `inet_diag_msg`'s
family, state, timer and retransmits (4), its socket id (48), expires, rqueue, wqueue."""
UNIX_PATH_MAX = 107
"""Bytes of a Unix socket's path the kernel takes (`sun_path` is 108, with its NUL)."""


def ours(pid: object) -> bool:
    """`pid` is a live process of this user (a zombie counts: it is still its pid)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # another user's process: whatever it is, not a server of ours
    try:
        return os.stat(f"/proc/{pid}").st_uid == os.getuid()  # root may signal anyone
    except FileNotFoundError:
        return not os.path.isdir("/proc/self")  # no /proc here: kill(0) had the last word
    except OSError:
        return False


def tcp_owner(local: tuple[str, int], remote: tuple[str, int]) -> int | None:
    """The uid owning the TCP socket whose own address is `local` and whose peer is
    `remote` (for a listening socket: `remote` ("0.0.0.0", 0)); None: not known here (no
    socket diagnostics) or no such socket."""
    if not sys.platform.startswith("linux"):
        return None
    host = local[0].split("%", 1)[0]
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        here = socket.inet_pton(family, host).ljust(16, b"\0")
        there = socket.inet_pton(family, remote[0].split("%", 1)[0]).ljust(16, b"\0")
    except OSError:
        return None
    sockid = (
        struct.pack("!HH", local[1], remote[1])
        + here
        + there
        + struct.pack("=III", 0, _NO_COOKIE, _NO_COOKIE)
    )
    request = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, _ALL_STATES) + sockid
    header = struct.pack("=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0)
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as link:
            link.settimeout(1.0)
            link.send(header + request)
            answer = link.recv(8192)
    except OSError:
        return None
    if len(answer) < _UID_AT + 4:
        return None
    kind = struct.unpack_from("=H", answer, 4)[0]
    if kind == _NLMSG_ERROR:
        return None
    return int(struct.unpack_from("=I", answer, _UID_AT)[0])


def tcp_peer_owner(sock: socket.socket) -> int | None:
    """The uid owning the other end of a connected loopback TCP socket (the client's
    socket, seen by the server; the server's accepted socket, seen by a client: it is its
    listener's owner's). None: unknown."""
    try:
        own, peer = sock.getsockname(), sock.getpeername()
    except OSError:
        return None
    return tcp_owner((peer[0], peer[1]), (own[0], own[1]))


def unix_peer(sock: socket.socket) -> tuple[int, int] | None:
    """(pid, uid) of the process at the other end of a Unix socket, as the kernel recorded
    them when it connected or listened (`SO_PEERCRED`); None where that is not offered."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    try:
        pid, uid, _gid = struct.unpack("=iII", sock.getsockopt(socket.SOL_SOCKET, option, 12))
    except OSError:
        return None
    return pid, uid


@contextlib.contextmanager
def unix_address(path: Path) -> Iterator[str]:
    """A name the kernel takes for the Unix socket at `path`: the path itself, or, past
    `sun_path`'s 108 bytes (a deep data dir), the same file reached through an open
    descriptor of its directory (`/proc/self/fd/N/name`, Linux). OSError where neither
    fits."""
    if len(os.fsencode(path)) <= UNIX_PATH_MAX:
        yield str(path)
        return
    if not os.path.isdir("/proc/self/fd"):
        raise OSError(f"{path}: longer than a Unix socket's {UNIX_PATH_MAX}-byte address")
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{directory}/{path.name}"
    finally:
        os.close(directory)
