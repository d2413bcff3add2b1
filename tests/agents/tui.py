"""An agent's terminal UI as a person runs it: in a pseudo-terminal of a real size, typed
into, its screen read back as text.

Terminal UIs ask the terminal about itself before they draw (the cursor's position, the
device's attributes, the colors, the keyboard protocol) and wait for the answers; this
terminal gives the answers an xterm would (`ANSWERS`), so the UI starts as in a window.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import signal
import struct
import termios
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.wait import HANG_GUARD

ANSWERS = {
    b"\x1b[6n": b"\x1b[1;1R",  # cursor position
    b"\x1b[c": b"\x1b[?62;c",  # device attributes: a VT220
    b"\x1b[?u": b"\x1b[?0u",  # kitty keyboard flags: none
    b"\x1b]10;?": b"\x1b]10;rgb:ffff/ffff/ffff\x1b\\",  # foreground
    b"\x1b]11;?": b"\x1b]11;rgb:0000/0000/0000\x1b\\",  # background
}
KEY_INTERVAL = 0.03
"""Seconds between keys: slower than a paste (Codex: keys 8 ms apart or less are one)."""
_MOVE = re.compile(rb"\x1b\[[0-9;]*[HG]")  # a cursor move: words apart on screen
_ESCAPE = re.compile(rb"\x1b(?:\[[0-9;?>=$<!]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")


class Terminal:
    """`argv` in a pseudo-terminal of `rows` x `cols`, in `cwd`, with exactly `env`."""

    def __init__(
        self, argv: list[str], cwd: Path, env: dict[str, str], rows: int = 40, cols: int = 120
    ) -> None:
        self.pid, self._fd = pty.fork()
        if self.pid == 0:  # the child: the UI
            try:
                os.chdir(cwd)
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
        fcntl.ioctl(self._fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self._output = bytearray()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self._fd, 65536)
            except OSError:  # the UI exited
                return
            if not data:
                return
            with self._lock:
                self._output += data
            for question, answer in ANSWERS.items():
                if question in data:
                    with contextlib.suppress(OSError):
                        os.write(self._fd, answer)

    def text(self) -> str:
        """Everything drawn so far, as text: escapes dropped, cursor moves as spaces."""
        with self._lock:
            raw = bytes(self._output)
        return _ESCAPE.sub(b"", _MOVE.sub(b" ", raw)).decode("utf-8", "replace")

    def type(self, keys: str) -> None:
        """Keys as a person types them, one at a time: a UI that takes a burst of keys for
        a paste (Codex's) would take a burst's Enter for a newline, not a submit."""
        for key in keys:
            os.write(self._fd, key.encode())
            time.sleep(KEY_INTERVAL)

    def wait_for(self, condition: Callable[[], object], what: str) -> None:
        """Until `condition()` holds (a hang guard, not a time limit)."""
        deadline = time.monotonic() + HANG_GUARD
        while not condition():
            assert time.monotonic() < deadline, f"never happened: {what}\n{self.text()[-3000:]}"
            time.sleep(0.05)

    def close(self) -> None:
        """The UI killed with everything it started in its session's process group (it is
        the leader: `pty.fork` made it one)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        with contextlib.suppress(OSError):
            os.close(self._fd)
        self._reader.join(timeout=HANG_GUARD)
