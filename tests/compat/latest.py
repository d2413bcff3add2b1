"""The compatibility suite against each agent's @latest from npm, the day it ships:

    python -m tests.compat.latest [test paths] [pytest args]

installs @latest of every pinned package once (into ~/.cache/sessiond-agents/latest: one
`npm install` for all of them), prints the versions it tests and which differ from the
pins, runs tests/compat against them — or only the test paths given (`tests/compat/
test_pi.py`, a `::test` of one) — and prints the table of what held. Nothing in the
repository changes; a failure is a format change to map (or a test to fix) before the
pins in tests/agents/package.json move.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.agents import install


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    bins = install.bin_dir(latest=True)
    pinned = install.pinned()
    changed = []
    for name, version in install.installed_versions(bins).items():
        moved = pinned.get(name) != version
        changed += [name] if moved else []
        print(f"{name} {version}" + (f" (pinned: {pinned.get(name)})" if moved else ""))
    print(f"{len(changed)} of {len(pinned)} moved since the pins" if changed else
          "every package is at its pin")  # fmt: skip
    sys.stdout.flush()
    env = {**os.environ, "SESSIOND_AGENTS": "latest"}
    # A test path given selects the tests; without one, the whole suite.
    paths = [arg for arg in args if not arg.startswith("-") and arg.split("::")[0].endswith(
        (".py", "/compat", "/compat/"))]  # fmt: skip
    command = [sys.executable, "-m", "pytest", *([] if paths else ["tests/compat"]),
               "-p", "no:cacheprovider"]  # fmt: skip
    return subprocess.call([*command, *args], env=env)


if __name__ == "__main__":
    raise SystemExit(main())
