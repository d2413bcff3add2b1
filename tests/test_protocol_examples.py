"""The examples the docs show are what a real server answers: docs/protocol.md's (from
protocol/examples.py) and docs/writing-a-client.md's minimal client."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from protocol.examples import ANY, RECORD_ONE_TURN
from tests.support.rpc_client import HANG_GUARD, REPO, ServerProcess


def _fill(value: Any, known: dict[str, str]) -> Any:
    """The example's `$name` placeholders replaced by the values the server gave."""
    if isinstance(value, str) and value.startswith("$"):
        return known[value[1:]]
    if isinstance(value, dict):
        return {key: _fill(item, known) for key, item in value.items()}
    if isinstance(value, list):
        return [_fill(item, known) for item in value]
    return value


def _matches(expected: Any, actual: Any) -> bool:
    if expected == ANY:
        return True
    if isinstance(expected, dict):
        return (
            isinstance(actual, dict)
            and expected.keys() == actual.keys()
            and all(_matches(value, actual[key]) for key, value in expected.items())
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(expected) == len(actual)
            and all(_matches(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return bool(expected == actual)


def _at(result: Any, path: str) -> str:
    for part in path.split("."):
        result = result[part]
    return str(result)


def test_record_one_agent_turn_is_what_the_server_answers(
    spawn: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    server = spawn(framing="lines")
    server.initialize()
    known = {"cwd": str(tmp_path)}
    for step in RECORD_ONE_TURN:
        result = server.request(step.method, _fill(step.params, known))
        assert _matches(_fill(step.result, known), result), (step.why, result)
        for name, path in (step.captures or {}).items():
            known[name] = _at(result, path)
    report = server.request("thread/resume", {"threadId": known["threadId"]})
    assert report["status"] == "ready" and report["pendingOperations"] == []
    assert [m["content"] for m in report["messages"]["items"]] == [
        "The login form rejects valid passwords.",
        "Fixed: the password hash was compared as text. Tests pass.",
    ]
    assert report["thread"]["costUsd"] == 0.0123


def test_the_minimal_client_in_writing_a_client_runs_as_documented(tmp_path: Path) -> None:
    """docs/writing-a-client.md's Python block, run as a reader would: `sessiond` on PATH
    (here a shim for this checkout), in an empty project directory."""
    doc = (REPO / "docs" / "writing-a-client.md").read_text()
    code = doc.split("```python\n", 1)[1].split("```", 1)[0]
    bin_dir, project = tmp_path / "bin", tmp_path / "project"
    bin_dir.mkdir()
    project.mkdir()
    shim = bin_dir / "sessiond"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m server.cli "$@"\n')
    shim.chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(REPO),
        "SESSIOND_HOME": str(tmp_path / "home"),
    }
    run = subprocess.run([sys.executable, "-c", code], cwd=project, env=env,
                         capture_output=True, text=True, timeout=HANG_GUARD)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout == (
        "{'firstSeq': 2, 'lastSeq': 2, 'duplicates': 0}\n"
        "{'firstSeq': 2, 'lastSeq': 2, 'duplicates': 1}\n"
    )
