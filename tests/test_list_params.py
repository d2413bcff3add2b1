"""`thread/list` params taken without pydantic (protocol/list_params.py) mean exactly what
the pydantic model says: the same values when taken, pydantic's answer otherwise."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from protocol.list_params import MAX_CURSOR, MAX_PAGE, MAX_SEARCH, ListParams, plainly_valid
from protocol.methods import ThreadListParams
from tests.rpc_client import RpcError, ServerProcess

Spawn = Callable[..., ServerProcess]
FIELDS = ("cwd", "workspaceFolder", "archived", "search", "cursor", "limit")

# Values around every bound and of every JSON type, so both sides of each check are tried.
texts = st.one_of(
    st.text(max_size=20),
    st.integers(MAX_SEARCH - 1, MAX_SEARCH + 1).map(lambda n: "s" * n),
    st.integers(MAX_CURSOR - 1, MAX_CURSOR + 1).map(lambda n: "c" * n),
)
values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, MAX_PAGE + 2),
    st.integers(),
    st.floats(allow_nan=False),
    texts,
    st.sampled_from(["50", "true", "1.0", ""]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
params = st.dictionaries(st.sampled_from([*FIELDS, "future"]), values, max_size=7)


def pydantic_answer(raw: dict[str, Any]) -> ListParams | None:
    try:
        model = ThreadListParams.model_validate(raw)
    except ValidationError:
        return None
    return ListParams(**{name: getattr(model, name) for name in FIELDS})


@settings(max_examples=2000, deadline=None)
@given(params)
def test_params_taken_without_pydantic_are_what_pydantic_would_make(raw: dict) -> None:
    quick = plainly_valid(raw)
    if quick is not None:
        assert quick == pydantic_answer(raw)


def test_what_a_client_sends_is_taken_without_pydantic() -> None:
    # The shapes the extension and the CLI send: none of them should need the slow path.
    for raw in (
        {},
        {"limit": 50},
        {"cwd": "/w", "limit": MAX_PAGE},
        {"workspaceFolder": "/w", "archived": True, "search": "fix", "cursor": "c" * 40},
    ):
        assert plainly_valid(raw) == pydantic_answer(raw)


def test_a_server_answers_list_params_the_way_its_schema_says(spawn: Spawn, tmp_path: Path) -> None:
    server = spawn(env={"SESSIOND_DEBUG": "1"})
    server.initialize()
    tid = server.request("thread/start", {"cwd": str(tmp_path)})["thread"]["threadId"]
    listed = server.request("thread/list", {"cwd": str(tmp_path), "limit": 5})
    assert [t["threadId"] for t in listed["threads"]] == [tid]
    modules = server.request("sessiond/debug")["modules"]
    # thread/start needed pydantic; what matters is that a list alone does not: a second
    # server that only lists never loads it.
    assert any(name == "pydantic" for name in modules)
    lister = spawn(env={"SESSIOND_DEBUG": "1"})
    lister.initialize()
    assert [t["threadId"] for t in lister.request("thread/list", {"limit": 5})["threads"]] == [tid]
    assert not any(
        name.split(".")[0] == "pydantic" for name in lister.request("sessiond/debug")["modules"]
    )
    # Coercion and errors are still pydantic's.
    assert len(lister.request("thread/list", {"limit": "1"})["threads"]) == 1
    for bad in ({"limit": 0}, {"limit": MAX_PAGE + 1}, {"archived": None}, {"search": "s" * 501}):
        with pytest.raises(RpcError) as refused:
            lister.request("thread/list", bad)
        assert refused.value.code == -32602 and refused.value.kind == "InvalidParams"
