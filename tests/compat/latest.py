"""The compatibility suite against each agent's @latest from npm, the day it ships:

    python -m tests.compat.latest [pytest args]

installs @latest of every pinned package (into ~/.cache/sessiond-agents/latest), prints
the versions it tests, runs tests/compat against them and prints the table of what held.
Nothing in the repository changes; a failure is a format change to map (or a test to fix)
before the pins in tests/agents/package.json move.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.agents import install


def main() -> int:
    bins = install.bin_dir(latest=True)
    pinned = install.pinned()
    for name, version in install.installed_versions(bins).items():
        mark = "" if pinned.get(name) == version else f" (pinned: {pinned.get(name)})"
        print(f"{name} {version}{mark}")
    sys.stdout.flush()
    env = {**os.environ, "SESSIOND_AGENTS": "latest"}
    command = [sys.executable, "-m", "pytest", "tests/compat", "-p", "no:cacheprovider"]
    return subprocess.call([*command, *sys.argv[1:]], env=env)


if __name__ == "__main__":
    raise SystemExit(main())
