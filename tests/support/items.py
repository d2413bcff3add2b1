"""The one item factory of the tests, and a store on a temp dir for store-level tests."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from restore.home.layout import Layout
from restore.stores.api import Durability
from restore.stores.embedded.files import ThreadStore


def message(
    text: str = "hello",
    role: str = "user",
    *,
    item_id: str | None = None,
    turn: str | None = None,
) -> dict[str, Any]:
    """A `message` item as a client records it: a fresh id unless `item_id` names one
    (an idempotent append's retry), in `turn` when given."""
    item: dict[str, Any] = {
        "type": "message",
        "id": item_id or str(uuid.uuid4()),
        "role": role,
        "content": text,
    }
    if turn:
        item["turnId"] = turn
    return item


def named(item_id: str) -> dict[str, Any]:
    """A message whose id is its text: appends compared by id read plainly."""
    return message(item_id, item_id=item_id)


def make_store(home: Path, durability: Durability = Durability.FSYNC) -> ThreadStore:
    return ThreadStore(Layout(home), durability)


def session_meta(thread_id: str) -> dict[str, Any]:
    return {
        "type": "session_meta",
        "id": str(uuid.uuid4()),
        "threadId": thread_id,
        "source": "startup",
        "cwd": "/w",
    }
