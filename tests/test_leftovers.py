"""The run's own guard (tests/support/leftovers.py and only_loopback.py) catches what it is
there for, each time pinned to the test that did it: a process left running, however it
detached (a double fork, `setsid`, an environment of its own), and an attempt to reach past
127.0.0.1, by address or by name. These tests provoke both on purpose and run the guard's
checks themselves, clearing what they caught, so the run stays green; the same checks at
the end of the run fail it."""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support import pg_cluster
from tests.support.leftovers import PLUGIN, Leftovers, Process, descendants, processes
from tests.support.only_loopback import Network
from tests.support.processes import alive
from tests.support.wait import eventually


def guard(request: pytest.FixtureRequest) -> Leftovers:
    found = request.config.pluginmanager.get_plugin(PLUGIN)
    assert isinstance(found, Leftovers), "tests/conftest.py registers the guard"
    return found


def network(request: pytest.FixtureRequest) -> Network:
    """The run's network guard, what it caught so far filed with the run's attempts."""
    leftovers = guard(request)
    if leftovers.network is None and leftovers.network_error is None:
        pytest.skip("SESSIOND_TEST_NETWORK=host: this run has the machine's network")
    assert leftovers.network is not None, leftovers.network_error
    leftovers.collect()
    return leftovers.network


def python(code: str) -> subprocess.CompletedProcess[str]:
    """`code` in a child process of the test (so marked as the run's), its output."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, check=True)  # fmt: skip


CONNECT = """
import socket, sys
for family, address in ((socket.AF_INET, "10.255.255.1"), (socket.AF_INET6, "2001:db8::1")):
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.connect((address, 9))
            print("connected")
        except OSError as exc:
            print(exc.errno)
"""


def test_a_connection_past_loopback_is_caught_and_pinned_to_its_test(
    request: pytest.FixtureRequest,
) -> None:
    guarded = network(request)
    done = python(CONNECT)
    assert done.stdout.split() == [str(errno.ENETUNREACH)] * 2  # no route: nothing left
    caught = guarded.attempts()
    assert {(a.what.split(" ", 1)[1], a.test) for a in caught} == {
        ("packet(s) to an IPv4 address outside loopback (no route)", request.node.nodeid),
        ("packet(s) to an IPv6 address outside loopback (no route)", request.node.nodeid),
    }


def test_a_lookup_is_caught_with_the_name_asked_and_the_process_that_asked(
    request: pytest.FixtureRequest,
) -> None:
    """An update check starts with a lookup: caught as it is asked, the asker named, and
    answered at once (REFUSED), so the asker fails fast as it would offline."""
    guarded = network(request)
    done = python("""
        import socket
        try:
            socket.getaddrinfo("updates.example.org", 443, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            print(exc.errno == socket.EAI_AGAIN)
    """)
    assert done.stdout.split() == ["True"]  # no answer: a temporary failure, as offline
    caught = guarded.attempts()
    if not guarded.nameservers:  # the nameserver could not be given to lo: counted
        assert any("outside loopback" in a.what for a in caught), caught
        return
    asked = {(a.what, a.test) for a in caught if "updates.example.org" in a.what}
    assert ("DNS lookup of updates.example.org (A)", request.node.nodeid) in asked, caught
    assert all("python" in a.who and "getaddrinfo" in a.who for a in caught), caught


def test_loopback_by_address_and_by_name_is_not_an_attempt(
    request: pytest.FixtureRequest,
) -> None:
    guarded = network(request)
    listeners = []
    for family, address in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.bind((address, 0))
        listener.listen()
        listeners.append(listener)
    ports = [listener.getsockname()[1] for listener in listeners]
    try:
        done = python(f"""
            import socket
            for host, port in (("127.0.0.1", {ports[0]}), ("::1", {ports[1]}),
                               ("localhost", {ports[0]})):
                socket.create_connection((host, port)).close()
            print("ok")
        """)
    finally:
        for listener in listeners:
            listener.close()
    assert done.stdout.split() == ["ok"]
    assert guarded.attempts() == []


DETACH = """
import os, sys
keep_environment = sys.argv[1] == "marked"
if os.fork() == 0:
    os.setsid()  # out of the test's session and process group
    if os.fork() == 0:  # double fork: the sleeper's parent exits at once
        env = dict(os.environ) if keep_environment else {}  # an environment of its own
        os.execve("/bin/sleep", ["sleep", "600"], env)
    os._exit(0)
os.wait()
"""


def test_a_daemon_that_detached_is_found_named_and_ended(request: pytest.FixtureRequest) -> None:
    """Two sleepers that double-forked and left the test's session: one with the run's
    environment (found by its marker, named by its test), one started with an
    environment of its own (found all the same: re-parented to pytest, a subreaper)."""
    leftovers = guard(request)
    assert leftovers.subreaper, "pytest is a child subreaper on Linux"
    before = {p.pid for p in leftovers.of_the_run()}
    for how in ("marked", "bare"):
        subprocess.run([sys.executable, "-c", DETACH, how], check=True)

    def sleepers() -> list[Process]:
        return [p for p in leftovers.of_the_run() if p.pid not in before
                and Path(f"/proc/{p.pid}/cmdline").read_bytes() == b"sleep\x00600\x00"]  # fmt: skip

    def both() -> list[Process] | None:
        found = sleepers()
        return found if len(found) == 2 else None

    left = eventually(both, "both sleepers running")
    marked, bare = sorted(left, key=lambda p: not p.environ)
    assert marked.environ and not bare.environ
    assert request.node.nodeid in leftovers.describe(marked)
    assert "sleep 600" in leftovers.describe(marked)
    assert bare.ppid == os.getpid()  # adopted: a descendant though it carries nothing
    leftovers.end(left)
    assert not alive(marked.pid) and not alive(bare.pid)
    assert bare.pid not in {p.pid for p in processes().values() if p.ppid == os.getpid()}


def test_the_postgresql_cluster_ci_started_is_not_a_leftover_even_restarted(
    request: pytest.FixtureRequest, postgres: pg_cluster.Cluster
) -> None:
    """CI starts its cluster before the run and stops it after: not the run's to end, even
    when a test restarted it (its new processes then come from the run, marked and
    adopted). Spared by its `postmaster.pid`; the same processes, not spared, are found."""
    leftovers = guard(request)
    postgres.stop()
    postgres.start()
    postmaster = int((postgres.data / "postmaster.pid").read_text().split()[0])
    cluster = {postmaster, *descendants(processes(), postmaster)}
    found = {p.pid for p in leftovers.of_the_run(ci_postgres="")}
    assert postmaster in found  # started by this run: found as its own
    spared = {p.pid for p in leftovers.of_the_run(ci_postgres=postgres.root)}
    assert not cluster & spared
