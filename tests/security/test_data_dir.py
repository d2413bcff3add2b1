"""What is in the data dir is data, never a way elsewhere: a thread file that is a symlink
is not followed. (Terminal controls in recorded text: tests/test_cli.py.)

Threat: something with write access to the data dir (a sync tool, a careless script)
planting a link that would send appends, or a torn tail's repair, into an unrelated file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.helpers import Spawn, sessiond, start, thread_file
from tests.rpc_client import RpcError


def test_a_thread_file_that_is_a_symlink_is_never_followed(
    spawn: Spawn, home: Path, tmp_path: Path
) -> None:
    server = spawn()
    server.initialize()
    tid, sid = start(server, tmp_path)
    server.request("thread/close", {"threadId": tid, "sessionId": sid})
    unrelated = tmp_path / "notes.txt"
    unrelated.write_bytes(b"first line\nlast line without a newline")
    path = thread_file(home, tid)
    path.unlink()
    path.symlink_to(unrelated)
    for method in ("thread/read", "thread/resume", "thread/archive"):
        with pytest.raises(RpcError) as refused:
            server.request(method, {"threadId": tid})
        assert refused.value.kind == "StorageError", method
        assert "symlink" in refused.value.message
    assert unrelated.read_bytes() == b"first line\nlast line without a newline"
    repaired = sessiond(home, "doctor", "--repair")
    assert "symlink" in repaired.stdout
    assert unrelated.read_bytes() == b"first line\nlast line without a newline"
