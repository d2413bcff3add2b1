"""`python -m protocol.schema` writes the JSON Schema of the whole protocol, and its reference.

One committed file (protocol/schema.json) is what headless clients and the VS Code
extension's generated types are built from; docs/protocol.md is rendered from the same
schema, so every field's type, enum values and description appear in all three. A test
fails when either file is stale (`--check` says so too, without writing).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter

from protocol import PROTOCOL_VERSION, agents
from protocol.errors import CODE_OF_KIND, MEANING_OF_KIND
from protocol.examples import ANY, RECORD_ONE_TURN
from protocol.items import (
    AcpSessionItem,
    AcpUpdateItem,
    ClearBoundaryItem,
    CompactBoundaryItem,
    CostReportedItem,
    DriftAcceptedItem,
    ImportCheckpointItem,
    LifecycleItem,
    PermissionDecisionItem,
    RecordableItem,
    RewindBoundaryItem,
    SessionMetaItem,
    ThreadSuccessorItem,
    ThreadTitleItem,
)
from protocol.methods import METHODS, NOTIFICATIONS_IN, NOTIFICATIONS_OUT, SUMMARIES

SCHEMA_PATH = Path(__file__).with_name("schema.json")
DOC_PATH = Path(__file__).resolve().parent.parent / "docs" / "protocol.md"
SERVER_ITEMS = (
    SessionMetaItem,
    ThreadTitleItem,
    ClearBoundaryItem,
    CompactBoundaryItem,
    RewindBoundaryItem,
    DriftAcceptedItem,
    ImportCheckpointItem,
    CostReportedItem,
    LifecycleItem,
    AcpUpdateItem,
    AcpSessionItem,
    PermissionDecisionItem,
    ThreadSuccessorItem,
)


def _ref(model: type[BaseModel] | None, defs: dict[str, Any]) -> dict[str, Any] | None:
    if model is None:
        return None
    schema = model.model_json_schema(ref_template="#/$defs/{model}")
    defs.update(schema.pop("$defs", {}))
    defs[model.__name__] = schema
    return {"$ref": f"#/$defs/{model.__name__}"}


def build_schema() -> dict[str, Any]:
    defs: dict[str, Any] = {}
    item_schema = TypeAdapter(RecordableItem).json_schema(ref_template="#/$defs/{model}")
    defs.update(item_schema.pop("$defs", {}))
    defs["RecordableItem"] = item_schema
    for model in SERVER_ITEMS:
        _ref(model, defs)
    requests = {
        name: {"params": _ref(params, defs), "result": _ref(result, defs)}
        for name, (params, result) in METHODS.items()
    }
    client_notifications = {name: _ref(model, defs) for name, model in NOTIFICATIONS_IN.items()}
    server_notifications = {name: _ref(model, defs) for name, model in NOTIFICATIONS_OUT.items()}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "sessiond protocol",
        "protocolVersion": PROTOCOL_VERSION,
        "requests": requests,
        "clientNotifications": client_notifications,
        "serverNotifications": server_notifications,
        "errors": {str(kind): code for kind, code in CODE_OF_KIND.items()},
        "agents": agents.to_json(),
        "$defs": dict(sorted(defs.items())),
    }


def render() -> str:
    return json.dumps(build_schema(), indent=2, sort_keys=False) + "\n"


# --- docs/protocol.md ------------------------------------------------------------------


def _name(ref: dict[str, Any]) -> str:
    return str(ref["$ref"]).rsplit("/", 1)[-1]


def _link(name: str) -> str:
    return f"[{name}](#{name.lower()})"


def _type(node: dict[str, Any]) -> str:
    """A property's type as a reader says it: `string`, `"a" | "b"`, ThreadInfo[], ..."""
    if "$ref" in node:
        return _link(_name(node))
    if "const" in node:
        return f'`"{node["const"]}"`'
    if "enum" in node:
        return " \\| ".join(f'`"{value}"`' for value in node["enum"])
    for union in ("anyOf", "oneOf"):
        if union in node:
            return " \\| ".join(_type(option) for option in node[union])
    kind = node.get("type")
    if kind == "array":
        inner = _type(node.get("items", {}))
        return f"({inner})[]" if "\\|" in inner else f"{inner}[]"
    if kind == "object":
        return "object"
    if kind in ("string", "integer", "number", "boolean", "null"):
        return str(kind)
    return "any"


def _limits(node: dict[str, Any]) -> str:
    """Bounds and defaults a client must respect, in words."""
    notes = []
    for key, words in (
        ("minLength", "length ≥ {}"),
        ("maxLength", "length ≤ {}"),
        ("minimum", "≥ {}"),
        ("maximum", "≤ {}"),
        ("minItems", "≥ {} entries"),
        ("maxItems", "≤ {} entries"),
        ("pattern", "matches `{}`"),
    ):
        values = [n[key] for n in [node, *node.get("anyOf", [])] if key in n]
        notes += [words.format(value) for value in values]
    if "default" in node and node["default"] not in (None, [], {}):
        notes.append(f"default `{json.dumps(node['default'])}`")
    return f" ({', '.join(notes)})" if notes else ""


def _fields_table(schema: dict[str, Any], name: str) -> list[str]:
    model = schema["$defs"][name]
    properties = model.get("properties", {})
    if not properties:
        return ["No fields: `{}`."]
    required = set(model.get("required", []))
    lines = ["| field | type | required | meaning |", "|---|---|---|---|"]
    for field, node in properties.items():
        need = "yes" if field in required else ""
        meaning = node.get("description", "").replace("|", "\\|").replace("\n", " ")
        lines.append(f"| `{field}` | {_type(node)} | {need} | {meaning}{_limits(node)} |")
    return lines


def _model_section(schema: dict[str, Any], name: str, level: str = "###") -> list[str]:
    model = schema["$defs"][name]
    lines = [f"{level} {name}", ""]
    if model.get("description"):
        lines += [" ".join(str(model["description"]).split()), ""]
    return [*lines, *_fields_table(schema, name), ""]


def _referenced(schema: dict[str, Any], start: list[str]) -> list[str]:
    """Every model reachable from `start` through `$ref`s, in first-seen order."""
    seen: dict[str, None] = {}
    pending = list(start)
    while pending:
        name = pending.pop(0)
        if name in seen:
            continue
        seen[name] = None
        found: list[str] = []

        def walk(node: Any, found: list[str] = found) -> None:
            if isinstance(node, dict):
                if "$ref" in node:
                    found.append(_name(node))
                for value in node.values():
                    walk(value)
            elif isinstance(node, list):
                for value in node:
                    walk(value)

        walk(schema["$defs"][name].get("properties", {}))
        pending += found
    return list(seen)


def _message(method: str, params: Any, msg_id: int) -> str:
    message = {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}
    return json.dumps(message, ensure_ascii=False)


def _example() -> list[str]:
    lines = [
        "## Example: record one agent turn",
        "",
        "One user request and the agent's work on it, as a harness records it after",
        "`initialize` (id 1). Newline-delimited framing is shown; over WebSocket each line is",
        "one text frame. `$cwd`, `$threadId` and `$sessionId` stand for values from earlier",
        "answers, `…` for any value; tests/test_protocol_examples.py replays exactly this.",
        "",
        "The order within a turn: `turn` (started) → `message` (user) → for each tool call,",
        "`operation` `started` **before** the tool runs and `committed` or `failed` after it →",
        "`message` (assistant) → `cost` → `turn` (completed or interrupted).",
        "",
    ]
    for number, step in enumerate(RECORD_ONE_TURN, start=2):
        answer = {"jsonrpc": "2.0", "id": number, "result": step.result}
        result = json.dumps(answer, ensure_ascii=False)
        lines += [
            f"{number - 1}. {step.why}",
            "",
            "   ```",
            f"   → {_message(step.method, step.params, number)}",
            f"   ← {result}",
            "   ```",
            "",
        ]
    return [line.replace(f'"{ANY}"', ANY) for line in lines]


def render_markdown() -> str:
    """docs/protocol.md: every method, notification, item and type, with each field's
    type, bounds and meaning; then the error kinds and a worked example."""
    schema = build_schema()
    lines = [
        "# Protocol reference",
        "",
        "Generated by `python -m protocol.schema` from `protocol/`; do not edit by hand.",
        "JSON-RPC 2.0 over stdio (`Content-Length` or newline-delimited framing, detected",
        "from the first bytes) or WebSocket (one message per text frame). Full JSON Schema:",
        "`protocol/schema.json`. Writing a client for another editor? Start with",
        "[writing a client](writing-a-client.md); the [example](#example-record-one-agent-turn)",
        "below records one agent turn end to end.",
        "",
        "## Requests",
        "",
    ]
    shown: list[str] = []
    for method, entry in schema["requests"].items():
        lines += [f"### `{method}`", "", SUMMARIES[method], ""]
        for label, ref in (("Params", entry["params"]), ("Result", entry["result"])):
            if ref is None:
                lines += [f"{label}: none (`null`).", ""]
                continue
            name = _name(ref)
            lines += [f"{label}: `{name}`", "", *_fields_table(schema, name), ""]
            shown.append(name)
    lines += ["## Notifications", ""]
    for direction, key in (
        ("client → server", "clientNotifications"),
        ("server → client", "serverNotifications"),
    ):
        for method, ref in schema[key].items():
            lines += [f"### `{method}` ({direction})", "", SUMMARIES[method], ""]
            if ref is None:
                lines += ["Params: none.", ""]
            else:
                lines += [f"Params: `{_name(ref)}`", "", *_fields_table(schema, _name(ref)), ""]
                shown.append(_name(ref))
    items = [_name(ref) for ref in schema["$defs"]["RecordableItem"]["oneOf"]]
    lines += [
        "## Recordable items",
        "",
        "What `thread/record` accepts, chosen by `type`. Every stored line also carries `v`,",
        "`seq`, `ts` and `sessionId`, stamped by the server.",
        "",
    ]
    for name in items:
        lines += _model_section(schema, name)
    server_items = [model.__name__ for model in SERVER_ITEMS]
    lines += ["## Items the server writes", ""]
    for name in server_items:
        lines += _model_section(schema, name)
    others = [
        name
        for name in _referenced(schema, [*shown, *items, *server_items])
        if name not in {*shown, *items, *server_items}
    ]
    lines += ["## Types", ""]
    for name in others:
        lines += _model_section(schema, name)
    lines += [
        "## Errors",
        "",
        "Every error carries `data.kind`; a known condition is never a bare -32603.",
        "",
        "| kind | code | meaning |",
        "|---|---|---|",
    ]
    lines += [
        f"| `{kind}` | {code} | {MEANING_OF_KIND[kind]} |"
        for kind, code in schema["errors"].items()
    ]
    lines += [
        "",
        "## Agents",
        "",
        "The agents whose sessions are imported (`origin.agent`, `handoff.agent`), as the",
        "schema's `agents` names them: the command-line name (`sessiond import <flag>`,",
        "`serve --follow`) and how to install each one's CLI.",
        "",
        "| agent | name | flag | install |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| `{agent_id}` | {entry['name']} | `{entry['flag']}` | `{entry['install']}` |"
        for agent_id, entry in schema["agents"].items()
    ]
    lines += ["", *_example()]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m protocol.schema",
        description="Write protocol/schema.json and docs/protocol.md from the models in "
        "protocol/ (then run `npm run generate` in vscode-extension/ for the TypeScript).",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if either committed file is stale",
    )
    args = parser.parse_args(argv)
    outputs = ((SCHEMA_PATH, render()), (DOC_PATH, render_markdown()))
    if args.check:
        stale = [str(path) for path, text in outputs if path.read_text() != text]
        for name in stale:
            print(f"{name} is stale: run python -m protocol.schema", file=sys.stderr)
        return 1 if stale else 0
    for path, text in outputs:
        path.write_text(text)
    print(f"wrote {SCHEMA_PATH} and {DOC_PATH}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
