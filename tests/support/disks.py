"""A real small filesystem to fill up: a 512 KiB tmpfs (mounting needs root)."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 512 KiB tmpfs mounted on a fresh dir. Not root: the test is skipped, saying so
    (the injected-ENOSPC tests beside it run everywhere); root: a mount that fails fails
    the test, with mount's own words."""
    if os.geteuid() != 0:
        pytest.skip(f"mounting a tmpfs needs root (running as uid {os.geteuid()})")
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k,mode=0700", "tmpfs", str(mount_point)],
        capture_output=True,
        check=True,
    )
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=True)


def fill(disk: Path) -> Path:
    """Take every free block of `disk` with one file; returns it."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for chunk in (65536, 4096, 1):
            while True:
                try:
                    os.write(fd, b"\0" * chunk)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
                    break
    finally:
        os.close(fd)
    return filler
