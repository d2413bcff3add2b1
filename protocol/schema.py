"""`python -m protocol.schema` writes the JSON Schema of the whole protocol.

One committed file (protocol/schema.json) is what headless clients and the VS Code
extension's generated types are built from; a test fails when it is stale.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter

from protocol import PROTOCOL_VERSION
from protocol.errors import CODE_OF_KIND
from protocol.items import RecordableItem, SessionMetaItem, ThreadTitleItem
from protocol.methods import METHODS, NOTIFICATIONS_IN, NOTIFICATIONS_OUT

SCHEMA_PATH = Path(__file__).with_name("schema.json")


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
    for model in (SessionMetaItem, ThreadTitleItem):
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
        "$defs": dict(sorted(defs.items())),
    }


def render() -> str:
    return json.dumps(build_schema(), indent=2, sort_keys=False) + "\n"


def main() -> int:
    SCHEMA_PATH.write_text(render())
    print(f"wrote {SCHEMA_PATH}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
