"""What is in the data dir is data, never instructions: a thread file that is a symlink is
not followed, and text printed by `sessiond list` / `show` carries no terminal controls.

Threats: something with write access to the data dir (a sync tool, a careless script)
planting a link that would send appends, or a torn tail's repair, into an unrelated file;
a client recording titles or messages with escape sequences (OSC 52 writes the clipboard,
CSI 2J clears the screen) for the user's terminal to obey.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.helpers import Spawn, record, sessiond, start, thread_file
from tests.rpc_client import RpcError

HOSTILE = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\x9b31mred\u202egnp.exe"


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


def test_list_and_show_print_no_terminal_control_sequences(
    spawn: Spawn, home: Path, tmp_path: Path
) -> None:
    server = spawn()
    server.initialize()
    tid, sid = start(server, tmp_path, title=f"title {HOSTILE}")
    record(server, tid, sid, {"type": "message", "role": "user", "content": f"body {HOSTILE}"})
    server.shutdown()
    for args in (("list",), ("show", tid)):
        shown = sessiond(home, *args)
        assert shown.returncode == 0, shown.stderr
        assert not any(c in shown.stdout for c in "\x1b\x07\x9b\u202e"), repr(shown.stdout)
        assert "\\x1b]52;c;" in shown.stdout and "\\u202e" in shown.stdout  # visible instead
