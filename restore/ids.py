"""Names: thread ids checked before any path or query is built from them, and the sha256
digests content is named by (blobs, checkpoints, import heads, edits)."""

from __future__ import annotations

import hashlib
import uuid

from protocol.errors import invalid_id


def validate_thread_id(value: object, what: str = "threadId") -> str:
    """Return the canonical UUID string, or raise InvalidId before any path is built."""
    if not isinstance(value, str) or len(value) != 36:
        raise invalid_id(value, what)
    try:
        parsed = uuid.UUID(value)
    except ValueError:
        raise invalid_id(value, what) from None
    canonical = str(parsed)
    if canonical != value.lower():
        raise invalid_id(value, what)
    return canonical


def sha256_of(data: bytes) -> str:
    """The hex sha256 of `data`: how blobs, file heads, lines and edits are named."""
    return hashlib.sha256(data).hexdigest()


def is_sha256(value: str) -> bool:
    """A sha256 in hex: the only thing a blob is ever looked up by (never a path)."""
    return len(value) == 64 and all(c in "0123456789abcdef" for c in value)
