"""`sessiond import sessiond FILE`: a JSON export (document.py's `write_json`) back into the
store, each thread as it was — the same id, the same items (seq, ts and ids kept) — or, when
a thread with that id is already stored, as a copy under a new id, its sub-agents' links
rewritten to the copies. Written only through the store interface (`import_thread`, which
redacts with the store's redactor as every write does).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from protocol.errors import ErrorKind, ProtocolError
from restore.ids import validate_thread_id
from restore.render.document import EXPORT_VERSION
from restore.service import ThreadService

LINKS = ("parentThreadId", "childThreadId")
"""Fields of an item that name another thread of the export (rewritten in a copy)."""


@dataclass
class Imported:
    thread_id: str
    """The thread as stored now."""
    original_id: str
    """The thread id in the export."""
    copied: bool
    """A thread with the original id was stored already: this is a copy."""
    items: int


def _refuse(path: Path, why: str) -> ProtocolError:
    return ProtocolError(
        ErrorKind.INVALID_PARAMS,
        f"{path} is not a sessiond JSON export ({why}): make one with "
        "`sessiond export ID --format json -o FILE`",
        field="file",
    )


def _threads(path: Path, node: Any, depth: int = 0) -> list[tuple[dict[str, Any], list[Any]]]:
    """Each thread of the export as (info, items), parents before their sub-agents."""
    if not isinstance(node, dict) or not isinstance(node.get("thread"), dict):
        raise _refuse(path, "a thread without its `thread` object")
    items, subs = node.get("items"), node.get("subAgents", [])
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise _refuse(path, "`items` is not a list of items")
    if not isinstance(subs, list) or depth > 16:
        raise _refuse(path, "`subAgents` is not a list")
    found = [(node["thread"], items)]
    for sub in subs:
        found += _threads(path, sub, depth + 1)
    return found


def read(path: Path) -> list[tuple[dict[str, Any], list[Any]]]:
    """The export's threads, checked before anything is written."""
    try:
        data = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise _refuse(path, f"not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("sessiondExport") != EXPORT_VERSION:
        raise _refuse(path, f"no `sessiondExport: {EXPORT_VERSION}`")
    threads = _threads(path, data)
    for info, _ in threads:
        validate_thread_id(info.get("threadId"))
    return threads


def import_export(service: ThreadService, path: Path) -> list[Imported]:
    """Every thread of the export stored; what became of each, parents first."""
    threads = read(path)
    store = service.store
    renamed: dict[str, str] = {}
    for info, _ in threads:
        original = info["threadId"]
        if store.exists(original):
            renamed[original] = str(uuid.uuid4())
    done = []
    for info, items in threads:
        original = info["threadId"]
        target = renamed.get(original, original)
        if renamed:
            items = [_relinked(item, renamed) for item in items]
        store.import_thread(target, items, bool(info.get("archived")))
        done.append(Imported(target, original, original in renamed, len(items)))
    store.flush()
    return done


def _relinked(item: dict[str, Any], renamed: dict[str, str]) -> dict[str, Any]:
    if not any(isinstance(item.get(name), str) and item[name] in renamed for name in LINKS):
        return item
    return {
        key: renamed.get(value, value) if key in LINKS and isinstance(value, str) else value
        for key, value in item.items()
    }
