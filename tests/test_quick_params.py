"""`thread/list` and `thread/resume` params taken without pydantic (protocol/quick_params.py)
mean exactly what the pydantic models say: the same values when taken, pydantic's answer
otherwise."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from protocol.methods import ThreadListParams, ThreadReadParams, ThreadResumeParams
from protocol.quick_params import (
    MAX_CURSOR,
    MAX_PAGE,
    MAX_READ,
    MAX_SEARCH,
    ListParams,
    ReadParams,
    ResumeParams,
    plainly_valid,
)
from tests.support.rpc_client import RpcError, ServerProcess

Spawn = Callable[..., ServerProcess]
FIELDS = ("cwd", "workspaceFolder", "archived", "search", "cursor", "limit")
RESUME_FIELDS = ("threadId", "cwd", "acceptDrift", "messageLimit", "availableModels")
READ_FIELDS = ("threadId", "afterSeq", "beforeSeq", "limit")

# Values around every bound and of every JSON type, so both sides of each check are tried.
texts = st.one_of(
    st.text(max_size=20),
    st.integers(MAX_SEARCH - 1, MAX_SEARCH + 1).map(lambda n: "s" * n),
    st.integers(MAX_CURSOR - 1, MAX_CURSOR + 1).map(lambda n: "c" * n),
)
values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 2),
    st.integers(-2, MAX_PAGE + 2),
    st.integers(MAX_READ - 1, MAX_READ + 1),
    st.integers(),
    st.floats(allow_nan=False),
    texts,
    st.sampled_from(["50", "true", "1.0", ""]),
    st.lists(st.integers(), max_size=2),
    st.lists(st.text(max_size=5), max_size=3),
    st.lists(st.one_of(st.text(max_size=5), st.integers(), st.none()), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
list_params = st.dictionaries(st.sampled_from([*FIELDS, "future"]), values, max_size=7)


def with_a_thread_id(fields: tuple[str, ...]) -> st.SearchStrategy[dict[str, Any]]:
    """Any params, and often a string threadId beside them (else nearly every draw is
    refused for the id alone and the other fields' checks are hardly tried)."""
    others = st.dictionaries(st.sampled_from([*fields, "future"]), values, max_size=len(fields))
    named = st.tuples(st.text(max_size=8), others).map(lambda p: {**p[1], "threadId": p[0]})
    return st.one_of(others, named)


resume_params = with_a_thread_id(RESUME_FIELDS)
read_params = with_a_thread_id(READ_FIELDS)


def pydantic_says(model: type[BaseModel], quick: type, fields: tuple[str, ...], raw: dict) -> Any:
    """What the pydantic model makes of `raw`, as the quick dataclass; None when it refuses."""
    try:
        validated = model.model_validate(raw)
    except ValidationError:
        return None
    return quick(**{name: getattr(validated, name) for name in fields})


def pydantic_answer(raw: dict[str, Any]) -> ListParams | None:
    return pydantic_says(ThreadListParams, ListParams, FIELDS, raw)


def pydantic_resume(raw: dict[str, Any]) -> ResumeParams | None:
    return pydantic_says(ThreadResumeParams, ResumeParams, RESUME_FIELDS, raw)


def pydantic_read(raw: dict[str, Any]) -> ReadParams | None:
    return pydantic_says(ThreadReadParams, ReadParams, READ_FIELDS, raw)


CASES = {
    "thread/list": (list_params, pydantic_answer),
    "thread/resume": (resume_params, pydantic_resume),
    "thread/read": (read_params, pydantic_read),
}


@pytest.mark.parametrize("method", CASES)
@settings(max_examples=2000, deadline=None)
@given(data=st.data())
def test_params_taken_without_pydantic_are_what_pydantic_would_make(
    method: str, data: st.DataObject
) -> None:
    strategy, pydantic_makes = CASES[method]
    raw = data.draw(strategy)
    quick = plainly_valid(method, raw)
    if quick is not None:
        assert quick == pydantic_makes(raw)


def test_what_a_client_sends_is_taken_without_pydantic() -> None:
    # The shapes the extension and the CLI send: none of them should need the slow path.
    for raw in (
        {},
        {"limit": 50},
        {"cwd": "/w", "limit": MAX_PAGE},
        {"workspaceFolder": "/w", "archived": True, "search": "fix", "cursor": "c" * 40},
    ):
        assert plainly_valid("thread/list", raw) == pydantic_answer(raw)
    for raw in (
        {"threadId": "t"},
        {"threadId": "t", "messageLimit": 200, "cwd": "/w", "acceptDrift": True},
        {"threadId": "t", "availableModels": ["gpt-5", "claude-opus"]},
    ):
        assert plainly_valid("thread/resume", raw) == pydantic_resume(raw)
    for raw in (
        {"threadId": "t"},
        {"threadId": "t", "beforeSeq": 1001, "limit": 200},
        {"threadId": "t", "afterSeq": 0, "limit": MAX_READ},
    ):
        assert plainly_valid("thread/read", raw) == pydantic_read(raw)


def test_a_window_that_lists_resumes_and_scrolls_never_loads_pydantic_errors_stay_the_same(
    spawn: Spawn, tmp_path: Path
) -> None:
    server = spawn(env={"SESSIOND_DEBUG": "1"})
    server.initialize()
    started = server.request("thread/start", {"cwd": str(tmp_path)})
    tid = started["thread"]["threadId"]
    server.request("thread/close", {"threadId": tid, "sessionId": started["sessionId"]})
    # thread/start needed pydantic (its params are judged by the model): the test can see
    # what it asserts about the window below.
    assert any(name == "pydantic" for name in server.request("sessiond/debug")["modules"])

    window = spawn(env={"SESSIOND_DEBUG": "1"})
    window.initialize([str(tmp_path)])
    listed = window.request("thread/list", {"workspaceFolder": str(tmp_path), "limit": 5})
    assert [t["threadId"] for t in listed["threads"]] == [tid]
    report = window.request("thread/resume", {"threadId": tid, "messageLimit": 20})
    assert report["status"] == "ready" and report["thread"]["threadId"] == tid
    page = window.request("thread/read", {"threadId": tid, "beforeSeq": 10**6, "limit": 5})
    assert page["items"] and page["items"][-1]["seq"] < 10**6
    modules = window.request("sessiond/debug")["modules"]
    assert not any(name.split(".")[0] == "pydantic" for name in modules)

    # Coercion and errors are still pydantic's.
    assert len(window.request("thread/list", {"limit": "1"})["threads"]) == 1
    bad_lists = ({"limit": 0}, {"limit": MAX_PAGE + 1}, {"archived": None}, {"search": "s" * 501})
    bad_resumes = ({}, {"threadId": None}, {"threadId": tid, "messageLimit": 0},
                   {"threadId": tid, "availableModels": [1]})  # fmt: skip
    bad_reads = ({"threadId": tid, "afterSeq": 1, "beforeSeq": 5}, {"threadId": tid, "limit": 0},
                 {"threadId": tid, "beforeSeq": 0})  # fmt: skip
    for method, bad in (
        [("thread/list", p) for p in bad_lists]
        + [("thread/resume", p) for p in bad_resumes]
        + [("thread/read", p) for p in bad_reads]
    ):
        with pytest.raises(RpcError) as refused:
            window.request(method, bad)
        assert refused.value.code == -32602 and refused.value.kind == "InvalidParams", bad
