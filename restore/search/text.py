"""What of a record is searchable, and as which role.

User and assistant messages (their text parts); a tool call's title, command and arguments
as its source recorded them (`input`: an imported call's, `rawInput`: an ACP call's); what
a tool gave back (a message of role `tool`, an operation's `result`, an ACP call's
`rawOutput` and text content); an edited file's path, the texts of a todo list, a thread's
title. Nothing else: system prompts and bookkeeping are not. Redaction happens before a
record is stored, so what is redacted was never here to index. PostgreSQL computes the
same text in SQL (`sessiond_search_text`, migration 009): the contract tests hold the two
to each other, over random arguments too.

Arguments and results are any JSON: their text is their strings, depth first, an object's
members in jsonb's order (shorter keys first, then by their bytes), the order PostgreSQL's
`jsonb_path_query(value, 'strict $.**')` walks them in, so both stores index the same text.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

MAX_TEXT = 100_000
"""Characters of one record indexed (the start of a huge message is what a person
remembers; PostgreSQL's tsvector has a 1 MB bound)."""
ROLES = ("user", "assistant", "tool", "output", "edit", "todo", "title")
"""What a hit is: a user's or the assistant's message, a tool call (its title, command and
arguments), a tool's output (with its call's), an edited path, the todo list, the
thread's title."""
BLANK = " \t\n\r\f\v"
"""What a text with nothing to search is made of: the six ASCII spaces, as PostgreSQL's
`btrim` is told (migration 011); not every character `str.isspace` calls space."""
CALL_FIELDS = ("input", "rawInput")
"""An operation's arguments, as its source recorded them."""
OUTPUT_FIELDS = ("result", "rawOutput")
"""An operation's output, as its source recorded it (and an ACP call's text content)."""


def strings(value: Any) -> Iterator[str]:
    """The strings of a JSON value, depth first, objects' members in jsonb's key order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key in sorted(value, key=_jsonb_order):
            yield from strings(value[key])
    elif isinstance(value, list):
        for entry in value:
            yield from strings(entry)


def bounded(value: Any, limit: int) -> Any:
    """A JSON value whose strings hold at most `limit` characters in all (the first ones
    kept, the rest cut, saying so): a source's arguments or output copied into a record
    for search, bounded as the text indexed of a record is."""
    left = limit

    def cut(node: Any) -> Any:
        nonlocal left
        if isinstance(node, str):
            kept, left = node[: max(left, 0)], left - len(node)
            return kept if len(kept) == len(node) else f"{kept}[… {len(node) - len(kept):,} more]"
        if isinstance(node, dict):
            return {key: cut(entry) for key, entry in node.items()}
        if isinstance(node, list):
            return [cut(entry) for entry in node]
        return node

    return cut(value)


def _jsonb_order(key: Any) -> tuple[int, bytes]:
    raw = str(key).encode("utf-8", "surrogatepass")
    return len(raw), raw


def _content_texts(content: Any) -> list[Any]:
    """An ACP tool call's text content (`{type: content, content: {type: text, text}}`)."""
    if not isinstance(content, list):
        return []
    return [
        entry["content"].get("text")
        for entry in content
        if isinstance(entry, dict)
        and entry.get("type") == "content"
        and isinstance(entry.get("content"), dict)
        and entry["content"].get("type") == "text"
    ]


def _message_parts(content: Any) -> list[Any] | None:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [
            part.get("text")
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        ]
    return None


def searchable(item: dict[str, Any]) -> tuple[str, str] | None:
    """(role, text) of the record's searchable text, or None when it has none."""
    kind = item.get("type")
    role: str
    parts: list[Any]
    if kind == "message":
        role = item.get("role")  # type: ignore[assignment]
        if role not in ("user", "assistant", "tool"):
            return None
        found = _message_parts(item.get("content"))
        if found is None:
            return None
        role, parts = ("output" if role == "tool" else role), found
    elif kind == "operation":
        parts = [item.get("title"), item.get("command")]
        for field in CALL_FIELDS:
            parts += strings(item.get(field))
        output = [text for field in OUTPUT_FIELDS for text in strings(item.get(field))]
        output += _content_texts(item.get("content"))
        output = [text for text in output if isinstance(text, str) and text]
        role = "output" if output else "tool"
        parts += output
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
    return (role, text[:MAX_TEXT]) if text.strip(BLANK) else None
