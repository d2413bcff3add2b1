"""What the Python tests take from the package index, fetched once before the run: the run
itself reaches nothing but 127.0.0.1 (tests/support/only_loopback.py).

    python -m tests.support.fetched    # fetches what is missing (./scripts/test does, first)

- `build_backend()`: wheels of what pyproject.toml's `[build-system] requires` names, for
  test_packaging.py's build of the wheel, isolated as pip builds it for a user, with
  `--no-index` and these as its only source;
- `acp_sdk_example(name)`: a file of `examples/` in the ACP Python SDK's sdist, at the
  installed version (its wheel has no examples), for test_acp.py's SDK echo agent.

They go to `~/.cache/sessiond-fetched/` (`SESSIOND_FETCHED_CACHE`), like the agent CLIs to
`~/.cache/sessiond-agents` (tests/agents/install.py); a test that finds one missing fetches
it then, which fails in the run's own network with the command to run first.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import tarfile
import tomllib
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("SESSIOND_FETCHED_CACHE", Path.home() / ".cache" / "sessiond-fetched"))
SDK = "agent-client-protocol"
HINT = "the test run is offline: fetch it first with `python -m tests.support.fetched`"


def build_backend() -> Path:
    """A folder of wheels holding pyproject.toml's build requirements (and theirs)."""
    requires = tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]["requires"]
    target = CACHE / ("build-" + hashlib.sha256("\n".join(requires).encode()).hexdigest()[:16])
    return _once(target, lambda: _pip("download", "--only-binary", ":all:", "--dest",
                                      str(target), *requires))  # fmt: skip


def acp_sdk_example(name: str = "echo_agent.py") -> Path:
    """`examples/NAME` of the installed ACP SDK's sdist."""
    pinned = version(SDK)
    target = CACHE / f"{SDK}-{pinned}"

    def fetch() -> None:
        _pip("download", "--no-deps", "--no-binary", ":all:", f"{SDK}=={pinned}",
             "--dest", str(target))  # fmt: skip
        (archive,) = target.glob("*.tar.gz")
        with tarfile.open(archive) as sdist:
            for member in sdist.getmembers():
                if "/examples/" in member.name and member.name.endswith(".py"):
                    member.name = Path(member.name).name
                    sdist.extract(member, target / "examples", filter="data")

    return _once(target, fetch) / "examples" / name


def _once(target: Path, fetch: Callable[[], None]) -> Path:
    """`target`, fetched by `fetch()` unless a finished copy is there (two test processes:
    one fetches)."""
    if (target / ".complete").exists():
        return target
    target.mkdir(parents=True, exist_ok=True)
    with open(target / ".lock", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        if not (target / ".complete").exists():
            fetch()
            (target / ".complete").write_text("ok\n")
    return target


def _pip(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", *args, "-q"], capture_output=True,
                          text=True, timeout=900,
                          env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"pip {args[0]} failed ({HINT}):\n{done.stderr[-3000:]}")


if __name__ == "__main__":
    print(build_backend())
    print(acp_sdk_example())
