"""Claude Code transcripts (`~/.claude/projects/<encoded-cwd>/<sessionId>.jsonl`) → items.

One JSON object per line, `type` first among equals: `user` and `assistant` lines carry
`message` (the Anthropic API message: `content` blocks, `model`, `usage`) with `uuid`,
`parentUuid`, `sessionId`, `cwd`, `gitBranch`, `isSidechain`; a tool's outcome comes back
on a `user` line as a `tool_result` block plus `toolUseResult` (for Edit/Write/MultiEdit
the original file and the edit, for TodoWrite the lists). `summary`, `custom-title`,
`ai-title` and `permission-mode` lines carry metadata. The mapping is docs/import.md's.
"""

from __future__ import annotations

from typing import Any, ClassVar

from restore.sources.common import SourceParser, digest, text_of, title_from

AGENT = "claude-code"
READ_TOOLS = frozenset({
    "Read", "Glob", "Grep", "LS", "WebFetch", "WebSearch", "NotebookRead", "TodoRead",
    "BashOutput", "ListMcpResourcesTool", "ReadMcpResourceTool", "Skill",
})  # fmt: skip
IDEMPOTENT_TOOLS = frozenset({"TodoWrite", "ExitPlanMode"})
EDIT_TOOLS = frozenset({"Edit", "Write", "MultiEdit"})
RECENT_MESSAGES = 32


def effect_of(tool: str) -> str:
    if tool in READ_TOOLS:
        return "read"
    if tool in IDEMPOTENT_TOOLS:
        return "idempotent"
    return "side_effect"  # Bash, edits, sub-agents, MCP tools: assume the worst


def handoff(session_id: str) -> list[str]:
    """The command that continues the session in Claude Code itself."""
    return ["claude", "--resume", session_id]


def _replace(text: str, old: Any, new: Any, every: Any) -> str | None:
    if not isinstance(old, str) or not isinstance(new, str) or (old and old not in text):
        return None
    return text.replace(old, new, -1 if every else 1) if old else new + text


def edited_contents(tool: str, result: dict[str, Any]) -> tuple[str | None, str | None, bool]:
    """(before, after, known) of a file from an edit tool's `toolUseResult`.

    Edit and MultiEdit results carry the original file and the replacements, so the new
    contents follow exactly; Write results carry the new contents (and the old ones when
    it replaced a file). Anything less (older versions) leaves the contents unknown.
    """
    if tool == "Write" and isinstance(result.get("content"), str):
        before = result.get("originalFile") if result.get("type") == "update" else None
        return (before if isinstance(before, str) else None), result["content"], True
    original = result.get("originalFile", result.get("originalFileContents"))
    if not isinstance(original, str):
        return None, None, False
    after: str | None = original
    if tool == "Edit":
        after = _replace(original, result.get("oldString"), result.get("newString"),
                         result.get("replaceAll"))  # fmt: skip
    else:
        for edit in result.get("edits") or []:
            if after is None or not isinstance(edit, dict):
                break
            after = _replace(after, edit.get("old_string"), edit.get("new_string"),
                             edit.get("replace_all"))  # fmt: skip
    return original, after, after is not None


class ClaudeCodeParser(SourceParser):
    AGENT = AGENT
    TITLE_ORDER: ClassVar[tuple[str, ...]] = ("custom", "ai", "summary", "first")

    def initial(self) -> dict[str, Any]:
        return {**super().initial(), "usage": {"id": None, "seen": {}}, "recent": []}

    def handle(self, record: dict[str, Any]) -> None:
        state = self.state
        if isinstance(record.get("cwd"), str) and record["cwd"] and not state["cwd"]:
            state["cwd"] = record["cwd"]
        if isinstance(record.get("gitBranch"), str) and record["gitBranch"]:
            state["branch"] = record["gitBranch"]
        if isinstance(record.get("sessionId"), str):
            state["sessionId"] = state["sessionId"] or record["sessionId"]
        if isinstance(record.get("permissionMode"), str):
            self.permissions(record["permissionMode"], None)
        kind = record.get("type")
        if kind == "user":
            self._user(record)
        elif kind == "assistant":
            self._assistant(record)
        elif kind == "system" and record.get("subtype") == "compact_boundary":
            self.emit({"type": "compact_boundary", "summary": "Conversation compacted"})
        elif kind in ("summary", "custom-title", "ai-title"):
            field = {"summary": "summary", "custom-title": "customTitle", "ai-title": "aiTitle"}
            value = record.get(field[kind])
            if isinstance(value, str) and value.strip():
                state["titles"][kind.split("-")[0]] = title_from(value)

    def _user(self, record: dict[str, Any]) -> None:
        message = record.get("message")
        if record.get("isMeta") is True or not isinstance(message, dict):
            return  # injected by Claude Code (caveats, skill text), not the user's words
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        outcome = record.get("toolUseResult")
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                self._tool_result(block, outcome if isinstance(outcome, dict) else {})
        text = text_of([b for b in blocks if isinstance(b, dict) and b.get("type") == "text"])
        if isinstance(content, str):
            text = content
        if not text.strip():
            return
        extra: dict[str, Any] = {"sourceUuid": record.get("uuid")}
        if record.get("isSidechain") is True:
            extra["sidechain"] = True
        elif record.get("isCompactSummary") is True:
            extra["compactSummary"] = True
        else:
            self.state["turn"] = record.get("uuid") or f"L{self._line}"
            if not self.state["titles"].get("first"):
                self.state["titles"]["first"] = title_from(text)
        self.message("user", text, **extra)

    def _assistant(self, record: dict[str, Any]) -> None:
        message = record.get("message")
        if not isinstance(message, dict):
            return
        if message.get("model") != "<synthetic>":  # Claude Code's own canned replies
            self.model(message.get("model"))
        blocks = [b for b in message.get("content") or [] if isinstance(b, dict)]
        text = text_of([b for b in blocks if b.get("type") == "text"])
        sidechain = record.get("isSidechain") is True
        if text.strip():
            extra = {"sidechain": True} if sidechain else {}
            self.message("assistant", text, sourceUuid=record.get("uuid"), **extra)
        for block in blocks:
            if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                self._tool_use(block)
        self._usage(message)

    def _tool_use(self, block: dict[str, Any]) -> None:
        tool = str(block.get("name") or "unknown")
        arguments = block.get("input") if isinstance(block.get("input"), dict) else {}
        self.state["pending"][block["id"]] = tool
        self.operation(block["id"], tool, effect_of(tool), state="started",
                       argsDigest=digest(arguments))  # fmt: skip
        if tool == "TodoWrite" and isinstance(arguments.get("todos"), list):
            todos = [t for t in arguments["todos"] if isinstance(t, dict)]
            self.todos([(str(t.get("id") or n), str(t.get("content") or ""), t.get("status"))
                        for n, t in enumerate(todos, 1)])  # fmt: skip

    def _tool_result(self, block: dict[str, Any], outcome: dict[str, Any]) -> None:
        call_id = str(block.get("tool_use_id") or f"L{self._line}")
        tool = self.state["pending"].pop(call_id, None) or "unknown"
        failed = block.get("is_error") is True
        self.result(call_id, tool, effect_of(tool), text_of(block.get("content")), failed)
        path = outcome.get("filePath")
        if tool in EDIT_TOOLS and not failed and isinstance(path, str):
            before, after, known = edited_contents(tool, outcome)
            self.file_edit(path, call_id, before, after, known)

    def _usage(self, message: dict[str, Any]) -> None:
        """Tokens of each API call once: a streamed reply repeats its usage (growing) on
        every content-block line, so each line adds only what grew since the last one."""
        usage = message.get("usage")
        if not isinstance(usage, dict):
            return
        keys = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
                "output_tokens")  # fmt: skip
        counts = {k: v if isinstance(v := usage.get(k), int) and v > 0 else 0 for k in keys}
        tracked = self.state["usage"]
        message_id = message.get("id")
        if message_id is None or message_id != tracked["id"]:
            if message_id in self.state["recent"]:
                return  # the same reply written again (a resumed session copies history)
            tracked["id"], tracked["seen"] = message_id, dict.fromkeys(keys, 0)
            if message_id is not None:
                self.state["recent"] = [*self.state["recent"], message_id][-RECENT_MESSAGES:]
        grown = {k: max(0, counts[k] - tracked["seen"][k]) for k in keys}
        tracked["seen"] = {k: max(counts[k], tracked["seen"][k]) for k in keys}
        self.cost(
            fresh=grown["input_tokens"],
            cache_write=grown["cache_creation_input_tokens"],
            cache_read=grown["cache_read_input_tokens"],
            output=grown["output_tokens"],
        )
