"""Listing rows and cursors, as both indexes (SQLite and PostgreSQL) keep and page them:
the row's fields in the order both select them, a row back as a ThreadSummary, and the
opaque keyset cursors of a listing and of a search page (anything else a client sends as
one is InvalidParams).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any

import orjson

from protocol.errors import ErrorKind, ProtocolError
from restore.summary import ThreadSummary

ROW_FIELDS = (
    "threadId", "title", "preview", "cwd", "workspaceFolder", "branch", "headSha",
    "createdAt", "updatedAt", "itemCount", "archived", "forkedFrom", "costUsd", "origin",
    "parentThreadId", "parentOperationId", "lastSeq", "latestSessionId",
    "sessionKey", "previousThreadId", "nextThreadId", "resetReason",
)  # fmt: skip
"""Every ThreadSummary field a listing row keeps, in the order both stores select them
(`childCount` is counted by the query, never stored)."""
JSON_FIELDS = ("forkedFrom", "origin")
MAX_LIMIT = 200


def summary_of(row: Sequence[Any], *, json_text: bool = False) -> ThreadSummary:
    """A row of ROW_FIELDS (then the child count, when the query selected it) as a summary.
    `json_text`: the JSON fields are text to decode (SQLite; psycopg decodes jsonb)."""
    fields = dict(zip(ROW_FIELDS, row[: len(ROW_FIELDS)], strict=True))
    if len(row) > len(ROW_FIELDS):
        fields["childCount"] = row[len(ROW_FIELDS)]
    fields["updatedAt"] = fields["updatedAt"] or None  # stored '' when unknown: keyset order
    fields["archived"] = bool(fields["archived"])
    if json_text:
        for name in JSON_FIELDS:
            if fields[name] is not None:
                fields[name] = orjson.loads(fields[name])
    return ThreadSummary(**fields)


def encode_search_cursor(key: Sequence[Any]) -> str:
    """Opaque keyset cursor of a search page (each backend's own key: rank, ts, position)."""
    return base64.urlsafe_b64encode(orjson.dumps(list(key))).decode().rstrip("=")


_INT64 = (-(1 << 63), (1 << 63) - 1)
"""What SQLite and PostgreSQL store as an integer: a cursor's numbers are in it, or forged."""


def decode_search_cursor(cursor: str, kinds: Sequence[type]) -> list[Any]:
    """Inverse of `encode_search_cursor`, checked against the backend's key `kinds`."""
    key = _decoded(cursor)
    valid = isinstance(key, list) and len(key) == len(kinds)
    if valid:
        for value, kind in zip(key, kinds, strict=True):
            if type(value) is int and not _INT64[0] <= value <= _INT64[1]:
                valid = False  # no database takes it: a forged cursor (issue 34)
            elif kind is float and type(value) is int:
                continue
            valid = valid and type(value) is kind
    if not valid:
        raise ProtocolError(
            ErrorKind.INVALID_PARAMS, "malformed thread/search cursor", field="cursor"
        )
    return list(key)


def encode_cursor(updated_at: str, thread_id: str) -> str:
    """Opaque keyset cursor: the (updatedAt, threadId) of the last row of a page."""
    return base64.urlsafe_b64encode(orjson.dumps([updated_at, thread_id])).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[str, str]:
    """Inverse of `encode_cursor`; anything else is the client's mistake (InvalidParams)."""
    key = _decoded(cursor)
    if not (isinstance(key, list) and len(key) == 2 and all(isinstance(k, str) for k in key)):
        raise ProtocolError(
            ErrorKind.INVALID_PARAMS, "malformed thread/list cursor", field="cursor"
        )
    return key[0], key[1]


def _decoded(cursor: str) -> Any:
    """A cursor's JSON, or None when it is not the base64 of any."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        return orjson.loads(base64.b64decode(padded, altchars=b"-_", validate=True))
    except (binascii.Error, ValueError, TypeError):
        return None
