"""sessiond as a user has it: its wheel installed in a fresh virtual environment, bytecode
compiled at install (as pip does), run by the `sessiond` command pip writes.

Not this checkout: a checkout on PYTHONPATH (or an editable install) has no bytecode on a
machine with PYTHONDONTWRITEBYTECODE=1, so every spawn compiles every module it imports
(4-10x the imports' cost: docs/benchmarks.md, "Opening a window from spawn"). Not the
environment the bench runs in either: its editable install's import hook and the modules
that hook loads at interpreter start would be counted into every spawn, or spared from it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _source(target: Path, checkout: Path = REPO) -> Path:
    """What git would commit of a checkout, copied (no build/ or stray files)."""
    source = target / "source"
    files = ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"]
    listed = subprocess.run(files, cwd=checkout, check=True, capture_output=True).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if (checkout / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(checkout / name, source / name)
    return source


def _wheel(target: Path, checkout: Path = REPO) -> Path:
    wheels = target / "wheel"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(wheels),
                    str(_source(target, checkout))], check=True, capture_output=True)  # fmt: skip
    return next(wheels.glob("sessiond-*.whl"))


def install_wheel(target: Path) -> Path:
    """Build this checkout's wheel and install it (no dependencies: they are the
    environment's) into `target`, bytecode compiled; returns the directory for PYTHONPATH.
    (The benches that run `sys.executable -m server.cli` with it; `install_venv` is what a
    person runs.)"""
    site = target / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--compile",
                    "--target", str(site), str(_wheel(target))],
                   check=True, capture_output=True)  # fmt: skip
    return site


def install_venv(target: Path, checkout: Path = REPO) -> Path:
    """A checkout's wheel (this one's) in a new virtual environment under `target`, bytecode
    compiled at install; returns its `sessiond` command. The dependencies are this environment's
    (a .pth names its site-packages: no download), found after the wheel's own files; the
    .pth files there (this environment's editable install of sessiond) are not run."""
    venv = target / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True, env=_clean_env(),
    ).stdout.strip()  # fmt: skip
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(site, "dependencies.pth").write_text("".join(f"{path}\n" for path in sorted(ours)))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                    "--no-deps", "--compile", str(_wheel(target, checkout))],
                   check=True, capture_output=True)  # fmt: skip
    return venv / "bin" / "sessiond"


def _clean_env() -> dict[str, str]:
    """The environment without PYTHONPATH: an installed sessiond imports its own files."""
    return {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}


def installed_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment to run an installed `sessiond` in (no PYTHONPATH), plus `extra`."""
    return {**_clean_env(), **(extra or {})}
