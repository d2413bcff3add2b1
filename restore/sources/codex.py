"""Codex rollouts (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<ts>-<uuid>.jsonl`) → items.

Every line is a `RolloutLine` (codex-rs/protocol): `{timestamp, type, payload}` where
`type` is `session_meta` (first line: id, cwd, git, source), `turn_context` (per turn:
cwd, model, approval_policy, sandbox_policy), `response_item` (the model's history:
`message`, `function_call` / `custom_tool_call` and their outputs, `local_shell_call`,
`reasoning`), `compacted` (a compaction summary) or `event_msg` (`token_count`,
`thread_name_updated`, `user_message`, ...). The mapping is docs/import.md's.
"""

from __future__ import annotations

import posixpath
from typing import Any, ClassVar

import orjson

from restore.sources.common import SourceParser, digest, text_of, title_from

AGENT = "codex"
READ_TOOLS = frozenset({"view_image", "web_search", "read_file", "list_dir", "grep_files"})
IDEMPOTENT_TOOLS = frozenset({"update_plan"})
# Context Codex injects as user messages; none of it is the user's own words.
INJECTED = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions",
            "<permissions instructions>", "<user_shell_command>", "<turn_aborted>")  # fmt: skip
TOTALS = ("input_tokens", "cached_input_tokens", "output_tokens")


def effect_of(tool: str) -> str:
    if tool in READ_TOOLS:
        return "read"
    if tool in IDEMPOTENT_TOOLS:
        return "idempotent"
    return "side_effect"  # shell, apply_patch, MCP tools: assume the worst


def handoff(session_id: str) -> list[str]:
    """The command that continues the session in Codex itself."""
    return ["codex", "resume", session_id]


def patch_changes(patch: str) -> list[tuple[str, str | None, bool]]:
    """(path, contents after, known) per file an apply_patch envelope touches.

    Added files carry their whole contents (`+` lines, each ending in a newline, as
    Codex writes them); deleted ones have none; an update is a diff against contents the
    rollout does not hold, so its result is unknown. A move deletes the old path.
    """
    changes: list[tuple[str, str | None, bool]] = []
    added: list[str] | None = None
    for line in patch.splitlines():
        if line.startswith("*** "):
            if added is not None:
                path = changes.pop()[0]
                changes.append((path, "".join(added), True))
                added = None
            header, _, path = line[4:].partition(": ")
            if header == "Add File":
                changes.append((path, "", True))
                added = []
            elif header == "Delete File":
                changes.append((path, None, True))
            elif header == "Update File":
                changes.append((path, None, False))
            elif header == "Move to" and changes:
                old, _, _ = changes.pop()
                changes += [(old, None, True), (path, None, False)]
        elif added is not None and line.startswith("+"):
            added.append(line[1:] + "\n")
    if added is not None:
        path = changes.pop()[0]
        changes.append((path, "".join(added), True))
    return changes


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return {"raw": raw}
        return value if isinstance(value, dict) else {"value": value}
    return {}


def _policy_name(value: Any) -> str | None:
    """`on-request`, or the variant of a tagged policy (`{"granular": ...}`, `{"type": ...}`)."""
    if isinstance(value, str):
        return value.replace("_", "-")
    if isinstance(value, dict):
        if isinstance(value.get("type"), str):
            return value["type"].replace("_", "-")
        return next(iter(value), None)
    return None


class CodexParser(SourceParser):
    AGENT = AGENT
    TITLE_ORDER: ClassVar[tuple[str, ...]] = ("name", "first")

    def initial(self) -> dict[str, Any]:
        return {**super().initial(), "totals": dict.fromkeys(TOTALS, 0), "metaSeen": False,
                "repoUrl": None, "parent": None}  # fmt: skip

    def handle(self, record: dict[str, Any]) -> None:
        payload = record.get("payload")
        if not isinstance(payload, dict):
            return
        kind = record.get("type")
        if kind == "session_meta":
            self._session_meta(payload)
        elif kind == "turn_context":
            self._turn_context(payload)
        elif kind == "response_item":
            self._response_item(payload)
        elif kind == "compacted" and isinstance(payload.get("message"), str):
            self.emit({"type": "compact_boundary", "summary": payload["message"]})
        elif kind == "event_msg":
            self._event(payload)

    def _session_meta(self, meta: dict[str, Any]) -> None:
        state = self.state
        if state["metaSeen"]:
            return  # a fork or resume may repeat it; the first one is this session's
        state["metaSeen"] = True
        state["sessionId"] = meta.get("id") if isinstance(meta.get("id"), str) else None
        if isinstance(meta.get("cwd"), str) and meta["cwd"]:
            state["cwd"] = meta["cwd"]
        git = meta.get("git") if isinstance(meta.get("git"), dict) else {}
        state["branch"] = git.get("branch") or state["branch"]
        state["commit"] = git.get("commit_hash") or state["commit"]
        state["repoUrl"] = git.get("repository_url")
        source = meta.get("source")
        if isinstance(source, dict) and isinstance(source.get("subagent"), dict):
            spawn = source["subagent"].get("thread_spawn") or {}
            state["parent"] = spawn.get("parent_thread_id")

    def _turn_context(self, context: dict[str, Any]) -> None:
        if isinstance(context.get("cwd"), str) and not self.state["cwd"]:
            self.state["cwd"] = context["cwd"]
        self.model(context.get("model"))
        self.permissions(
            _policy_name(context.get("approval_policy")),
            _policy_name(context.get("sandbox_policy")),
        )

    def _response_item(self, item: dict[str, Any]) -> None:
        kind = item.get("type")
        if kind == "message":
            self._message(item)
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            self._call(item)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            self._output(item)

    def _message(self, item: dict[str, Any]) -> None:
        role = item.get("role")
        text = text_of(item.get("content"))
        if role not in ("user", "assistant") or not text.strip():
            return  # developer/system instructions are Codex's, not the conversation
        if role == "user":
            if text.lstrip().startswith(INJECTED):
                return
            self.state["turn"] = f"L{self._line}"
            if not self.state["titles"].get("first"):
                self.state["titles"]["first"] = title_from(text)
        self.message(role, text)

    def _call(self, item: dict[str, Any]) -> None:
        call_id = str(item.get("call_id") or item.get("id") or f"L{self._line}")
        if item["type"] == "local_shell_call":
            tool, arguments = "local_shell", item.get("action") or {}
        elif item["type"] == "custom_tool_call":  # freeform tools: apply_patch's raw patch
            tool, arguments = str(item.get("name") or "unknown"), {"input": item.get("input")}
        else:
            tool, arguments = str(item.get("name") or "unknown"), _arguments(item.get("arguments"))
        pending: dict[str, Any] = {"tool": tool}
        if tool == "apply_patch" and isinstance(arguments.get("input"), str):
            pending["patch"] = arguments["input"]
        self.state["pending"][call_id] = pending
        self.operation(call_id, tool, effect_of(tool), state="started",
                       argsDigest=digest(arguments))  # fmt: skip
        if tool == "update_plan" and isinstance(arguments.get("plan"), list):
            steps = [s for s in arguments["plan"] if isinstance(s, dict)]
            self.todos([(str(n), str(s.get("step") or ""), s.get("status"))
                        for n, s in enumerate(steps, 1)])  # fmt: skip

    def _output(self, item: dict[str, Any]) -> None:
        call_id = str(item.get("call_id") or f"L{self._line}")
        pending = self.state["pending"].pop(call_id, None) or {"tool": "unknown"}
        output = item.get("output")
        if isinstance(output, dict):  # older rollouts: {content, success}
            failed = output.get("success") is False
            output = output.get("content")
        else:
            failed = False
        tool = pending["tool"]
        self.result(call_id, tool, effect_of(tool), text_of(output), failed)
        if "patch" in pending and not failed:
            cwd = self.state["cwd"] or ""
            for path, after, known in patch_changes(pending["patch"]):
                self.file_edit(posixpath.join(cwd, path), call_id, None, after, known)

    def _event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "token_count":
            self._tokens(event.get("info"))
        elif kind == "thread_name_updated" and isinstance(event.get("thread_name"), str):
            self.state["titles"]["name"] = title_from(event["thread_name"])
        elif kind == "user_message" and isinstance(event.get("message"), str):
            titles = self.state["titles"]  # the transcript's clean copy of the first prompt
            titles["first"] = titles.get("first") or title_from(event["message"])

    def _tokens(self, info: Any) -> None:
        """Codex reports running totals; each report adds what grew since the last one
        (a repeated report adds nothing, totals that restart count from zero)."""
        total = info.get("total_token_usage") if isinstance(info, dict) else None
        if not isinstance(total, dict):
            return
        now = {k: v if isinstance(v := total.get(k), int) and v > 0 else 0 for k in TOTALS}
        before = self.state["totals"]
        restarted = any(now[k] < before[k] for k in TOTALS)
        grown = now if restarted else {k: now[k] - before[k] for k in TOTALS}
        self.state["totals"] = now
        cached = min(grown["cached_input_tokens"], grown["input_tokens"])
        self.cost(fresh=grown["input_tokens"] - cached, cache_write=0, cache_read=cached,
                  output=grown["output_tokens"])  # fmt: skip
