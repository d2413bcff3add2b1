"""Names: thread ids checked before any path or query is built from them, and the sha256
digests content is named by (blobs, checkpoints, import heads, edits)."""

from __future__ import annotations

import hashlib
import re
import uuid

from protocol.errors import ErrorKind, ProtocolError, invalid_id

ID_PREFIX_MIN = 4
"""Hex digits a typed prefix needs at least, as git asks of a commit's (fewer name too
many threads to be worth looking up)."""
_HEX_OR_HYPHEN = re.compile(r"[0-9a-f-]+")
_GROUPS = (8, 4, 4, 4, 12)  # a UUID's hex digits between its hyphens


_CANONICAL = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def is_thread_id(value: str) -> bool:
    """`value` is a thread id as the store names its files (`validate_thread_id`'s
    canonical form): one match, for a watcher sorting hundreds of file names at once."""
    return _CANONICAL.fullmatch(value) is not None


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


def id_prefix(value: str, what: str = "thread id") -> str:
    """A thread id or the start of one, as a person typed it (any case, hyphens where
    the id has them or none at all), in the form ids are stored in: lowercase, hyphens
    at a UUID's places, so every store finds it by a range of its key. InvalidId, naming
    what it takes, for anything else."""
    text = value.strip().lower()
    digits = text.replace("-", "")
    canonical = ""
    for size in _GROUPS:
        if len(canonical.replace("-", "")) >= len(digits):
            break
        start = len(canonical.replace("-", ""))
        canonical += ("-" if canonical else "") + digits[start : start + size]
    if (
        _HEX_OR_HYPHEN.fullmatch(text) is None
        or not ID_PREFIX_MIN <= len(digits) <= 32
        or ("-" in text and not canonical.startswith(text.rstrip("-")))  # a UUID's places
    ):
        shown = repr(value)[:80]
        raise ProtocolError(
            ErrorKind.INVALID_ID,
            f"a {what} is a UUID or its first {ID_PREFIX_MIN} or more hex digits "
            f"(as `sessiond list` and `search` print them), got {shown}",
            field=what,
        )
    return canonical


def prefix_end(prefix: str) -> str:
    """The first string past every id that starts with `prefix` (a canonical one): ids
    with the prefix are exactly those `>= prefix` and `< prefix_end(prefix)`."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def sha256_of(data: bytes) -> str:
    """The hex sha256 of `data`: how blobs, file heads, lines and edits are named."""
    return hashlib.sha256(data).hexdigest()


def is_sha256(value: str) -> bool:
    """A sha256 in hex: the only thing a blob is ever looked up by (never a path)."""
    return len(value) == 64 and all(c in "0123456789abcdef" for c in value)
