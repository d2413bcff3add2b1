"""Run a command where a directory really cannot be written, or really cannot be read.

`chmod` alone proves nothing when the tests run as root (root ignores permission bits),
so each helper returns a command prefix found to work on this machine, after proving it
with a probe (a write, or a listing, that must fail):

- read-only: a read-only bind mount in a private mount namespace (`unshare -m`, as root;
  `unshare -rm`, a user namespace, otherwise); failing both, `chmod a-w` as a non-root
  user, or as root with the capabilities that bypass permission bits dropped (`setpriv`).
- unreadable: `chmod 000`, as a non-root user or as root without those capabilities.

None of them skips: if no way works here, the test fails and says so.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

# Root's permission-bit bypass: without these, root obeys chmod like anyone else.
DAC_CAPS = "-dac_override,-dac_read_search"
_BIND_RO = 'mount --bind -o ro "$1" "$1" && shift && exec "$@"'


def _without_dac_caps() -> list[str]:
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    assert setpriv, "running as root without setpriv: cannot make chmod binding here"
    return [setpriv, f"--bounding-set={DAC_CAPS}", f"--inh-caps={DAC_CAPS}"]


def bound_by_permissions() -> list[str]:
    """A prefix under which chmod binds the server as it binds any user, root included
    (for a test that changes modes while the server runs)."""
    return _without_dac_caps()


def _probe_fails(prefix: list[str], code: str, path: Path) -> bool:
    """True when `code` (given `path` as argv[1]) raises OSError under `prefix`."""
    run = subprocess.run(
        [*prefix, sys.executable, "-c", f"import sys, os, pathlib\n{code}", str(path)],
        capture_output=True,
        text=True,
    )
    return run.returncode != 0 and "Error" in run.stderr


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[list[str]]:
    """A prefix under which `path` is read-only; yields it, restores the mode after."""
    write = "pathlib.Path(sys.argv[1], 'probe').write_text('x')"
    candidates: list[tuple[list[str], bool]] = []
    if shutil.which("unshare"):
        for flags in (["-m"], ["-rm"]):
            candidates.append(
                (["unshare", *flags, "--", "sh", "-c", _BIND_RO, "sh", str(path)], False)
            )
    candidates.append((_without_dac_caps(), True))
    mode = path.stat().st_mode
    tried = []
    try:
        for prefix, by_chmod in candidates:
            if by_chmod:
                for directory in [path, *(p for p in path.rglob("*") if p.is_dir())]:
                    directory.chmod(directory.stat().st_mode & ~0o222)
            if _probe_fails(prefix, write, path) and not (path / "probe").exists():
                yield prefix
                return
            tried.append(" ".join(prefix[:3]) or "chmod a-w")
        raise AssertionError(f"no way to make {path} read-only here (tried: {tried})")
    finally:
        for directory in [path, *(p for p in path.rglob("*") if p.is_dir())]:
            directory.chmod(directory.stat().st_mode | 0o200)
        path.chmod(mode)


@contextlib.contextmanager
def unreadable(path: Path) -> Iterator[list[str]]:
    """A prefix under which listing `path` fails with EACCES; restores the mode after."""
    mode = path.stat().st_mode
    path.chmod(0)
    try:
        prefix = _without_dac_caps()
        assert _probe_fails(prefix, "os.listdir(sys.argv[1])", path), (
            f"{path} stays readable even at mode 000"
        )
        yield prefix
    finally:
        path.chmod(mode)
