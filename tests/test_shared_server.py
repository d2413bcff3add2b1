"""Windows share one server: `sessiond client --spawn` (what the editor does for every
window) connects to the data dir's running sessiond, else spawns one that lingers; a dead,
foreign or wrongly keyed discovery file is not trusted; racing windows end with one server;
the server ends itself once no client has been attached for its grace. All real processes
on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.support.rpc_client import HANG_GUARD, REPO, RpcError
from tests.support.ws_client import WsClient, WsServerProcess, server_env

Client = Callable[..., subprocess.CompletedProcess[str]]


def records(home: Path) -> list[dict[str, Any]]:
    found = []
    for path in sorted((home / "servers").glob("*.json")):
        record = json.loads(path.read_text())
        record["file"] = path.name
        found.append(record)
    return found


def who(record: dict[str, Any]) -> tuple[int, int, str]:
    """A server's identity (its folders change as windows come and go)."""
    return record["pid"], record["port"], record["token"]


def gone(pid: int) -> bool:
    """Exited (a zombie no one reaped yet counts as exited)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + HANG_GUARD  # a hang guard, not a limit
    while not condition():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.02)


@pytest.fixture
def client(home: Path, tmp_path: Path) -> Iterator[Client]:
    """Run `sessiond client ARGS` from a project directory; every server it spawned is
    killed (by its pid, from its discovery file) at the end."""
    project = tmp_path / "project"
    project.mkdir()
    spawned: set[int] = set()

    def run(*args: str, linger: float = 60.0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "server.cli", "--home", str(home), "client", "--spawn",
             "--linger", str(linger), *args],
            cwd=project,
            env={**server_env(), "PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            timeout=HANG_GUARD,
        )  # fmt: skip
        spawned.update(record["pid"] for record in records(home))
        return done

    yield run
    spawned.update(record["pid"] for record in records(home))
    for pid in spawned:
        if pid != os.getpid() and not gone(pid):
            os.kill(pid, signal.SIGKILL)


def spawned_servers(home: Path) -> list[str]:
    """The `listening` line of every server `--spawn` started, from their shared log."""
    log = home / "servers" / "spawned.log"
    return [line for line in log.read_text().splitlines() if "listening on" in line]


def test_the_second_client_connects_to_the_server_the_first_spawned(
    client: Client, home: Path
) -> None:
    first = client("list")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["threads"] == []
    (spawned,) = records(home)
    second = client("list")
    assert second.returncode == 0, second.stderr
    assert [who(r) for r in records(home)] == [who(spawned)]  # same pid, port, token
    assert len(spawned_servers(home)) == 1
    assert not gone(spawned["pid"])


def test_after_a_kill_9_the_next_client_spawns_a_new_server_and_drops_the_stale_file(
    client: Client, home: Path
) -> None:
    assert client("list").returncode == 0
    (dead,) = records(home)
    os.kill(dead["pid"], signal.SIGKILL)
    again = client("list")
    assert again.returncode == 0, again.stderr
    (new,) = records(home)  # the dead server's file is gone, one new one
    assert new["pid"] != dead["pid"] and new["token"] != dead["token"]
    assert len(spawned_servers(home)) == 2


def test_the_spawned_servers_log_is_rotated_once_past_a_mebibyte(
    client: Client, home: Path
) -> None:
    (home / "servers").mkdir(mode=0o700, parents=True, exist_ok=True)
    log = home / "servers" / "spawned.log"
    old = "an older server's line\n" * 50_000  # 1.1 MiB
    log.write_text(old)
    assert client("list").returncode == 0
    assert (home / "servers" / "spawned.log.1").read_text() == old  # kept, once
    assert len(spawned_servers(home)) == 1 and log.stat().st_size < 10_000
    assert log.stat().st_mode & 0o777 == 0o600


async def test_a_spawned_server_lives_while_a_client_is_attached_then_exits_after_its_grace(
    client: Client, home: Path
) -> None:
    grace = 0.5
    assert client("list", linger=grace).returncode == 0
    (record,) = records(home)
    window = await WsClient.open(record)  # a window that stays open
    await asyncio.sleep(grace * 4)
    assert not gone(record["pid"]) and [who(r) for r in records(home)] == [who(record)]
    assert (await window.request("thread/list", {}))["threads"] == []
    await window.close()
    wait_until(lambda: gone(record["pid"]))
    assert records(home) == []
    log = (home / "servers" / "spawned.log").read_text()
    assert f"no client for {grace:g} s, exiting" in log  # the clean way out, not a crash


def _foreign_http_port() -> tuple[HTTPServer, int]:
    """Something else listening on loopback: an HTTP server that is not sessiond."""

    class NotFound(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_error(404)

        def log_message(self, *args: Any) -> None:
            pass

    http = HTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    return http, http.server_address[1]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _plant(home: Path, name: str, port: int, token: str = "not-the-token") -> Path:
    """A discovery file naming a live pid (this test's) and `port`, as a server that
    proves its token writes it."""
    directory = home / "servers"
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / name
    record = {"pid": os.getpid(), "host": "127.0.0.1", "port": port, "token": token,
              "proof": "hmac-sha256", "workspaceFolders": [], "protocolVersion": 1}  # fmt: skip
    path.write_text(json.dumps(record))
    path.chmod(0o600)
    return path


def test_a_discovery_file_naming_a_foreign_or_closed_port_is_not_trusted(
    client: Client, home: Path
) -> None:
    http, foreign_port = _foreign_http_port()
    try:
        foreign = _plant(home, f"{foreign_port}.json", foreign_port)
        closed_port = _closed_port()
        closed = _plant(home, f"{closed_port}.json", closed_port)
        listed = client("list")
        assert listed.returncode == 0, listed.stderr
        assert not foreign.exists() and not closed.exists()
        (spawned,) = records(home)
        assert spawned["pid"] != os.getpid()
    finally:
        http.shutdown()
        http.server_close()


def test_without_spawn_a_stale_file_is_removed_and_the_client_says_none_runs(
    home: Path, tmp_path: Path
) -> None:
    stale = _plant(home, "1.json", _closed_port())
    done = subprocess.run(
        [sys.executable, "-m", "server.cli", "--home", str(home), "client", "list"],
        cwd=tmp_path,
        env={**server_env(), "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
    )
    assert done.returncode == 2 and "no running sessiond" in done.stderr
    assert not stale.exists()
    assert not (home / "servers" / "spawned.log").exists()  # nothing was started


def test_a_file_with_the_wrong_token_is_dropped_and_the_real_server_used(
    client: Client, ws_server: Callable[..., WsServerProcess], home: Path
) -> None:
    real = ws_server()
    wrong = _plant(home, "99999.json", real.record["port"], token="guessed")
    os.utime(wrong, (time.time() + 60, time.time() + 60))  # the newest: tried first
    listed = client("list")
    assert listed.returncode == 0, listed.stderr
    assert not wrong.exists()
    assert [r["pid"] for r in records(home)] == [real.proc.pid]
    assert not (home / "servers" / "spawned.log").exists()


def test_two_clients_racing_to_spawn_end_with_one_server(home: Path, tmp_path: Path) -> None:
    """The first racer's server is held after it took the spawn lock and found no server,
    before it listens (a pause point); the others start meanwhile and must wait for the
    lock, find it and leave, not start servers of their own."""
    argv = [sys.executable, "-m", "server.cli", "--home", str(home), "client", "--spawn",
            "--linger", "60", "list"]  # fmt: skip
    points = tmp_path / "points"
    points.mkdir()
    env = {**server_env(), "PYTHONPATH": str(REPO),
           "SESSIOND_PAUSE_AT": f"shared-server-claimed:{points}"}  # fmt: skip

    def racer() -> subprocess.Popen[str]:
        return subprocess.Popen(
            argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    racers = [racer()]
    try:
        wait_until((points / "shared-server-claimed.reached").exists)
        racers += [racer(), racer()]
        time.sleep(2)  # lets their servers reach the lock (the test cannot fail by timing)
        (points / "shared-server-claimed.go").touch()
        outputs = [r.communicate(timeout=HANG_GUARD) for r in racers]
        assert [r.returncode for r in racers] == [0, 0, 0], outputs
        assert len(records(home)) == 1
        assert len(spawned_servers(home)) == 1
        log = (home / "servers" / "spawned.log").read_text()
        assert log.count("already running") == 2  # the others' servers left at once
    finally:
        for record in records(home):
            os.kill(record["pid"], signal.SIGKILL)


def _announced(window: WsClient, method: str, thread_id: str) -> Callable[[], bool]:
    return lambda: any(
        n["method"] == method and n["params"]["thread"]["threadId"] == thread_id
        for n in window.notifications
    )


async def test_two_windows_on_one_server_share_leases_and_notifications(
    client: Client, home: Path, tmp_path: Path
) -> None:
    assert client("list").returncode == 0
    (record,) = records(home)
    first = await WsClient.open(record, name="window-1")
    second = await WsClient.open(record, name="window-2")
    try:
        started = await first.request("thread/start", {"cwd": str(tmp_path)})
        thread_id = started["thread"]["threadId"]
        await second.wait_for(_announced(second, "thread/started", thread_id))
        item = {"type": "message", "id": "m1", "role": "user", "content": "from window 1"}
        await first.request(
            "thread/record",
            {"threadId": thread_id, "sessionId": started["sessionId"], "items": [item]},
        )
        await second.wait_for(_announced(second, "thread/updated", thread_id))
        with pytest.raises(RpcError) as busy:  # the first window holds the lease
            await second.request("thread/resume", {"threadId": thread_id})
        assert busy.value.kind == "ThreadBusy"
    finally:
        await first.close()
        await second.close()


def test_attach_names_the_shared_server_without_its_token(client: Client, home: Path) -> None:
    """What the editor runs when no server answers: it starts one and makes no request
    (the window's own first list, with its indexing progress, stays the window's)."""
    attached = client("attach")
    assert attached.returncode == 0, attached.stderr
    shown = json.loads(attached.stdout)
    (record,) = records(home)
    assert (shown["pid"], shown["port"]) == (record["pid"], record["port"])
    assert shown["discoveryFile"] == str(home / "servers" / record["file"])
    assert record["token"] not in attached.stdout + attached.stderr
    assert record["token"] not in (home / "servers" / "spawned.log").read_text()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--linger", "5"], "--linger ends a WebSocket-only server"),
        (["--stdio", "--ws", "0", "--linger", "5"], "--linger ends a WebSocket-only server"),
        (["--ws", "0", "--linger", "-1"], "--linger takes a number of seconds"),
        (["--shared"], "--shared is a WebSocket-only server"),
    ],
)
def test_serve_refuses_linger_and_shared_without_a_websocket(
    home: Path, args: list[str], said: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "server.cli", "--home", str(home), "serve", *args],
        env={**server_env(), "PYTHONPATH": str(REPO)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
    )
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert not (home / "servers").exists()  # nothing listened, nothing published


async def test_a_linger_server_whose_data_dir_is_deleted_refuses_records_and_exits(
    client: Client, home: Path, tmp_path: Path
) -> None:
    """Issue 34: after `rm -rf` of its data dir, a lingering server went on acknowledging
    records into the deleted files, and nobody noticed: every one was lost. A record is
    now refused with a StorageError naming the mend, nothing is made anew in the deleted
    directory's place, and the server leaves (a window then starts a new one)."""
    assert client("list").returncode == 0
    (record,) = records(home)
    window = await WsClient.open(record)
    try:
        started = await window.request("thread/start", {"cwd": str(tmp_path)})
        thread_id, session_id = started["thread"]["threadId"], started["sessionId"]

        def message(text: str) -> dict[str, Any]:
            item = {"type": "message", "id": text, "role": "user", "content": text}
            return {"threadId": thread_id, "sessionId": session_id, "items": [item]}

        await window.request("thread/record", message("kept"))
        import shutil

        shutil.rmtree(home)
        with pytest.raises(RpcError) as refused:
            await window.request("thread/record", message("into a deleted file"))
        assert refused.value.kind == "StorageError"
        assert "deleted" in refused.value.message and "Restart sessiond" in refused.value.message
        with pytest.raises((RpcError, ConnectionError)):
            await window.request("thread/start", {"cwd": str(tmp_path)})
    finally:
        with contextlib.suppress(Exception):
            await window.close()
    wait_until(lambda: gone(record["pid"]))
    assert not home.exists(), sorted(str(p) for p in home.rglob("*"))  # nothing made anew


async def test_a_window_on_the_loopback_port_sends_each_request_at_once(
    client: Client, home: Path
) -> None:
    """A socket the client makes itself is not one asyncio turns Nagle off for: a request
    written right behind `initialized` waited for the server's delayed ACK (40 ms a second
    window: bench J1' measured 47 ms against its 15 ms target). The option on the real
    connection, to the real server's port."""
    from server.cli.client import Client as SessiondClient

    assert client("list").returncode == 0
    (record,) = records(home)
    window = await SessiondClient.open(record)  # no directory: the port, not the socket
    try:
        sock = window.ws.transport.get_extra_info("socket")
        assert sock.family in (socket.AF_INET, socket.AF_INET6)
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        assert (await window.request("thread/list", {}))["threads"] == []
    finally:
        await window.close()
