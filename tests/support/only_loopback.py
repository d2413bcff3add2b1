"""Only 127.0.0.1: the test run has a network of its own with nothing in it but loopback, and
every attempt to go further is caught, named and pinned to the test that made it.

How, and why this way. At the start of the run the pytest process moves into a network
namespace of its own (`unshare(CLONE_NEWNET)`, as root, which CI is; otherwise in a user
namespace of its own too) whose one interface is `lo`, brought up: 127.0.0.0/8 and ::1 work
as before (the mock model, WebSocket servers), and every process a test starts inherits the
namespace, however it detaches. Nothing can leave; what tries is detected twice over:

- **the kernel's own count** of packets that found no route (`OutNoRoutes` in
  /proc/net/snmp, `Ip6OutNoRoutes` in /proc/net/snmp6; per namespace). Every TCP connect
  and every UDP datagram to an address outside loopback counts, whatever the program and
  however short-lived the attempt; read after each test, so an attempt is pinned to the
  test that was running.
- **a DNS trap**: the nameservers of /etc/resolv.conf are made addresses of `lo` (with
  `ip`, when the machine has it) and a listener on port 53 of every address (UDP and TCP,
  IPv4 and IPv6) answers every query REFUSED at once, writing down the name asked and the
  process that asked (its socket, found in /proc/*/fd). An update check or a telemetry
  post starts with a lookup: that lookup is the attempt, even though it never leaves the
  machine, and the name says whose server it was.

Rejected: sampling sockets in /proc/<pid>/net/tcp (a refused or unroutable connect, or a
DNS datagram, lives for microseconds and is missed); an HTTP(S)_PROXY that logs and refuses
(only programs that honour it go through it, and a lookup never does); a namespace for the
agents only (the mock model listens on 127.0.0.1 in the test process, so the agents would
need a bridge back to it, and every other child of a test would stay unguarded).

`Network.attempts()` hands over what was caught since its last call: the session plugin
(tests/support/leftovers.py) calls it after every test; a test that makes an attempt on
purpose calls it itself and so keeps the run green.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import ipaddress
import os
import shutil
import socket
import struct
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from tests.support.processes import command_line

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
DNS_PORT = 53


@dataclass(frozen=True)
class Attempt:
    """One attempt to reach past loopback: what was tried, by which process, in which test."""

    what: str
    who: str
    test: str

    def __str__(self) -> str:
        return f"{self.what}, by {self.who}, during {self.test}"


class Network:
    """The run's namespace, its counters and its DNS trap."""

    def __init__(self, nameservers: list[str]) -> None:
        self.test = "(before the first test)"
        """The test running now (set by the session plugin): whom an attempt is pinned to."""
        self.nameservers = nameservers
        self._lock = threading.Lock()
        self._caught: list[Attempt] = []
        self._counted = self._no_route_counts()
        self._sockets: list[socket.socket] = []

    @classmethod
    def enter(cls) -> Network:
        """Move this process (single-threaded still: a new namespace takes only the calling
        thread, and every thread and process started after it) into a network namespace of
        its own, loopback up, its DNS trap listening."""
        _unshare_network()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            request = struct.pack("16sh22x", b"lo", 0)
            flags = struct.unpack("16sh22x", fcntl.ioctl(probe, SIOCGIFFLAGS, request))[1]
            fcntl.ioctl(probe, SIOCSIFFLAGS, struct.pack("16sh22x", b"lo", flags | IFF_UP))
        nameservers = _nameservers()
        trapped = [ns for ns in nameservers if _give_to_loopback(ns)]
        network = cls(trapped)
        network._listen()
        return network

    # --- what was caught ------------------------------------------------------------------

    def attempts(self) -> list[Attempt]:
        """What was tried since the last call (and forget it): lookups by name, then the
        packets that found no route, counted by the kernel."""
        counts = self._no_route_counts()
        with self._lock:
            caught, self._caught = self._caught, []
            before, self._counted = self._counted, counts
        for family, (now, was) in zip(("IPv4", "IPv6"), zip(counts, before, strict=True),
                                      strict=True):  # fmt: skip
            if now > was:
                what = f"{now - was} packet(s) to an {family} address outside loopback (no route)"
                caught.append(Attempt(what, "a process of this run", self.test))
        return caught

    @staticmethod
    def _no_route_counts() -> tuple[int, int]:
        return (_snmp("/proc/net/snmp", "Ip", "OutNoRoutes"),
                _snmp6("/proc/net/snmp6", "Ip6OutNoRoutes"))  # fmt: skip

    # --- the DNS trap -----------------------------------------------------------------------

    def _listen(self) -> None:
        for family, anywhere in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
            for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
                try:
                    sock = socket.socket(family, kind)
                except OSError:  # no IPv6 in this kernel
                    continue
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                try:
                    sock.bind((anywhere, DNS_PORT))
                except OSError:
                    sock.close()
                    continue
                if kind == socket.SOCK_STREAM:
                    sock.listen(16)
                self._sockets.append(sock)
                serve = self._serve_udp if kind == socket.SOCK_DGRAM else self._serve_tcp
                threading.Thread(target=serve, args=(sock,), daemon=True,
                                 name="only-loopback-dns").start()  # fmt: skip

    def _serve_udp(self, sock: socket.socket) -> None:
        while True:
            try:
                query, peer = sock.recvfrom(4096)
            except OSError:
                return
            self._caught_query(query, "udp", peer[1])
            with contextlib.suppress(OSError):
                sock.sendto(_refused(query), peer)

    def _serve_tcp(self, sock: socket.socket) -> None:
        while True:
            try:
                conn, peer = sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                with contextlib.suppress(OSError, struct.error):
                    (size,) = struct.unpack("!H", _read_exactly(conn, 2))
                    query = _read_exactly(conn, size)
                    self._caught_query(query, "tcp", peer[1])
                    reply = _refused(query)
                    conn.sendall(struct.pack("!H", len(reply)) + reply)

    def _caught_query(self, query: bytes, protocol: str, port: int) -> None:
        name, kind, _ = _question(query)
        what = f"DNS lookup of {name} ({kind})"
        attempt = Attempt(what, _owner_of(protocol, port), self.test)
        with self._lock:
            if attempt not in self._caught:  # a resolver asks each name several times
                self._caught.append(attempt)


# --- the namespace ------------------------------------------------------------------------


def _unshare_network() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) == 0:
        return
    first = ctypes.get_errno()
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
        raise OSError(first, f"cannot make a network namespace here: {os.strerror(first)}")
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
    Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")


def _nameservers() -> list[str]:
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/etc/resolv.conf").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0] == "nameserver":
                found.append(parts[1].split("%")[0])
    return found


def _give_to_loopback(address: str) -> bool:
    """Make `address` one of lo's, so a query sent to it reaches the trap. A loopback
    nameserver (127.0.0.53) is there already; without `ip` (or the right to use it) the
    query still fails for want of a route, and is counted."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    if ip.is_loopback:
        return True
    tool = shutil.which("ip") or next((p for p in ("/usr/sbin/ip", "/sbin/ip")
                                       if os.path.exists(p)), None)  # fmt: skip
    if tool is None:
        return False
    prefix = 32 if ip.version == 4 else 128
    done = subprocess.run([tool, f"-{ip.version}", "addr", "add", f"{ip}/{prefix}", "dev", "lo"],
                          capture_output=True)  # fmt: skip
    return done.returncode == 0


def _snmp(path: str, table: str, field: str) -> int:
    """A counter of /proc/net/snmp (a header line and a value line per table)."""
    with contextlib.suppress(OSError, ValueError, StopIteration):
        lines = [line.split() for line in Path(path).read_text().splitlines()]
        header, values = (line for line in lines if line and line[0] == f"{table}:")
        return int(values[header.index(field)])
    return 0


def _snmp6(path: str, field: str) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in Path(path).read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == field:
                return int(parts[1])
    return 0


# --- DNS, as much of it as the trap needs -------------------------------------------------

QTYPES = {1: "A", 28: "AAAA", 5: "CNAME", 12: "PTR", 15: "MX", 16: "TXT", 33: "SRV", 65: "HTTPS"}


def _question(query: bytes) -> tuple[str, str, int]:
    """The name and record type a query asks for, and where its question ends (`?` and 0
    for a query that is not DNS)."""
    labels, at = [], 12
    try:
        while (size := query[at]) != 0:
            if size & 0xC0:  # a query's question is never compressed
                raise IndexError
            labels.append(query[at + 1 : at + 1 + size].decode("ascii", "replace"))
            at += 1 + size
        if at + 5 > len(query):
            raise IndexError
        qtype = int.from_bytes(query[at + 1 : at + 3], "big")
    except IndexError:
        return "?", "?", 0
    return ".".join(labels) or ".", QTYPES.get(qtype, str(qtype)), at + 5


def _refused(query: bytes) -> bytes:
    """The answer to every query: REFUSED, its question echoed, nothing else."""
    if len(query) < 12:
        return b""
    end = _question(query)[2]
    flags = 0x8000 | (query[2] & 0x79) << 8 | 0x05  # QR; opcode and RD kept; RCODE=REFUSED
    return query[:2] + struct.pack("!HHHHH", flags, 1 if end else 0, 0, 0, 0) + query[12:end]


def _read_exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise OSError("closed")
        data += chunk
    return data


def _owner_of(protocol: str, port: int) -> str:
    """The process holding the local socket on `port` (the asker, still waiting for its
    answer): 'pid N: its command line'."""
    inodes = set()
    for table in (f"/proc/net/{protocol}", f"/proc/net/{protocol}6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if len(fields) > 9 and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{fields[9]}]")
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{entry}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{entry}/fd/{fd}") in inodes:
                        return f"pid {entry}: {command_line(int(entry))}"
    return "a process gone before it could be named"
