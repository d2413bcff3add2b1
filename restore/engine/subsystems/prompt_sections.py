"""4. prompt_sections: named system-prompt sections with their hashes and sources.

A file-backed section (AGENTS.md, ...) whose file changed on disk comes back stale, with
the new content, so the agent never runs on instructions that are no longer true. Only a
regular file inside the thread's workspace is read back: a recorded path elsewhere (or a
FIFO) comes back stale without content, never with some other file's. A clear
starts without sections (hooks of the new session add theirs again).
"""

from __future__ import annotations

from typing import Any

from restore.engine.outcome import Outcome
from restore.ids import sha256_of

NAME = "prompt_sections"
FIELDS = ("name", "content", "path", "sha", "cacheable", "source")


def initial() -> dict[str, Any]:
    return {"sections": {}}


def reduce(state: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    kind = item.get("type")
    if kind == "prompt_section" and isinstance(item.get("name"), str):
        section = {key: item.get(key) for key in FIELDS}
        if section["sha"] is None and isinstance(section["content"], str):
            section["sha"] = sha256_of(section["content"].encode())
        return {"sections": {**state["sections"], item["name"]: section}}
    if kind == "clear_boundary":
        return initial()
    return state


def validate(state: dict[str, Any], ctx: Any) -> Any:
    sections = []
    stale = []
    for section in state["sections"].values():
        section = dict(section)
        if section.get("path"):
            # Only a regular file inside the thread's workspace is read back; anything
            # else comes back stale, without content, saying why (`refused`).
            text = ctx.read_text(section["path"])
            sha = None if text is None else sha256_of(text.encode())
            if sha != section.get("sha"):
                section.update(stale=True, content=text, sha=sha)
                stale.append(section["name"])
            if refused := ctx.why_unreadable(section["path"]):
                section["refused"] = refused
        sections.append(section)
    if not sections:
        return Outcome("empty", {"sections": []})
    if stale:
        reason = "changed on disk: " + ", ".join(stale)
        return Outcome("invalidated", {"sections": sections}, reason)
    return Outcome("restored", {"sections": sections})
