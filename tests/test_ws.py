"""The WebSocket transport against real server processes on 127.0.0.1: authentication,
discovery, leases across clients and processes, subscriptions and the in-flight bound."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.support.items import message
from tests.support.rpc_client import HANG_GUARD, REPO, RpcError, ServerProcess
from tests.support.ws_client import WsClient, WsServerProcess, server_env, wait_for_record

Spawn = Callable[..., ServerProcess]


def thread_files(home: Path) -> list[Path]:
    return list((home / "threads").glob("*/*.jsonl"))


async def test_lock_file_is_private_and_removed_after_clean_shutdown(
    spawn: Spawn, home: Path, tmp_path: Path
) -> None:
    editor = spawn(args=["--ws", "0"])  # an editor's server: stdio beside WebSocket
    editor.initialize([str(tmp_path / "from-stdio")])
    record = wait_for_record(home, editor.proc.pid)
    path = home / "servers" / f"{record['port']}.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert record["host"] == "127.0.0.1" and record["protocolVersion"] == 1
    assert len(record["token"]) >= 32
    client = await WsClient.open(record, folders=[str(tmp_path / "from-ws")])
    folders = json.loads(path.read_text())["workspaceFolders"]
    assert folders == [str(tmp_path / "from-stdio"), str(tmp_path / "from-ws")]
    await client.close()
    assert editor.shutdown() == 0
    assert not path.exists()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("client", ["none", "came and went", "still connected"])
def test_lock_file_removed_on_signal(
    ws_server: Callable[..., WsServerProcess], tmp_path: Path, signum: int, client: str
) -> None:
    """A client's disconnect rewrites the file (its folders leave); a signal during or
    after it must still leave no file naming a dead port."""
    server = ws_server()
    path = server.home / "servers" / f"{server.record['port']}.json"
    assert path.exists()

    async def visit() -> None:
        visitor = await WsClient.open(server.record, folders=[str(tmp_path)])
        await visitor.request("thread/start", {"cwd": str(tmp_path)})  # a session to end
        if client == "came and went":
            await visitor.close()
            server.proc.send_signal(signum)  # while the server still ends its session
        else:
            server.proc.send_signal(signum)
            with contextlib.suppress(ConnectionError):
                await visitor.wait_for(lambda: False)  # until the server closes the connection

    if client == "none":
        server.proc.send_signal(signum)
    else:
        asyncio.run(visit())
    assert server.proc.wait(timeout=HANG_GUARD) == 0
    assert not path.exists()


def test_standalone_server_publishes_its_folders_so_clients_in_them_find_it(
    home: Path, tmp_path: Path
) -> None:
    """Without `--folder` its folder is the directory it was started in; with them, those."""
    from server.cli.client import discover

    project, other = tmp_path / "project", tmp_path / "other"
    project.mkdir()
    other.mkdir()
    started: list[subprocess.Popen[bytes]] = []
    try:
        for cwd, folders in ((project, []), (tmp_path, ["--folder", str(other), "--folder", "."])):
            proc = subprocess.Popen(
                [sys.executable, "-m", "server.cli", "serve", "--ws", "0", "--home", str(home),
                 *folders],
                cwd=cwd, env=server_env(), stderr=subprocess.DEVNULL,
            )  # fmt: skip
            started.append(proc)
            record = wait_for_record(home, proc.pid)
            if not folders:
                assert record["workspaceFolders"] == [str(project)]
            else:
                assert record["workspaceFolders"] == [str(other), str(tmp_path)]
        first, second = (wait_for_record(home, proc.pid) for proc in started)
        assert discover(home, str(project / "src" / "app.py"))["port"] == first["port"]
        assert discover(home, str(other / "x"))["port"] == second["port"]
    finally:
        for proc in started:
            proc.kill()
            proc.wait()


async def test_stale_lock_file_does_not_block_startup(
    ws_server: Callable[..., WsServerProcess], home: Path
) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    servers = home / "servers"
    servers.mkdir(mode=0o700)
    stale = servers / "1.json"
    stale.write_text(json.dumps({"pid": dead.pid, "port": 1, "host": "127.0.0.1", "token": "x"}))
    server = ws_server()
    assert not stale.exists()
    client = await WsClient.open(server.record)
    assert await client.request("thread/list") == {"threads": [], "nextCursor": None}
    await client.close()


async def test_refused_handshakes_are_logged_and_record_nothing(
    ws_server: Callable[..., WsServerProcess], home: Path
) -> None:
    server = ws_server()
    url = f"ws://127.0.0.1:{server.record['port']}"
    token = server.record["token"]
    attempts = [
        ({}, None, 401),  # no token
        ({"Authorization": "Bearer wrong-token"}, None, 401),
        ({}, ["sessiond.bearer.wrong-token"], 401),
        ({"Authorization": f"Bearer {token}", "Origin": "https://evil.example"}, None, 403),
    ]
    for headers, subprotocols, status in attempts:
        with pytest.raises(InvalidStatus) as refused:
            await connect(url, additional_headers=headers, subprotocols=subprotocols)
        assert refused.value.response.status_code == status
    log = server.stderr()
    assert log.count("refused WebSocket connection") == len(attempts)
    assert "https://evil.example" in log and "wrong token" in log and "no token" in log
    assert not thread_files(home)
    client = await WsClient.open(server.record)  # the right token still gets in
    assert (await client.request("thread/list"))["threads"] == []
    await client.close()


@pytest.mark.parametrize("address", ["0.0.0.0:0", "[::]:0", "192.0.2.1:0", "example.com:0"])
def test_non_loopback_bind_is_refused(home: Path, address: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "server.cli", "--home", str(home), "serve", "--ws", address],
        cwd=REPO,
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert "refusing to listen" in done.stderr and "loopback" in done.stderr
    assert not (home / "servers").exists() and not thread_files(home)


async def test_token_as_subprotocol_is_answered_with_the_same_subprotocol(
    ws_server: Callable[..., WsServerProcess],
) -> None:
    server = ws_server()
    offered = f"sessiond.bearer.{server.record['token']}"
    async with connect(
        f"ws://127.0.0.1:{server.record['port']}", subprotocols=["chat", offered]
    ) as ws:
        assert ws.subprotocol == offered
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize"}))
        answer = json.loads(await asyncio.wait_for(ws.recv(), HANG_GUARD))
        assert answer["result"]["protocolVersion"] == 1


async def test_each_connection_has_its_own_handshake(
    ws_server: Callable[..., WsServerProcess],
) -> None:
    server = ws_server()
    ready = await WsClient.open(server.record)
    fresh = await WsClient.open(server.record, initialize=False)
    with pytest.raises(RpcError) as early:
        await fresh.request("thread/list")
    assert early.value.code == -32002
    assert (await ready.request("thread/list"))["threads"] == []
    await fresh.close()
    await ready.close()


async def _resume_when_released(client: WsClient, thread_id: str) -> dict:
    """Resume, retrying while the lease is still held (a disconnect is released async)."""
    deadline = asyncio.get_running_loop().time() + HANG_GUARD
    while True:
        try:
            return await client.request("thread/resume", {"threadId": thread_id})
        except RpcError as busy:
            if busy.kind != "ThreadBusy" or asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.05)


async def test_second_client_gets_thread_busy_naming_the_first_until_it_disconnects(
    ws_server: Callable[..., WsServerProcess], tmp_path: Path
) -> None:
    server = ws_server()
    alpha = await WsClient.open(server.record, name="alpha")
    beta = await WsClient.open(server.record, name="beta")
    started = await alpha.request("thread/start", {"cwd": str(tmp_path)})
    thread_id = started["thread"]["threadId"]
    with pytest.raises(RpcError) as busy:
        await beta.request("thread/resume", {"threadId": thread_id})
    assert busy.value.kind == "ThreadBusy"
    assert busy.value.data["holder"].startswith("alpha (connection ")
    await alpha.close()
    report = await _resume_when_released(beta, thread_id)
    assert report["session"]["sessionId"]
    recorded = await beta.request(
        "thread/record",
        {
            "threadId": thread_id,
            "sessionId": report["session"]["sessionId"],
            "items": [message("b")],
        },
    )
    assert recorded["duplicates"] == 0
    await beta.close()


async def test_thread_busy_across_processes_names_the_other_process_client(
    ws_server: Callable[..., WsServerProcess], tmp_path: Path
) -> None:
    first, second = ws_server(), ws_server()
    alpha = await WsClient.open(first.record, name="alpha")
    beta = await WsClient.open(second.record, name="beta")
    thread_id = (await alpha.request("thread/start", {"cwd": str(tmp_path)}))["thread"]["threadId"]
    with pytest.raises(RpcError) as busy:
        await beta.request("thread/resume", {"threadId": thread_id})
    assert busy.value.kind == "ThreadBusy"
    holder = busy.value.data["holder"]
    assert holder.startswith("alpha (connection ") and f"pid {first.proc.pid}" in holder
    await alpha.close()
    assert (await _resume_when_released(beta, thread_id))["status"] == "ready"
    await beta.close()


async def test_subscriber_sees_items_and_updates_in_order_until_it_unsubscribes(
    ws_server: Callable[..., WsServerProcess], tmp_path: Path
) -> None:
    server = ws_server()
    writer = await WsClient.open(server.record, name="writer")
    watcher = await WsClient.open(server.record, name="watcher")
    started = await writer.request("thread/start", {"cwd": str(tmp_path)})
    thread_id, session_id = started["thread"]["threadId"], started["sessionId"]
    assert await watcher.request("thread/subscribe", {"threadId": thread_id}) == {}
    sent = [message(f"m{n}") for n in range(5)]
    for item in sent:
        await writer.request(
            "thread/record", {"threadId": thread_id, "sessionId": session_id, "items": [item]}
        )
    # A retry of the same item stores nothing and announces nothing.
    await writer.request(
        "thread/record", {"threadId": thread_id, "sessionId": session_id, "items": [sent[0]]}
    )

    def recorded() -> list[dict]:
        return [n for n in watcher.notifications if n["method"] == "item/recorded"]

    await watcher.wait_for(lambda: len(recorded()) == 5)
    items = [item for n in recorded() for item in n["params"]["items"]]
    assert [item["id"] for item in items] == [item["id"] for item in sent]
    assert [item["seq"] for item in items] == [2, 3, 4, 5, 6]
    kinds = [n["method"] for n in watcher.notifications if n["method"] != "thread/started"]
    assert kinds[0] == "item/recorded"  # the items come before the update that counts them

    def latest_count() -> int | None:
        updates = [n for n in watcher.notifications if n["method"] == "thread/updated"]
        return updates[-1]["params"]["thread"]["itemCount"] if updates else None

    # thread/updated is coalesced during a burst; the last one carries the final row.
    await watcher.wait_for(lambda: latest_count() == 5)
    await watcher.request("thread/unsubscribe", {"threadId": thread_id})
    await writer.request(
        "thread/record", {"threadId": thread_id, "sessionId": session_id, "items": [message("x")]}
    )
    await watcher.request("thread/list")  # answered after anything sent before it
    assert len(recorded()) == 5
    with pytest.raises(RpcError) as missing:
        await watcher.request("thread/subscribe", {"threadId": str(uuid.uuid4())})
    assert missing.value.kind == "ThreadNotFound"
    await writer.close()
    await watcher.close()


async def test_requests_past_the_in_flight_bound_are_refused_not_queued(
    ws_server: Callable[..., WsServerProcess], home: Path, tmp_path: Path
) -> None:
    server = ws_server(durability="fsync")
    client = await WsClient.open(server.record)
    started = await client.request("thread/start", {"cwd": str(tmp_path)})
    thread_id, session_id = started["thread"]["threadId"], started["sessionId"]
    burst = [message(f"burst {n}") for n in range(1000)]
    answers = [
        await client.start_request(
            "thread/record", {"threadId": thread_id, "sessionId": session_id, "items": [item]}
        )
        for item in burst
    ]
    replies = await asyncio.wait_for(asyncio.gather(*answers), HANG_GUARD)
    refused = [r["error"] for r in replies if "error" in r]
    stored = {item["id"] for item, reply in zip(burst, replies, strict=True) if "result" in reply}
    assert refused, "1000 pipelined fsync'd records should pass the bound of 64"
    assert all(e["code"] == -32001 and e["data"]["kind"] == "Overloaded" for e in refused)
    assert all(e["data"]["retryable"] is True and e["data"]["limit"] == 64 for e in refused)
    items = (await client.request("thread/read", {"threadId": thread_id, "limit": 2000}))["items"]
    assert {i["id"] for i in items if i["type"] == "message"} == stored
    await client.close()


def test_headless_client_lists_resumes_and_records(
    ws_server: Callable[..., WsServerProcess], home: Path, tmp_path: Path
) -> None:
    server = ws_server()

    def client(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "server.cli", "--home", str(home), "client", *args],
            cwd=tmp_path,
            env={**server_env(), "PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            timeout=HANG_GUARD,
        )

    async def start_thread() -> str:
        starter = await WsClient.open(server.record)
        started = await starter.request("thread/start", {"cwd": str(tmp_path)})
        thread_id = started["thread"]["threadId"]
        await starter.request(
            "thread/close", {"threadId": thread_id, "sessionId": started["sessionId"]}
        )
        await starter.close()
        return thread_id

    thread_id = asyncio.run(start_thread())
    listed = client("list")
    assert listed.returncode == 0, listed.stderr
    assert [t["threadId"] for t in json.loads(listed.stdout)["threads"]] == [thread_id]
    recorded = client("record", thread_id, "--message", "from neovim")
    assert recorded.returncode == 0, recorded.stderr
    assert json.loads(recorded.stdout)["duplicates"] == 0
    resumed = client("resume", thread_id)
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads(resumed.stdout)
    assert report["status"] == "ready"
    assert [m["content"] for m in report["messages"]["items"]] == ["from neovim"]
    os.kill(server.proc.pid, signal.SIGKILL)
    server.proc.wait(timeout=HANG_GUARD)
    gone = client("list")  # the dead server's file is stale: ignored and cleaned
    assert gone.returncode == 2 and "no running sessiond" in gone.stderr
    assert not list((home / "servers").glob("*.json"))


async def test_oversized_frame_gets_a_typed_error_and_the_connection_keeps_serving(
    ws_server: Callable[..., WsServerProcess], tmp_path: Path
) -> None:
    server = ws_server("--max-frame", "1000000")
    client = await WsClient.open(server.record)
    huge = {"jsonrpc": "2.0", "id": 99, "method": "thread/list", "params": {"x": "y" * 1_500_000}}
    await client.send(huge)
    deadline = asyncio.get_running_loop().time() + HANG_GUARD
    while not client.orphans and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.02)
    [refused] = client.orphans
    assert refused["error"]["data"]["kind"] == "PayloadTooLarge"
    assert refused["error"]["data"]["limit"] == 1_000_000
    assert (await client.request("thread/list"))["threads"] == []
    await client.close()
