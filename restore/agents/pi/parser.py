"""Pi coding agent sessions (`~/.pi/agent/sessions/--<cwd>--/<time>_<sessionId>.jsonl`,
store.py) → items.

A Pi session file (docs/session-format.md in its package; checked against 1.6.0) is a tree
of entries: a `session` header (`id`, `cwd`, `parentSession`: the file of the session a
`--fork` copied), then entries `{type, id, parentId, timestamp}`: `message` (an
`AgentMessage`: `system` — the prompt sections and tools —, `user`, `assistant` with
content blocks `text` / `thinking` / `toolCall {id, name, arguments}`, `model`, `provider`,
`usage {input, output, cacheRead, cacheWrite, cost {total}}`, and `toolResult {toolCallId,
toolName, content, isError, details}`), `model_change`, `thinking_level_change`, `usage`
(model calls that are no message: cache warming), `compaction {summary}`,
`branch_summary`, `session_info {name}`, `label`, `custom`, `custom_message`,
`context_edit`. Branching is in place: an entry whose `parentId` is not the entry before
it continues from an earlier point (`/tree`); the thread keeps every branch in file order
and marks where each one starts. The mapping is docs/import.md's.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from restore.agents.parsing import (
    SourceParser,
    called,
    effect,
    remember_file,
    text_of,
    title_from,
    truncate,
)

AGENT = "pi"
READ_TOOLS = frozenset({"read", "grep", "find", "ls"})
EDIT_TOOLS = frozenset({"write", "edit"})
SHELL_TOOLS = frozenset({"bash", "powershell"})
KNOWN_TOOLS = READ_TOOLS | EDIT_TOOLS | SHELL_TOOLS
"""Pi's built-in tools (read, bash, edit, write, and the optional grep, find, ls); an
extension's or MCP tool is a side effect, and reported unmapped."""
_EXIT = re.compile(r"Command exited with code (-?\d+)\s*$")


def effect_of(tool: str) -> str:
    return effect(tool, READ_TOOLS)


def handoff(session_id: str) -> list[str]:
    """Pi's own resume (`pi --session ID`: "Open a session by file path or full/partial
    ID", checked against 1.6.0's --help)."""
    return ["pi", "--session", session_id]


def session_of(file_name: str) -> str | None:
    """A session's id from its file's name, `<time>_<id>.jsonl`."""
    stem = file_name.rsplit("/", 1)[-1].removesuffix(".jsonl")
    _, underscore, session = stem.partition("_")
    return session if underscore and session else None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


class PiParser(SourceParser):
    AGENT = AGENT
    PROVIDER = None  # any provider Pi is given: the model is found by name
    TITLE_ORDER: ClassVar[tuple[str, ...]] = ("named", "first")
    IGNORED: ClassVar[dict[str, str]] = {
        "message:system": "the prompt sections and tool declarations Pi sends",
        "record:thinking_level_change": "the reasoning effort asked for",
        "record:label": "a bookmark on an entry in Pi's session tree",
        "record:custom": "an extension's state (never part of the conversation)",
        "record:context_edit": "an entry left out of (or replaced in) the model's future "
        "context; the entry itself is kept, as Pi keeps it in its history",
    }

    def initial(self) -> dict[str, Any]:
        return {**super().initial(), "calls": {}, "files": {}, "leaf": None, "fork": None}

    def handle(self, record: dict[str, Any]) -> None:
        kind = record.get("type")
        if kind == "session":
            self._header(record)
            return
        entry, parent = record.get("id"), record.get("parentId")
        leaf, self.state["leaf"] = self.state["leaf"], entry if isinstance(entry, str) else None
        if kind == "message":
            if isinstance(parent, str) and leaf is not None and parent != leaf:
                self._branch(parent)
            self._message(_dict(record.get("message")), entry)
        elif kind == "model_change":
            self.model(record.get("modelId"))
        elif kind == "usage":
            self._usage(record.get("model"), _dict(record.get("usage")))
        elif kind == "compaction":
            summary = record.get("summary")
            self.emit(
                {
                    "type": "compact_boundary",
                    "summary": summary
                    if isinstance(summary, str) and summary
                    else "Conversation compacted",
                }
            )
            self._usage(None, _dict(record.get("usage")))
        elif kind == "branch_summary":
            summary = record.get("summary")
            if isinstance(summary, str) and summary.strip():
                self.message("system", summary, branchSummary=True)
            self._usage(None, _dict(record.get("usage")))
        elif kind == "session_info":
            name = record.get("name")
            if isinstance(name, str) and name.strip():
                self.state["titles"]["named"] = title_from(name)
        elif kind == "custom_message":
            text = text_of(record.get("content"))
            if record.get("display") is not False and text.strip():
                self.message("system", text, customType=record.get("customType"))
        else:
            self.unmapped("record", kind)

    def _header(self, record: dict[str, Any]) -> None:
        state = self.state
        state["sessionId"] = state["sessionId"] or record.get("id")
        cwd = record.get("cwd")
        if isinstance(cwd, str) and cwd:
            state["cwd"] = state["cwd"] or cwd
        forked = record.get("parentSession")
        parent = session_of(forked) if isinstance(forked, str) else None
        if parent and state["fork"] is None:
            state["fork"] = {"sessionId": parent}

    def _branch(self, parent: str) -> None:
        """The conversation continues from an earlier entry (Pi's `/tree`): said where."""
        self.message(
            "system",
            f"Continued from an earlier point of the session ({parent}).",
            branchFrom=parent,
        )

    # --- messages -------------------------------------------------------------------------

    def _message(self, message: dict[str, Any], entry: Any) -> None:
        role = message.get("role")
        if role == "user":
            text = text_of(message.get("content"))
            if text.strip():
                self.state["turn"] = entry if isinstance(entry, str) else self._key
                if not self.state["titles"].get("first") and not text.lstrip().startswith("/"):
                    self.state["titles"]["first"] = title_from(text)
                self.message("user", text)
        elif role == "assistant":
            self._assistant(message)
        elif role == "toolResult":
            self._result(message)
        else:
            self.unmapped("message", role)

    def _assistant(self, message: dict[str, Any]) -> None:
        self.model(message.get("model"))
        for block in message.get("content") or []:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "thinking" and isinstance(block.get("thinking"), str):
                if block["thinking"].strip():
                    self.message("assistant", block["thinking"], thought=True)
            elif kind == "text" and isinstance(block.get("text"), str):
                if block["text"].strip():
                    self.message("assistant", block["text"])
            elif kind == "toolCall":
                self._call(block)
        self._usage(None, _dict(message.get("usage")))
        error = message.get("errorMessage")
        if message.get("stopReason") == "error" and isinstance(error, str) and error:
            self.message("system", error, level="error")

    def _call(self, block: dict[str, Any]) -> None:
        tool = str(block.get("name") or "unknown")
        call_id = str(block.get("id") or self._key)
        arguments = _dict(block.get("arguments"))
        if tool not in KNOWN_TOOLS:
            self.unmapped("tool", tool)
        extra = self.call_fields(tool, arguments, SHELL_TOOLS, EDIT_TOOLS, "path")
        self.state["calls"][call_id] = {"tool": tool, "arguments": arguments}
        self.operation(
            call_id, tool, effect_of(tool), state="started", **called(arguments), **extra
        )

    def _result(self, message: dict[str, Any]) -> None:
        call_id = str(message.get("toolCallId") or self._key)
        call = self.state["calls"].pop(call_id, None) or {}
        tool = str(call.get("tool") or message.get("toolName") or "unknown")
        text = text_of(message.get("content"))
        failed = message.get("isError") is True
        extra: dict[str, Any] = {}
        if tool in SHELL_TOOLS:
            code = _EXIT.search(text)
            extra["exitCode"] = int(code.group(1)) if code else (None if failed else 0)
            failed = failed or (code is not None and code.group(1) != "0")
            if extra["exitCode"] is None:
                del extra["exitCode"]
        self.result(call_id, tool, effect_of(tool), text, failed, **extra)
        if not failed and tool in EDIT_TOOLS:
            self._edit(call_id, tool, _dict(call.get("arguments")), _dict(message.get("details")))

    def _edit(
        self, call_id: str, tool: str, arguments: dict[str, Any], details: dict[str, Any]
    ) -> None:
        """write: the whole file; edit: its replacements (`edits [{oldText, newText}]`, or
        one `oldText`/`newText`), known when the session wrote the file before, else Pi's
        patch alone."""
        path = arguments.get("path")
        if not isinstance(path, str) or not path:
            return
        path = self.in_cwd(path)
        files = self.state["files"]
        if tool == "write" and isinstance(arguments.get("content"), str):
            after = arguments["content"]
            self.file_edit(path, call_id, files.get(path), after, True, kind="write")
            remember_file(self.state["files"], path, after)
            return
        edits = arguments.get("edits")
        pairs = (
            [(e.get("oldText"), e.get("newText")) for e in edits if isinstance(e, dict)]
            if (isinstance(edits, list))
            else [(arguments.get("oldText"), arguments.get("newText"))]
        )
        text: str | None = files.get(path)
        for old, new in pairs:
            if (
                text is None
                or not isinstance(old, str)
                or not isinstance(new, str)
                or (text.count(old) != 1)
            ):
                text = None
                break
            text = text.replace(old, new, 1)
        known = text is not None
        extra: dict[str, Any] = {"kind": tool}
        patch = details.get("patch")
        if isinstance(patch, str) and patch:
            extra["diff"] = truncate(patch, 20_000)
        self.file_edit(path, call_id, files.get(path) if known else None, text, known, **extra)
        remember_file(self.state["files"], path, text)

    def _usage(self, model: Any, usage: dict[str, Any]) -> None:
        """One model call's tokens (input without the cache's, reasoning within output),
        Pi's own price of it kept as `agentUsd`."""
        if not usage:
            return
        if isinstance(model, str) and model:
            self.model(model)
        before = len(self._out)
        self.cost(
            fresh=_int(usage.get("input")),
            cache_write=_int(usage.get("cacheWrite")),
            cache_read=_int(usage.get("cacheRead")),
            output=_int(usage.get("output")),
        )
        total = _dict(usage.get("cost")).get("total")
        if len(self._out) > before and isinstance(total, int | float):
            self._out[-1]["agentUsd"] = float(total)
