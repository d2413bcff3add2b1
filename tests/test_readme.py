"""The README's "Try it" block, as written, run ten times in one data dir: every command
exits 0 every time, and what it shows is worth reading — a thread with a recorded turn,
its answers in order (issue 35: they came out of order, and the demo thread had nothing
to show). `.ci/installed-wheel` runs the same
block once against the installed wheel."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

from tests.support.rpc_client import REPO

RUNS = 10


def try_it_block() -> str:
    """The lines inside the first ```sh block after `## Try it` (as .ci/installed-wheel
    takes them)."""
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Try it") :]
    block = re.search(r"^```sh\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
    assert block is not None
    return block.group(1)


def test_the_try_it_block_runs_ten_times_in_one_home_and_shows_a_recorded_turn(
    tmp_path: Path,
) -> None:
    bin_dir, work, home = tmp_path / "bin", tmp_path / "work", tmp_path / "home"
    bin_dir.mkdir()
    work.mkdir()
    shim = bin_dir / "sessiond"  # `sessiond` as pip installs it, from this checkout
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m server.cli "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    script = tmp_path / "try-it.sh"
    script.write_text(try_it_block())
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(REPO), "SESSIOND_HOME": str(home)}  # fmt: skip
    for run in range(1, RUNS + 1):
        done = subprocess.run(
            ["bash", "-euo", "pipefail", str(script)],
            cwd=work,
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        assert done.returncode == 0, f"run {run}: {done.stdout}\n{done.stderr}"
        assert '"error"' not in done.stdout, f"run {run}: {done.stdout}"
    lines = done.stdout.splitlines()
    answers = [json.loads(line) for line in lines[:3]]
    assert [a.get("id") or a.get("method") for a in answers] == [1, "thread/started", 2]
    started = answers[2]["result"]["thread"]
    notice = answers[1]["params"]["thread"]
    assert started == {**notice, "childCount": None}  # the answer says what the notice says,
    assert notice["childCount"] == 0  # but for the count of sub-agents only a notice carries
    assert (started["title"], started["itemCount"]) == ("demo", 2)
    text = "\n".join(lines[3:])
    assert re.search(rf"^{started['threadId']}\s+just now\s+2\s+-\s+demo$", text, re.M)  # list
    assert (
        f"thread {started['threadId']}: demo\n"
        f"── session {answers[2]['result']['sessionId'][:8]} · startup (user) · in {work} ──\n"
        "user:\n    Where did we leave the payment bug?\n"
        "assistant:\n    The retry fix is in; the refund test still fails.\n"
    ) in text  # show
    assert f"ready: the workspace is as recorded, {work}" in text  # resume
    hits = [line for line in lines if line.endswith(" resume " + line[:8])]
    assert len(hits) == RUNS  # search: every run's thread, each with a command that works
    assert f"checked {RUNS} thread files, {4 * RUNS} records" in text  # doctor: every line
    assert text.count("\nclean\n") == 2 and "problems found" not in text  # and --repair
