"""The data directory is readable by its user alone: every directory 0700, every file
0600, however the server was started and whatever it wrote first.

Threat: another local user reading titles, cwds, first messages, file contents (blobs) or
the WebSocket token. Each test starts a real server on a data dir that does not exist
yet, under the ordinary umask 022, makes it write every kind of file, and checks modes.
"""

from __future__ import annotations

import asyncio
import os
import stat
import uuid
from pathlib import Path

from tests.faults.helpers import record, sessiond, start, thread_file
from tests.support.rpc_client import ServerProcess
from tests.support.ws_client import WsClient, WsServerProcess


def _too_open(home: Path) -> list[str]:
    """Every path under `home` (and `home` itself) that group or others may use."""
    found = []
    for path in [home, *home.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if mode & 0o077:
            found.append(f"{path.relative_to(home.parent)} {mode:o}")
    return found


def _write_everything(server: ServerProcess, home: Path, work: Path) -> None:
    tid, sid = start(server, work)
    record(server, tid, sid, {"type": "message", "role": "user", "content": "private"})
    server.request("fs/applyEdit", {"threadId": tid, "sessionId": sid, "operationId": "op",
                                    "path": "a.txt", "content": "blob\n"})  # fmt: skip
    server.request("thread/close", {"threadId": tid, "sessionId": sid})  # snapshot
    with open(thread_file(home, tid), "ab") as torn:
        torn.write(b'{"v":1,"seq":99,"ty')  # a crash's torn tail: copied to recovered/
    server.request("thread/resume", {"threadId": tid})  # locks/, recovered/
    server.request("thread/list", {})  # the index and its -wal/-shm
    archived, _ = start(server, work)
    server.request("thread/archive", {"threadId": archived})


def test_stdio_creates_a_private_data_dir(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()  # where the test's log goes
    home = tmp_path / "state" / "sessiond"  # does not exist yet
    old = os.umask(0o022)
    try:
        server = ServerProcess(home)
    finally:
        os.umask(old)
    try:
        server.initialize()
        _write_everything(server, home, tmp_path / "work")
        assert (home / "recovered").is_dir() and (home / "index.sqlite3-wal").exists()
        assert _too_open(home) == []
    finally:
        server.close()


def test_websocket_creates_a_private_data_dir_before_any_request(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    home = tmp_path / "state" / "sessiond"
    old = os.umask(0o022)
    try:
        server = WsServerProcess(home)  # the discovery file is written first
    finally:
        os.umask(old)
    try:
        assert (home / "servers").is_dir()
        assert _too_open(home) == []

        async def use() -> None:
            client = await WsClient.open(server.record)
            work = tmp_path / "work"
            work.mkdir()
            started = await client.request("thread/start", {"cwd": str(work)})
            tid, sid = started["thread"]["threadId"], started["sessionId"]
            item = {"type": "message", "id": str(uuid.uuid4()), "role": "user", "content": "x"}
            await client.request("thread/record", {"threadId": tid, "sessionId": sid,
                                                   "items": [item]})  # fmt: skip
            await client.request("thread/close", {"threadId": tid, "sessionId": sid})
            await client.request("thread/list", {})
            await client.close()

        asyncio.run(use())
        assert _too_open(home) == []
    finally:
        server.close()


def test_a_data_dir_an_older_version_left_open_is_made_private_at_first_use(
    tmp_path: Path,
) -> None:
    home = tmp_path / "sessiond"
    (home / "threads" / "ab").mkdir(parents=True, mode=0o755)
    (home / "index.sqlite3").write_bytes(b"")
    os.chmod(home, 0o755)  # what `mkdir` under umask 022 gave before modes were explicit
    listed = sessiond(home, "list")
    assert listed.returncode == 0, listed.stderr
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert f"made the data directory {home} private (it was 755" in listed.stderr


def test_a_home_that_is_not_sessionds_is_never_re_moded(tmp_path: Path) -> None:
    person = tmp_path / "ana"  # `--home ~` by mistake: a person's home directory
    (person / "Documents").mkdir(parents=True)
    (person / ".bashrc").write_text("export EDITOR=vi\n")
    os.chmod(person, 0o755)
    listed = sessiond(person, "list")
    assert listed.returncode == 0, listed.stderr
    assert stat.S_IMODE(person.stat().st_mode) == 0o755
    assert "made the data directory" not in listed.stderr
