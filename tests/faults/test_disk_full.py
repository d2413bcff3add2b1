"""Disk full during an append (ENOSPC): a typed error, the file intact, and the next
append works once space returns.

First on a real small filesystem (a 512 KiB tmpfs holding the data dir, filled up by
another file) against a real server. Mounting needs root: without it that test is skipped,
saying so. The injected failure runs everywhere: it writes half the batch before failing,
which a real full disk rarely does on cue, and proves the half line is cut off.
"""

from __future__ import annotations

import errno
import os
import uuid
from pathlib import Path

import pytest

from protocol.errors import ErrorKind, ProtocolError
from tests.faults.helpers import start, thread_file
from tests.support.disks import fill
from tests.support.items import make_store, message, named, session_meta
from tests.support.rpc_client import RpcError, ServerProcess


def test_failed_write_leaves_no_partial_line_and_the_next_append_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _half_write_then_enospc(tmp_path, monkeypatch)


def _half_write_then_enospc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tid = str(uuid.uuid4())
    writer = make_store(tmp_path).create(tid, "s1", session_meta(tid))
    before = writer.path.read_bytes()
    real_write = os.write

    def half_then_full(fd: int, data: bytes) -> int:
        real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(ProtocolError) as full:
        writer.append([named("lost")], "s1")
    assert full.value.kind is ErrorKind.STORAGE_FULL
    monkeypatch.setattr(os, "write", real_write)
    assert writer.path.read_bytes() == before
    result = writer.append([named("lost")], "s1")
    assert result.first_seq == 2  # the failed item was never acknowledged nor numbered


def test_disk_full_on_a_real_filesystem_is_storage_full_and_the_next_append_works(
    small_disk: Path, tmp_path: Path
) -> None:
    server = ServerProcess(small_disk)
    try:
        server.initialize()
        tid, sid = start(server, tmp_path)
        server.request("thread/record", {"threadId": tid, "sessionId": sid,
                                         "items": [message("before")]})  # fmt: skip
        path = thread_file(small_disk, tid)
        intact = path.read_bytes()
        filler = fill(small_disk)
        big = message("x" * 100_000)  # needs new blocks; a few bytes could fit in the last one
        with pytest.raises(RpcError) as full:
            server.request("thread/record", {"threadId": tid, "sessionId": sid, "items": [big]})
        assert full.value.kind == "StorageFull"
        assert path.read_bytes() == intact
        filler.unlink()
        done = server.request("thread/record", {"threadId": tid, "sessionId": sid,
                                                "items": [big]})  # fmt: skip
        assert done["duplicates"] == 0 and done["firstSeq"] == done["lastSeq"] == 3
        items = server.request("thread/read", {"threadId": tid})["items"]
        assert [i["id"] for i in items if i["type"] == "message"] == [
            items[1]["id"], big["id"]]  # fmt: skip
        assert server.shutdown() == 0
    finally:
        server.close()
