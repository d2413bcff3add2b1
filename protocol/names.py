"""Item type names, importable without pydantic (summaries use them on the fast path)."""

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
)
