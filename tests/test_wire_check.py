"""The test clients hold every answer and notification to the protocol's models
(tests/support/wire_check.py): shown here failing on deliberately wrong answers, taken
from a real server and then spoiled, and passing on the real ones."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from tests.support.rpc_client import ServerProcess
from tests.support.wire_check import notification_problems, reply_problems


def test_a_wrong_field_an_unnamed_field_and_an_undeclared_notification_fail(
    server: ServerProcess, tmp_path: Path
) -> None:
    started = server.request("thread/start", {"cwd": str(tmp_path), "title": "checked"})
    listing = server.request("thread/list", {})
    assert reply_problems("thread/start", {"result": started}) == []
    assert reply_problems("thread/list", {"result": listing}) == []
    (notice,) = server.wait_notification("thread/started")
    assert notification_problems(notice) == []

    wrong = copy.deepcopy(listing)
    wrong["threads"][0]["itemCount"] = "many"  # a field of the wrong type
    assert reply_problems("thread/list", {"result": wrong}) == [
        "thread/list: ('threads', 0, 'itemCount'): Input should be a valid integer, "
        "unable to parse string as an integer"
    ]
    unnamed = copy.deepcopy(started)
    unnamed["thread"]["titel"] = "checked"  # a field no model names
    assert reply_problems("thread/start", {"result": unnamed}) == [
        "thread/start: a field the protocol does not name: thread/start.thread.titel"
    ]
    assert notification_problems({**notice, "method": "thread/begun"}) == [
        "a notification the protocol does not declare: 'thread/begun'"
    ]
    untyped = {"error": {"code": -32603, "message": "boom", "data": {}}}
    assert reply_problems("thread/list", untyped) != []  # an error without its data.kind


def test_the_client_fails_the_test_that_received_a_refused_answer(server: ServerProcess) -> None:
    server.wire_problems.append("thread/list: a field the protocol does not name: x")
    with pytest.raises(AssertionError, match="a field the protocol does not name: x"):
        server.request("thread/list", {})
    assert server.request("thread/list", {})["threads"] == []  # reported once
