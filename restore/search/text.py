"""What of a record is searchable, and as which role.

User and assistant messages (their text parts), a tool call's title and command, an
edited file's path, the texts of a todo list, a thread's title. Nothing else: tool output,
system prompts and bookkeeping are not. Redaction happens before a record is stored, so
what is redacted was never here to index. PostgreSQL computes the same text in SQL
(`sessiond_search_text`, migration 004): the contract tests hold the two to each other.
"""

from __future__ import annotations

from typing import Any

MAX_TEXT = 100_000
"""Characters of one record indexed (the start of a huge message is what a person
remembers; PostgreSQL's tsvector has a 1 MB bound)."""
ROLES = ("user", "assistant", "tool", "edit", "todo", "title")
"""What a hit is: a user's or the assistant's message, a tool call, an edited path, the
todo list, the thread's title."""


def searchable(item: dict[str, Any]) -> tuple[str, str] | None:
    """(role, text) of the record's searchable text, or None when it has none."""
    kind = item.get("type")
    role: str
    parts: list[Any]
    if kind == "message":
        role = item.get("role")  # type: ignore[assignment]
        if role not in ("user", "assistant"):
            return None
        content = item.get("content")
        if isinstance(content, str):
            parts = [content]
        elif isinstance(content, list):
            parts = [
                part.get("text")
                for part in content
                if isinstance(part, dict) and part.get("type") == "text"
            ]
        else:
            return None
    elif kind == "operation":
        role, parts = "tool", [item.get("title"), item.get("command")]
    elif kind == "file_edit":
        role, parts = "edit", [item.get("path")]
    elif kind == "todos":
        entries = item.get("items")
        if not isinstance(entries, list):
            return None
        role = "todo"
        parts = [entry.get("content") for entry in entries if isinstance(entry, dict)]
    elif kind == "thread_title" or kind == "session_meta":
        role, parts = "title", [item.get("title")]
    else:
        return None
    text = "\n".join(part for part in parts if isinstance(part, str) and part)
    return (role, text[:MAX_TEXT]) if text.strip() else None
