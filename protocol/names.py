"""Item type names and the shape of a printable name, importable without pydantic
(summaries and the handshake use them on the fast path)."""

PRINTABLE = r"^[^\x00-\x1f\x7f]*$"
"""No control characters: a NUL in an id or a name would be stored by one store and
refused by the other's text column (PostgreSQL), an escape sequence shown raw in a terminal."""
CLIENT_NAME_MAX = 200
SESSION_KEY_MAX = 512
"""A session key's length at most, in characters (`workspace:<path>#<branch>` fits a long
path); printable like a name."""

# Written by the server itself, never accepted from `thread/record`.
SERVER_ITEM_TYPES = (
    "session_meta",
    "lifecycle",
    "thread_title",
    "clear_boundary",
    "compact_boundary",
    "rewind_boundary",
    "drift_accepted",
    "import_checkpoint",
    "acp_update",
    "acp_session",
    "permission_decision",
    "thread_successor",
)
