"""Session keys: which conversation a message belongs to (`workspace:<path>#<branch>`,
`direct:<peer>`, ...; any printable string, the shapes are conventions). Checked here
before a store or a lock file is named from one, and matched by prefix as a range of the
stores' keys, so a listing by key never scans."""

from __future__ import annotations

import hashlib
import re

from protocol.errors import ErrorKind, ProtocolError
from protocol.names import PRINTABLE, SESSION_KEY_MAX

_PRINTABLE = re.compile(PRINTABLE)
_LAST = 0x10FFFF
_SURROGATES = range(0xD800, 0xE000)


def validate_key(value: object, field: str = "sessionKey") -> str:
    """A key as stored: a printable string of 1-512 characters (InvalidParams otherwise)."""
    if (
        not isinstance(value, str)
        or not 1 <= len(value) <= SESSION_KEY_MAX
        or not _PRINTABLE.match(value)
    ):
        raise ProtocolError(
            ErrorKind.INVALID_PARAMS,
            f"a session key is a string of 1-{SESSION_KEY_MAX} characters without control "
            "characters",
            field=field,
        )
    return value


def key_range(prefix: str) -> tuple[str, str | None]:
    """The keys starting with `prefix` are exactly those `>= low` and, unless `high` is
    None, `< high`, in code point order (SQLite's BINARY collation and PostgreSQL's
    "C" compare UTF-8 bytes, which sort as code points do). `""` is every key."""
    low = prefix
    rest = prefix.rstrip(chr(_LAST))
    if not rest:
        return low, None  # "" (or only U+10FFFF): nothing sorts past every such key
    last = ord(rest[-1]) + 1
    if last in _SURROGATES:  # not a character UTF-8 can hold: the next one that is
        last = _SURROGATES.stop
    return low, rest[:-1] + chr(last)


def lock_name(key: str) -> str:
    """The name a key's lock is taken under (a file, an advisory lock's number): its
    sha256, so no key spells a path."""
    return hashlib.sha256(key.encode()).hexdigest()
