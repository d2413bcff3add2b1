"""The examples docs/protocol.md shows are what a real server answers (protocol/examples.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from protocol.examples import ANY, RECORD_ONE_TURN
from tests.rpc_client import ServerProcess


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
