"""A stranger cannot stand in for the shared server (issue 34).

After the shared server dies uncleanly (kill -9, OOM) its discovery file stays behind,
naming its pid and port. Another local user may bind that port and, with a fork loop, take
that pid: `sessiond client` counted a process of another user as alive and sent whatever
answered the stale token, the workspace folders and the person's message. Here a real
`nobody` (as root: `setpriv`) does both, and the client sends it nothing; something of our
own that listens without the token gets a handshake that proves nothing and no frame; the
real server proves it holds the token before a client sends anything. Windows reach the
server over a Unix socket in the 0700 data dir, where no other user can connect, so an
idle-connection flood from another user keeps no client out.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import WebSocketException

from tests.support.rpc_client import HANG_GUARD, REPO
from tests.support.stranger import as_another_user
from tests.support.ws_client import WsClient, WsServerProcess, server_env
from tests.test_shared_server import Client, client, gone, records, wait_until

__all__ = ["client"]  # the fixture, shared with tests/test_shared_server.py

WsSpawn = Callable[..., WsServerProcess]
SECRET = "the person's message, meant for sessiond alone"


def _another_user() -> list[str]:
    prefix = as_another_user()
    if prefix is None:
        pytest.skip("another uid needs root (setpriv) to run a process as nobody")
    return prefix


class Stranger:
    """tests/support/stranger.py on `port`, run under `prefix`; `heard` is everything it
    was sent (handshake headers and messages), read as it arrives."""

    def __init__(self, port: int, prefix: list[str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [*(prefix or []), sys.executable, "-m", "tests.support.stranger", str(port)],
            cwd=REPO,
            env={**server_env(), "PYTHONPATH": str(REPO)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.heard: list[dict[str, Any]] = []
        assert self.proc.stdout is not None
        ready = json.loads(self.proc.stdout.readline() or "{}")
        assert "ready" in ready, "the stranger could not listen"
        self.pid = int(ready["ready"])
        self.port = port
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.heard.append(json.loads(line))

    def said(self) -> str:
        time.sleep(0.2)  # what a client sent has arrived (the client exited before this)
        return json.dumps(self.heard)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=HANG_GUARD)


@pytest.fixture
def strangers() -> Iterator[Callable[..., Stranger]]:
    started: list[Stranger] = []

    def start(port: int, prefix: list[str] | None = None) -> Stranger:
        stranger = Stranger(port, prefix)
        started.append(stranger)
        return stranger

    yield start
    for stranger in started:
        stranger.close()


def _rewrite(home: Path, record: dict[str, Any], **changes: Any) -> None:
    """The discovery file as a dead server left it, with `changes` (a pid reused)."""
    path = home / "servers" / record["file"]
    kept = {key: value for key, value in record.items() if key != "file"}
    path.write_text(json.dumps({**kept, **changes}))


def _dead_shared_server(client: Client, home: Path, tmp_path: Path) -> tuple[dict[str, Any], str]:
    """A shared server that recorded a thread, then was killed with SIGKILL: its file stays."""
    assert client("list").returncode == 0
    (record,) = records(home)
    started = _run_ws(record, tmp_path)
    os.kill(record["pid"], signal.SIGKILL)
    wait_until(lambda: gone(record["pid"]))
    return record, started


def _run_ws(record: dict[str, Any], tmp_path: Path) -> str:
    """A thread started on the server of `record` (over TCP, with its token)."""

    async def start() -> str:
        window = await WsClient.open(record)
        try:
            started = await window.request("thread/start", {"cwd": str(tmp_path)})
            await window.request(
                "thread/close",
                {"threadId": started["thread"]["threadId"], "sessionId": started["sessionId"]},
            )
            return str(started["thread"]["threadId"])
        finally:
            await window.close()

    return asyncio.run(start())


def test_a_stranger_holding_a_dead_servers_port_and_pid_is_sent_nothing(
    client: Client, home: Path, tmp_path: Path, strangers: Callable[..., Stranger]
) -> None:
    """The red team's case: another user bound the port and took the pid. Before, the
    client sent it the token, the folders and the message, and reported success."""
    nobody = _another_user()
    dead, thread_id = _dead_shared_server(client, home, tmp_path)
    stranger = strangers(dead["port"], nobody)
    _rewrite(home, dead, pid=stranger.pid)  # the pid it took (a fork loop: ~2 min)
    done = client("record", thread_id, "--message", SECRET)
    assert done.returncode == 0, done.stderr
    said = stranger.said()
    assert dead["token"] not in said and SECRET not in said and str(tmp_path) not in said
    assert stranger.heard == []  # not even a connection: a pid of another user is stale
    (real,) = records(home)  # a server of our own took over, and recorded the message
    assert real["pid"] not in (dead["pid"], stranger.pid)
    thread = home / "threads"
    assert SECRET in "".join(p.read_text() for p in thread.rglob("*.jsonl"))


def test_a_port_another_user_listens_on_is_not_trusted_though_the_pid_is_ours(
    client: Client, home: Path, tmp_path: Path, strangers: Callable[..., Stranger]
) -> None:
    """The pid is alive and ours (reused by a process of ours), the port another user's:
    the listening socket's owner decides."""
    nobody = _another_user()
    dead, _ = _dead_shared_server(client, home, tmp_path)
    stranger = strangers(dead["port"], nobody)
    ours = subprocess.Popen(["sleep", "600"])
    try:
        _rewrite(home, dead, pid=ours.pid)
        done = client("list")
        assert done.returncode == 0, done.stderr
        assert stranger.heard == [] and dead["token"] not in stranger.said()
        assert not (home / "servers" / dead["file"]).exists()  # stale: removed
    finally:
        ours.kill()
        ours.wait()


def test_something_of_ours_listening_without_the_token_gets_no_token_and_no_frame(
    client: Client, home: Path, tmp_path: Path, strangers: Callable[..., Stranger]
) -> None:
    """Same uid, same port, no token: the client offers a proof that gives nothing away,
    waits for the server's, and sends no frame (no folders, no message) without it."""
    dead, thread_id = _dead_shared_server(client, home, tmp_path)
    stranger = strangers(dead["port"])  # ours: it passes the uid checks
    _rewrite(home, dead, pid=stranger.pid)
    done = client("record", thread_id, "--message", SECRET)
    assert done.returncode == 0, done.stderr
    said = stranger.said()
    assert dead["token"] not in said and SECRET not in said and str(tmp_path) not in said
    assert [heard for heard in stranger.heard if "message" in heard] == []
    (real,) = records(home)
    assert real["pid"] != stranger.pid


def _expected(token: str, role: str, nonce: str) -> str:
    """The proof as docs/headless-clients.md specifies it, computed here from that text."""
    message = f"sessiond {role} proof\n{nonce}".encode()
    return hmac.new(token.encode(), message, hashlib.sha256).hexdigest()


def _raw_handshake(connect: Callable[[], socket.socket], *headers: str) -> dict[str, str]:
    """The status and headers of the server's answer to a WebSocket upgrade."""
    request = (
        "GET / HTTP/1.1\r\nHost: localhost\r\n"
        "Upgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        + "".join(f"{header}\r\n" for header in headers)
        + "\r\n"
    )
    with connect() as sock:
        sock.settimeout(HANG_GUARD)
        sock.sendall(request.encode())
        reader = sock.makefile("rb")
        answer = {"status": reader.readline().decode().split()[1]}
        while (line := reader.readline().decode().strip()) != "":
            name, _, value = line.partition(":")
            answer[name.strip().lower()] = value.strip()
        return answer


def _unix(home: Path, record: dict[str, Any]) -> Callable[[], socket.socket]:
    def connect() -> socket.socket:
        sock = socket.socket(socket.AF_UNIX)
        directory = os.open(home / "servers", os.O_RDONLY | os.O_DIRECTORY)
        try:  # through the directory: a pytest path may be past sun_path's 108 bytes
            sock.connect(f"/proc/self/fd/{directory}/{record['socket']}")
        finally:
            os.close(directory)
        return sock

    return connect


def test_the_real_server_proves_it_holds_the_token_and_a_wrong_proof_is_refused(
    ws_server: WsSpawn, home: Path
) -> None:
    server = ws_server()
    token = server.record["token"]
    assert server.record["socket"].endswith(".sock") and "/" not in server.record["socket"]
    tcp = lambda: socket.create_connection(("127.0.0.1", server.record["port"]))  # noqa: E731
    for connect in (tcp, _unix(home, server.record)):
        nonce = base64.urlsafe_b64encode(secrets.token_bytes(24)).decode()
        answer = _raw_handshake(
            connect,
            f"Sessiond-Nonce: {nonce}",
            f"Authorization: Sessiond-Proof {_expected(token, 'client', nonce)}",
        )
        assert answer["status"] == "101"
        assert hmac.compare_digest(answer["sessiond-proof"], _expected(token, "server", nonce))
        wrong = _raw_handshake(
            connect,
            f"Sessiond-Nonce: {nonce}",
            f"Authorization: Sessiond-Proof {_expected('guessed', 'client', nonce)}",
        )
        assert wrong["status"] == "401" and "sessiond-proof" not in wrong
        replayed = _raw_handshake(  # a proof for another nonce proves nothing
            connect,
            f"Sessiond-Nonce: {nonce}x",
            f"Authorization: Sessiond-Proof {_expected(token, 'client', nonce)}",
        )
        assert replayed["status"] == "401"


def test_a_record_that_gives_no_proof_is_skipped_not_sent_the_token(
    ws_server: WsSpawn, home: Path, strangers: Callable[..., Stranger]
) -> None:
    """An older sessiond's record (no `proof`): using it would mean sending the token, so
    it is left alone, for its own server, and the next record is used."""
    real = ws_server()
    older = strangers(_free_port())
    planted = home / "servers" / "1.json"
    record = {"pid": older.pid, "host": "127.0.0.1", "port": older.port, "token": "older's"}
    planted.write_text(json.dumps(record))
    os.utime(planted, (time.time() + 60, time.time() + 60))  # the newest: tried first
    done = subprocess.run(
        [sys.executable, "-m", "server.cli", "--home", str(home), "client", "list"],
        cwd=home.parent,
        env={**server_env(), "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
    )
    assert done.returncode == 0, done.stderr
    assert planted.exists() and older.heard == []
    assert {r["pid"] for r in records(home)} == {real.proc.pid, older.pid}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_windows_use_the_unix_socket_in_the_private_data_dir(
    client: Client, home: Path
) -> None:
    attached = client("attach")
    assert attached.returncode == 0, attached.stderr
    shown = json.loads(attached.stdout)
    (record,) = records(home)
    socket_path = home / "servers" / record["socket"]
    assert shown["transport"] == "unix" and shown["socket"] == str(socket_path)
    assert (home / "servers").stat().st_mode & 0o777 == 0o700
    import stat

    assert stat.S_ISSOCK(socket_path.lstat().st_mode)
    # and the server removes it as it exits
    os.kill(record["pid"], signal.SIGTERM)
    wait_until(lambda: gone(record["pid"]))
    assert not socket_path.exists() and records(home) == []


def _flood(port: int, prefix: list[str], processes: int = 4) -> list[subprocess.Popen[str]]:
    """Idle connections to `port`, opened as fast as `processes` of another user can and
    held (the newest 800 each): what the red team kept every client out with."""
    code = (
        "import socket, sys\n"
        "held = []\n"
        "print('flooding', flush=True)\n"
        "while True:\n"
        "    try:\n"
        "        held.append(socket.create_connection(('127.0.0.1', int(sys.argv[1]))))\n"
        "    except OSError:\n"
        "        pass\n"
        "    if len(held) > 800:\n"
        "        held.pop(0).close()\n"
    )
    floods = []
    for _ in range(processes):
        flood = subprocess.Popen(
            [*prefix, sys.executable, "-c", code, str(port)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        )
        floods.append(flood)
        assert flood.stdout is not None and flood.stdout.readline().strip() == "flooding"
    return floods


async def test_an_idle_connection_flood_from_another_user_keeps_no_client_out(
    ws_server: WsSpawn, home: Path
) -> None:
    """The red team held 0 of 5 clients out with idle sockets from another uid. Windows
    come in through the Unix socket, which no other user can reach; the loopback port
    closes another user's connection at once (its owner read from the kernel), so it
    takes no handshake slot."""
    nobody = _another_user()
    server = ws_server()
    floods = _flood(server.record["port"], nobody)
    try:
        time.sleep(1)  # the flood under way
        listed = []
        for _ in range(5):  # the product's own client: over the Unix socket
            done = subprocess.run(
                [sys.executable, "-m", "server.cli", "--home", str(home), "client", "list"],
                cwd=home.parent,
                env={**server_env(), "PYTHONPATH": str(REPO)},
                capture_output=True,
                text=True,
                timeout=HANG_GUARD,
            )
            listed.append(done.returncode == 0)
        opened = []
        for _ in range(5):  # a client of the loopback port, while the flood goes on
            try:
                window = await asyncio.wait_for(WsClient.open(server.record), 5)
                opened.append((await window.request("thread/list"))["threads"] == [])
                await window.close()
            except (OSError, TimeoutError, ConnectionError, WebSocketException):
                opened.append(False)
    finally:
        for flood in floods:
            flood.kill()
            flood.wait()
    assert listed == [True] * 5 and opened == [True] * 5, (listed, opened)
    assert "refused WebSocket connection" in server.stderr()  # said, at a bounded rate


def test_a_symlinked_servers_directory_is_refused_and_its_target_left_alone(
    home: Path, tmp_path: Path
) -> None:
    """Before, starting a server deleted every `*.json` in the linked directory and made
    it 0700."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o755)
    elsewhere.chmod(0o755)
    kept = elsewhere / "1.json"
    kept.write_text(json.dumps({"pid": 999_999_999, "port": 1, "token": "t"}))
    (home / "servers").symlink_to(elsewhere)
    done = subprocess.run(
        [sys.executable, "-m", "server.cli", "--home", str(home), "serve", "--ws", "0"],
        env={**server_env(), "PYTHONPATH": str(REPO)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
    )
    assert done.returncode == 2, done.stderr
    assert "symbolic link" in done.stderr and str(home / "servers") in done.stderr
    assert kept.exists() and elsewhere.stat().st_mode & 0o777 == 0o755
    assert os.listdir(elsewhere) == ["1.json"]
    listed = subprocess.run(  # a client ignores it: nothing read there, nothing removed
        [sys.executable, "-m", "server.cli", "--home", str(home), "client", "list"],
        env={**server_env(), "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
    )
    assert listed.returncode == 2 and "symbolic link" in listed.stderr
    assert os.listdir(elsewhere) == ["1.json"]
