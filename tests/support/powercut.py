"""A directory on a disk that can lose power (tests/support/powercut_fs.py), for tests.

`PowerCutDisk` mounts the filesystem, cuts the power (only what was synced is kept, plus
some write-back), remounts it showing the durable state, and always unmounts. `reboot()`
gives the processes started after a cut a new kernel boot id, as a real power cut does
(sessiond's index checks every file after a reboot: docs/storage.md).

`unavailable()` says why FUSE cannot be used here (no /dev/fuse, no permission, the
library missing, a mount that fails); the tests skip with that reason, except in CI, which
installs all of it (.ci/run) and so fails instead of skipping in silence.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.rpc_client import REPO
from tests.support.wait import HANG_GUARD

_BIND_BOOT_ID = 'mount --bind "$1" /proc/sys/kernel/random/boot_id && shift && exec "$@"'


def unavailable() -> str | None:
    """Why no power-cut filesystem can be mounted here (None: it can be tried)."""
    if not sys.platform.startswith("linux"):
        return f"FUSE power cuts are tested on Linux only (this is {sys.platform})"
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist (no FUSE in this kernel or container)"
    try:
        os.close(os.open("/dev/fuse", os.O_RDWR))
    except OSError as exc:
        return f"cannot open /dev/fuse: {exc.strerror} (uid {os.geteuid()})"
    try:
        import pyfuse3  # noqa: F401
        import trio  # noqa: F401
    except ImportError as exc:
        return (
            f"pyfuse3 cannot be imported ({exc}): pip install -e '.[powercut]' with Debian's "
            "fuse3, libfuse3-dev and pkg-config installed (.ci/run does)"
        )
    if os.geteuid() != 0 and not shutil.which("fusermount3"):
        return "fusermount3 is missing (Debian's fuse3) and this user cannot mount(2)"
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return (
            "a restarted server needs a new boot id, as after a real power cut: that takes "
            f"`unshare -m` and a bind mount, as root (uid {os.geteuid()}, "
            f"unshare {'found' if shutil.which('unshare') else 'missing'})"
        )
    return None


def skip_or_fail(reason: str) -> None:
    """Skip, saying why; in CI (which installs FUSE and sets SESSIOND_REQUIRE_FUSE) fail
    instead, so it never skips unseen."""
    if os.environ.get("SESSIOND_REQUIRE_FUSE"):
        pytest.fail(f"the power-cut filesystem must run in CI, but: {reason}")
    pytest.skip(reason)


class PowerCutDisk:
    """The power-cut filesystem mounted at `root/mnt`, its durable state in `root/disk`."""

    def __init__(self, root: Path, seed: int = 0, *, writeback: bool = False) -> None:
        self.root = root
        self.disk = root / "disk"
        self.mount = root / "mnt"
        self.mount.mkdir(parents=True, exist_ok=True)
        self.seed = seed
        self.writeback = writeback
        self.mounts = 0
        self.cuts: list[str] = []
        """What each cut answered (syncs and writes seen, changes written back)."""
        self._daemon: subprocess.Popen[bytes] | None = None
        self._stderr_path = root / "powercut_fs.log"
        self._pending = b""

    # --- mount and unmount -------------------------------------------------------------

    def start(self) -> None:
        """Mount: what DISK holds (everything, the first time) is what the mount shows."""
        assert self._daemon is None
        self.mounts += 1
        with open(self._stderr_path, "ab") as stderr:
            self._daemon = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.support.powercut_fs",
                    str(self.disk),
                    str(self.mount),
                    "--seed",
                    str(self.seed * 1000 + self.mounts),
                    "--writeback",
                    "random" if self.writeback else "none",
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                cwd=REPO,
                env={**os.environ, "PYTHONPATH": str(REPO)},
            )
        self._pending = b""
        answer = self._answer()
        if answer != "ready":
            self._reap()
            raise RuntimeError(f"the power-cut filesystem did not mount: {self.log()}")

    def cut(self) -> str:
        """The power fails now: the mount answers EIO from here on; DISK keeps what was
        durable. Kill the processes that used the mount, then `remount()`."""
        assert self._daemon is not None and self._daemon.stdin is not None
        self._daemon.stdin.write(b"cut\n")
        self._daemon.stdin.flush()
        answer = self._answer()
        assert answer.startswith("cut "), (answer, self.log())
        self.cuts.append(answer)
        return answer

    def remount(self) -> None:
        self.stop()
        self.start()

    def stop(self) -> None:
        """Unmount (a clean shutdown if the power was not cut) and end the daemon; never
        leaves the mount point mounted."""
        daemon, self._daemon = self._daemon, None
        try:
            if daemon is not None:
                with contextlib.suppress(OSError):
                    assert daemon.stdin is not None
                    daemon.stdin.write(b"stop\n")
                    daemon.stdin.close()
                try:
                    daemon.wait(timeout=HANG_GUARD)
                except subprocess.TimeoutExpired:
                    daemon.kill()
                    daemon.wait(timeout=HANG_GUARD)
                if daemon.stdout is not None:
                    daemon.stdout.close()
        finally:
            if os.path.ismount(self.mount):  # a daemon that died: its mount is left behind
                subprocess.run(["umount", "-l", str(self.mount)], check=False)
            assert not os.path.ismount(self.mount), f"{self.mount} is still mounted"

    def _reap(self) -> None:
        daemon, self._daemon = self._daemon, None
        if daemon is not None:
            if daemon.poll() is None:
                daemon.kill()
            daemon.wait(timeout=HANG_GUARD)
            for stream in (daemon.stdin, daemon.stdout):
                if stream is not None:
                    stream.close()

    def _answer(self) -> str:
        """The daemon's next line on stdout ("" if it exited first)."""
        assert self._daemon is not None and self._daemon.stdout is not None
        fd = self._daemon.stdout.fileno()
        deadline = time.monotonic() + HANG_GUARD
        while b"\n" not in self._pending:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError(f"the power-cut filesystem did not answer: {self.log()}")
            chunk = os.read(fd, 4096)
            if not chunk:
                return ""
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return line.decode()

    def log(self) -> str:
        return (
            self._stderr_path.read_text(errors="replace")[-4000:]
            if self._stderr_path.exists()
            else ""
        )

    # --- the machine's boot ------------------------------------------------------------

    def reboot(self) -> list[str]:
        """A new boot id, and the command prefix under which a process sees it (a file of
        its own: a process of the last boot keeps seeing the last one)."""
        boot_file = self.root / f"boot_id.{self.mounts}.{uuid.uuid4().hex[:8]}"
        boot_file.write_text(f"{uuid.uuid4()}\n")
        return ["unshare", "-m", "--", "sh", "-c", _BIND_BOOT_ID, "sh", str(boot_file)]


@contextlib.contextmanager
def power_cut_disk(root: Path, seed: int = 0, *, writeback: bool = False) -> Iterator[PowerCutDisk]:
    """A mounted `PowerCutDisk` (skipped, or failed in CI, where FUSE cannot be used),
    unmounted whatever happens."""
    reason = unavailable()
    if reason is not None:
        skip_or_fail(reason)
    disk = PowerCutDisk(root, seed, writeback=writeback)
    try:
        disk.start()
    except RuntimeError as exc:
        skip_or_fail(str(exc))
    try:
        yield disk
    finally:
        disk.stop()
