"""The committed JSON Schema is what clients build against: it must match the models."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from protocol.errors import CODE_OF_KIND, MEANING_OF_KIND
from protocol.methods import METHODS, NOTIFICATIONS_IN, NOTIFICATIONS_OUT, SUMMARIES
from protocol.schema import DOC_PATH, SCHEMA_PATH, build_schema, render, render_markdown
from tests.support.rpc_client import REPO


def _properties(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (model, name, node)
        for model, definition in schema["$defs"].items()
        for name, node in definition.get("properties", {}).items()
    ]


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


def test_every_public_field_says_what_it_means() -> None:
    """A field a client sees without a description fails here, named: add one line
    (meaning, units, enum values) with `Field(description=...)`."""
    missing = [
        f"{model}.{name}"
        for model, name, node in _properties(build_schema())
        if not str(node.get("description", "")).strip()
    ]
    assert missing == []


def test_most_schema_properties_carry_a_description() -> None:
    properties = _properties(json.loads(SCHEMA_PATH.read_text()))
    described = [node for _, _, node in properties if node.get("description")]
    assert len(properties) > 250
    assert len(described) >= 0.8 * len(properties)


def test_reference_gives_types_enums_and_meanings_for_every_method_and_error() -> None:
    doc = render_markdown()
    for method in (*METHODS, *NOTIFICATIONS_IN, *NOTIFICATIONS_OUT):
        assert SUMMARIES.get(method), f"no summary line for {method}"
        assert f"### `{method}`" in doc
    assert set(MEANING_OF_KIND) == set(CODE_OF_KIND)
    assert '| `role` | `"user"` \\| `"assistant"` \\| `"system"` \\| `"tool"` | yes |' in doc
    assert "| `limit` | integer |  | Threads per page (1-200). (≥ 1, ≤ 200, default `50`) |" in doc
    assert "## Example: record one agent turn" in doc and "(writing-a-client.md)" in doc


def test_schema_command_prints_help_and_checks_without_writing() -> None:
    before = SCHEMA_PATH.stat().st_mtime_ns, DOC_PATH.stat().st_mtime_ns
    helped = subprocess.run([sys.executable, "-m", "protocol.schema", "--help"], cwd=REPO,
                            capture_output=True, text=True)  # fmt: skip
    assert helped.returncode == 0 and "usage:" in helped.stdout and "--check" in helped.stdout
    checked = subprocess.run([sys.executable, "-m", "protocol.schema", "--check"], cwd=REPO,
                             capture_output=True, text=True)  # fmt: skip
    assert checked.returncode == 0, checked.stderr
    assert (SCHEMA_PATH.stat().st_mtime_ns, DOC_PATH.stat().st_mtime_ns) == before
