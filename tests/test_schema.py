"""The committed JSON Schema is what clients build against: it must match the models."""

from __future__ import annotations

import json

from protocol.schema import DOC_PATH, SCHEMA_PATH, build_schema, render, render_markdown


def test_committed_schema_is_current() -> None:
    assert SCHEMA_PATH.read_text() == render(), "run: python -m protocol.schema"
    assert DOC_PATH.read_text() == render_markdown(), "run: python -m protocol.schema"


def test_schema_names_every_method_item_and_error_kind() -> None:
    schema = json.loads(render())
    assert {"thread/start", "thread/record", "thread/resume", "thread/fork"} <= set(
        schema["requests"]
    )
    recordable = {d["$ref"].rsplit("/", 1)[-1] for d in schema["$defs"]["RecordableItem"]["oneOf"]}
    assert {"MessageItem", "OperationItem", "TodosItem", "VerifierItem"} <= recordable
    assert schema["errors"]["ThreadBusy"] == -32011
    assert build_schema()["protocolVersion"] == 1


def test_thread_info_on_the_wire_matches_the_listing_rows() -> None:
    """restore builds ThreadInfo without pydantic (it is on the fast path); the two field
    lists must not drift apart."""
    from protocol.methods import ThreadInfo
    from restore.summary import ThreadSummary

    row = ThreadSummary(threadId="t").thread_info()
    assert list(row) == list(ThreadInfo.model_fields)
    assert ThreadInfo.model_validate(row).model_dump() == row
