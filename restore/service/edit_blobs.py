"""The contents an edit recorded, read back for a diff (`thread/readBlob`).

Blobs are content-addressed and shared by every thread of a store, so a sha alone would
let a client read any file any thread ever stored, however it learned the hash. A blob is
read only through the edit that names it: the thread's item at `seq` must be a `file_edit`
whose `beforeSha` or `afterSha` is the sha asked for. That item is one O(1) page of the
thread (`Store.pages`), whatever the thread's length. The answer is bounded by the frame
limit, judged on the blob's size before it is read.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson

from protocol.errors import ErrorKind, ProtocolError
from restore.stores.api import ANSWER_OVERHEAD, Store


def read_edit_blob(
    store: Store, thread_id: str, seq: int, sha: str, *, max_bytes: int
) -> dict[str, Any]:
    """`{recorded, content, encoding, size}` of the blob the edit at `seq` names;
    Unauthorized when that item is not a `file_edit` naming `sha`, PayloadTooLarge when
    the content cannot fit in one answer of `max_bytes`."""
    edit = _item_at(store, thread_id, seq, max_bytes)
    named = edit is not None and edit.get("type") == "file_edit"
    if edit is None or not named or sha not in (edit.get("beforeSha"), edit.get("afterSha")):
        raise ProtocolError(
            ErrorKind.UNAUTHORIZED,
            f"item {seq} of thread {thread_id} is not a file_edit naming blob {sha}: only "
            "the contents a thread's own edits name can be read",
            threadId=thread_id,
            seq=seq,
            sha=sha,
        )
    budget = max_bytes - ANSWER_OVERHEAD
    size = store.blob_size(sha)
    if size is None:
        return {"recorded": False, "content": None, "encoding": None, "size": None}
    if size > budget:  # any encoding of it is at least this long: not read at all
        raise _too_large(sha, size, budget)
    data = store.get_blob(sha)
    if data is None:  # removed since its size was read
        return {"recorded": False, "content": None, "encoding": None, "size": None}
    try:
        content, encoding = data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        content, encoding = base64.b64encode(data).decode("ascii"), "base64"
    if len(orjson.dumps(content)) > budget:  # escapes (text) or base64 made it longer
        raise _too_large(sha, size, budget)
    return {"recorded": True, "content": content, "encoding": encoding, "size": len(data)}


def _item_at(store: Store, thread_id: str, seq: int, max_bytes: int) -> dict[str, Any] | None:
    """The item with exactly this seq, or None (ThreadNotFound, InvalidId from the page)."""
    page = store.pages.read(thread_id, after=seq - 1, limit=1, max_bytes=max_bytes)
    items = page.items
    return items[0] if items and items[0].get("seq") == seq else None


def _too_large(sha: str, size: int, budget: int) -> ProtocolError:
    return ProtocolError(
        ErrorKind.PAYLOAD_TOO_LARGE,
        f"blob {sha} ({size} bytes) does not fit in one answer of at most {budget} bytes",
        sha=sha,
        size=size,
        limit=budget,
    )
