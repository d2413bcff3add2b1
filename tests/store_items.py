"""Small builders for store-level tests: a store on a temp dir and the items it appends."""

from __future__ import annotations

import uuid
from pathlib import Path

from restore.home.layout import Layout
from restore.stores.api import Durability
from restore.stores.embedded.files import ThreadStore


def make_store(home: Path, durability: Durability = Durability.FSYNC) -> ThreadStore:
    return ThreadStore(Layout(home), durability)


def session_meta(thread_id: str) -> dict:
    return {
        "type": "session_meta",
        "id": str(uuid.uuid4()),
        "threadId": thread_id,
        "source": "startup",
        "cwd": "/w",
    }


def message(item_id: str) -> dict:
    return {"type": "message", "id": item_id, "role": "user", "content": item_id}
