"""sessiond as a user has it: installed from its wheel, with compiled bytecode.

An editable install (or the checkout on PYTHONPATH) compiles every module the first time a
process imports it and looks each one up through the checkout; a wheel installed by pip
has its bytecode already, which is what a window's spawn meets.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def install_wheel(target: Path) -> Path:
    """Build this checkout's wheel and install it (no dependencies: they are the
    environment's) into `target`, bytecode compiled; returns the directory for PYTHONPATH."""
    wheels, site, source = target / "wheel", target / "site", target / "source"
    files = ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"]
    listed = subprocess.run(files, cwd=REPO, check=True, capture_output=True).stdout.decode()
    for name in filter(None, listed.split("\0")):  # what git would commit: no build/ left here
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    quiet = {"check": True, "capture_output": True}
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(wheels),
                    str(source)], **quiet)  # type: ignore[call-overload]  # fmt: skip
    wheel = next(wheels.glob("sessiond-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--compile",
                    "--target", str(site), str(wheel)], **quiet)  # type: ignore[call-overload]  # fmt: skip
    return site
