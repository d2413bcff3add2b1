"""Qwen Code transcripts (`~/.qwen/projects/<cwd with every non-alphanumeric character as
->/chats/<sessionId>.jsonl`, store.py) → items.

Qwen Code began as a fork of Gemini CLI; its 0.24 transcripts are Claude Code's shape with
Gemini's content (packages/core/src/services/chatRecordingService.ts): one record per line,
`{uuid, parentUuid, sessionId, timestamp, type, cwd, version, gitBranch}` and
- `user`: `message {role, parts}` (the person's text; `subtype: notification` a background
  sub-agent's report as a `<task-notification>`; `mid_turn_user_message` text sent while
  the agent works);
- `assistant`: `model`, `message.parts` (`text`, `thought: true` reasoning,
  `functionCall {id, name, args}`), `usageMetadata` (Gemini's);
- `tool_result`: the call's `functionResponse` and `toolCallResult {callId, status:
  success | error | cancelled, resultDisplay, errorType}` (write_file / edit: a FileDiff
  with `originalContent` and `newContent`; run_shell_command: `exitCode`; todo_write:
  `todos`; agent: the sub-agent it launched);
- `system` with a `subtype`: `ui_telemetry` (`qwen-code.api_response`: every model call's
  tokens, the sub-agents' and Qwen's own side calls too; `qwen-code.tool_call`),
  `custom_title`, `chat_compression`, `session_model`, `rewind`, `attribution_snapshot`,
  `file_history_snapshot`, `slash_command`, `turn_result`, … (IGNORED says why each one
  that is not mapped is not).
A sub-agent writes `subagents/<parent sessionId>/agent-<agentId>.jsonl` (its lines carry
`agentId` and `isSidechain`) with an `agent-<agentId>.meta.json` beside it naming the
parent's call (`toolUseId`). The mapping is docs/import.md's.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from restore.agents.identity import thread_id_for
from restore.agents.parsing import (
    SourceParser,
    called,
    effect,
    text_of,
    title_from,
)

AGENT = "qwen-code"
READ_TOOLS = frozenset(
    {
        "read_file",
        "grep_search",
        "glob",
        "list_directory",
        "web_fetch",
        "web_search",
        "lsp",
        "zoom_image",
        "list_agents",
        "get_goal",
        "tool_search",
        "read_mcp_resource",
        "task_list",
        "cron_list",
        "skill",
        "ask_user_question",
    }
)
IDEMPOTENT_TOOLS = frozenset(
    {
        "todo_write",
        "exit_plan_mode",
        "enter_plan_mode",
        "task_update",
        "update_goal",
        "report_findings",
        "record_artifact",
        "record_source",
    }
)
EDIT_TOOLS = frozenset({"write_file", "edit", "notebook_edit"})
SHELL_TOOL = "run_shell_command"
SUBAGENT_TOOL = "agent"
KNOWN_TOOLS = (
    READ_TOOLS
    | IDEMPOTENT_TOOLS
    | EDIT_TOOLS
    | {
        SHELL_TOOL,
        SUBAGENT_TOOL,
        "save_memory",
        "send_message",
        "task_stop",
        "task_create",
        "cron_create",
        "cron_delete",
        "loop_wakeup",
        "monitor",
        "tool_call",
        "exec",
        "enter_worktree",
        "exit_worktree",
        "create_sub_session",
        "image_gen",
        "workflow",
        "artifact",
        "structured_output",
        "team_create",
        "team_delete",
        "team_plan_approval",
        "request_shutdown",
    }
)
"""The tools Qwen Code 0.24 registers (its ToolNames), by what they may change; another (an
MCP tool, a newer tool) is a side effect, and reported unmapped."""
FINAL = {"success": False, "error": True, "cancelled": True}
_TASK_ID = re.compile(r"task_id: (\S+)")


def effect_of(tool: str) -> str:
    return effect(tool, READ_TOOLS, IDEMPOTENT_TOOLS)


def handoff(session_id: str) -> list[str]:
    """The command that continues the session in Qwen Code itself (`qwen --resume ID`,
    checked against 0.24.4's `--help`), run in its project directory (Qwen looks sessions
    up per project)."""
    return ["qwen", "--resume", session_id]


def subagent_session_id(agent_id: str) -> str:
    """A sub-agent's session id: its transcript's name (`agent-<agentId>`)."""
    return f"agent-{agent_id}"


class QwenCodeParser(SourceParser):
    AGENT = AGENT
    PROVIDER = None  # Qwen Code talks to any OpenAI-compatible provider: found by model
    TITLE_ORDER: ClassVar[tuple[str, ...]] = ("custom", "first")
    IGNORED: ClassVar[dict[str, str]] = {
        "system:attribution_snapshot": "which files the agent and the person changed, for "
        "Qwen's commit attribution: the edits are mapped from their tool calls",
        "system:file_history_snapshot": "file backups for Qwen's /rewind",
        "system:turn_result": "a turn's stats (the calls and tokens are mapped one by one)",
        "system:session_source": "where the session came from (CLI, IDE, …)",
        "system:slash_command": "a /command the person ran and its output for the terminal UI",
        "system:at_command": "an @file the person named: the prompt that follows holds it",
        "system:rewind": "an interactive /rewind drops turns from Qwen's history; the thread "
        "keeps them and goes on with what follows",
        "system:branch_checkpoint": "a point Qwen can branch from (its /branch)",
        "system:background_task_completed": "a background task ended: its notification, "
        "which follows, is mapped",
        "system:goal_state": "the goal runtime's state (the goal tools' calls are mapped)",
        "system:goal_runtime": "the goal runtime's bookkeeping",
        "system:goal_turn_end": "the goal runtime's bookkeeping",
        "telemetry:qwen-code.tool_call": "a tool call's timing: its outcome is the tool_result's",
    }

    SPAWN_MARKERS: ClassVar[tuple[bytes, ...]] = ()  # the sidecar names the call

    def initial(self) -> dict[str, Any]:
        return {**super().initial(), "parent": None, "calls": {}, "sidechain": False}

    def handle(self, record: dict[str, Any]) -> None:
        state = self.state
        state["sessionId"] = state["sessionId"] or record.get("sessionId")
        if isinstance(record.get("cwd"), str) and record["cwd"]:
            state["cwd"] = state["cwd"] or record["cwd"]
        if isinstance(record.get("gitBranch"), str) and record["gitBranch"]:
            state["branch"] = state["branch"] or record["gitBranch"]
        agent_id = record.get("agentId")
        if record.get("isSidechain") is True and isinstance(agent_id, str) and agent_id:
            state["sidechain"] = True
            if state["parent"] is None:
                parent = record.get("sessionId")
                state["parent"] = {
                    "sessionId": parent if isinstance(parent, str) else None,
                    "toolCallId": None,
                    "agentId": agent_id,
                }
        kind = record.get("type")
        if kind == "user":
            self._user(record)
        elif kind == "assistant":
            self._assistant(record)
        elif kind == "tool_result":
            self._tool_result(record)
        elif kind == "system":
            self._system(record)
        else:
            self.unmapped("record", kind)

    # --- messages ---------------------------------------------------------------------------

    def _user(self, record: dict[str, Any]) -> None:
        parts = (record.get("message") or {}).get("parts")
        text = text_of(parts)
        if not text.strip():
            return
        subtype = record.get("subtype")
        if subtype == "notification":
            # A background sub-agent's report, as Qwen hands it to the model: not the person.
            self.message("user", text, fromAgent=_tag(text, "task-id") or "agent")
            return
        if subtype not in (None, "mid_turn_user_message"):
            self.unmapped("record", f"user:{subtype}")
        uuid = record.get("uuid")
        self.state["turn"] = uuid if isinstance(uuid, str) else self._key
        if not self.state["titles"].get("first") and not text.lstrip().startswith("/"):
            self.state["titles"]["first"] = title_from(text)
        self.message("user", text)

    def _assistant(self, record: dict[str, Any]) -> None:
        self.model(record.get("model"))
        for part in (record.get("message") or {}).get("parts") or []:
            if not isinstance(part, dict):
                continue
            text = part.get("text")
            if isinstance(text, str) and text.strip():
                if part.get("thought") is True:
                    self.message("assistant", text, thought=True)
                else:
                    self.message("assistant", text)
            call = part.get("functionCall")
            if isinstance(call, dict):
                self._call(call)
        usage = record.get("usageMetadata")
        if self.state["sidechain"] and isinstance(usage, dict):
            # A sub-agent's file has no telemetry of its own (its calls are in the parent's
            # file, which does not count them): its replies' usage is its cost.
            self._tokens(
                usage.get("promptTokenCount"),
                usage.get("cachedContentTokenCount"),
                usage.get("candidatesTokenCount"),
                usage.get("thoughtsTokenCount"),
            )

    def _call(self, call: dict[str, Any]) -> None:
        tool = str(call.get("name") or "unknown")
        call_id = str(call.get("id") or self._key)
        arguments = _dict(call.get("args"))
        if tool not in KNOWN_TOOLS:
            self.unmapped("tool", tool)
        extra = self.call_fields(tool, arguments, (SHELL_TOOL,), EDIT_TOOLS, "file_path")
        self.state["calls"][call_id] = {"tool": tool, "todos": arguments.get("todos")}
        self.operation(
            call_id, tool, effect_of(tool), state="started", **called(arguments), **extra
        )

    def _tool_result(self, record: dict[str, Any]) -> None:
        outcome = _dict(record.get("toolCallResult"))
        call_id = str(outcome.get("callId") or self._key)
        call = self.state["calls"].pop(call_id, None) or {}
        responses = [
            p.get("functionResponse")
            for p in (record.get("message") or {}).get("parts") or []
            if isinstance(p, dict)
        ]
        response = next((r for r in responses if isinstance(r, dict)), {})
        tool = str(call.get("tool") or response.get("name") or "unknown")
        answer = _dict(response.get("response"))
        output, error = answer.get("output"), answer.get("error")
        text = output if isinstance(output, str) else error if isinstance(error, str) else ""
        failed = FINAL.get(str(outcome.get("status")), True)
        display = outcome.get("resultDisplay")
        extra: dict[str, Any] = {}
        if tool == SHELL_TOOL and isinstance(display, dict):
            code = display.get("exitCode")
            if isinstance(code, int) and not isinstance(code, bool):
                extra["exitCode"] = code
                failed = failed or code != 0
        elif tool == SUBAGENT_TOOL and not failed:
            launched = _TASK_ID.search(text)
            name = display.get("subagentName") if isinstance(display, dict) else None
            agent_id = (
                launched.group(1)
                if launched
                else (f"{name}-{call_id}" if isinstance(name, str) else None)
            )
            if agent_id:
                child = subagent_session_id(agent_id)
                extra.update(childSessionId=child, childThreadId=thread_id_for(AGENT, child, 1))
        self.result(call_id, tool, effect_of(tool), text, failed, **extra)
        if failed:
            return
        if tool in ("write_file", "edit") and isinstance(display, dict):
            self._edit(call_id, tool, display, created=text.startswith("Successfully created"))
        elif tool == "todo_write":
            todos = display.get("todos") if isinstance(display, dict) else None
            todos = todos if isinstance(todos, list) else call.get("todos")
            if isinstance(todos, list):
                self.todos(
                    [
                        (str(t.get("id") or n), str(t.get("content") or ""), t.get("status"))
                        for n, t in enumerate(todos, 1)
                        if isinstance(t, dict)
                    ]
                )

    def _edit(self, call_id: str, tool: str, diff: dict[str, Any], *, created: bool) -> None:
        """The FileDiff Qwen shows: the file before (`originalContent`, empty for a file
        write_file created: "Successfully created …") and after (`newContent`, as written)."""
        path = diff.get("filePath")
        if not isinstance(path, str) or not path:
            return
        after = diff.get("newContent")
        before = diff.get("originalContent")
        known = isinstance(after, str) and isinstance(before, str)
        self.file_edit(
            self.in_cwd(path),
            call_id,
            None if created else before,
            after if known else None,
            known,
            kind=tool,
        )

    # --- system records ---------------------------------------------------------------------

    def _system(self, record: dict[str, Any]) -> None:
        subtype = record.get("subtype")
        payload = _dict(record.get("systemPayload"))
        if subtype == "ui_telemetry":
            event = _dict(payload.get("uiEvent"))
            name = event.get("event.name")
            if name == "qwen-code.api_response":
                self._api_response(event)
            else:
                self.unmapped("telemetry", name)
        elif subtype == "custom_title":
            title = payload.get("customTitle")
            if isinstance(title, str) and title.strip():
                self.state["titles"]["custom"] = title_from(title)
        elif subtype == "chat_compression":
            summary = payload.get("summary") or payload.get("compressedHistorySummary")
            self.emit(
                {
                    "type": "compact_boundary",
                    "summary": summary
                    if isinstance(summary, str) and summary
                    else "Conversation compressed",
                }
            )
        elif subtype == "session_model":
            self.model(payload.get("model") or payload.get("modelId"))
        else:
            self.unmapped("system", subtype)

    def _api_response(self, event: dict[str, Any]) -> None:
        """Every model call of the session's own: a sub-agent's (its prompt id names the
        agent: `<session>#<agentId>#…`) is its own thread's, counted from its own file."""
        prompt = event.get("prompt_id")
        if isinstance(prompt, str) and "#" in prompt:
            segment = prompt.split("#", 2)[1]
            if segment:
                return
        self.model(event.get("model"))
        self._tokens(
            event.get("input_token_count"),
            event.get("cached_content_token_count"),
            event.get("output_token_count"),
            event.get("thoughts_token_count"),
        )

    def _tokens(self, prompt: Any, cached: Any, output: Any, thoughts: Any) -> None:
        """Gemini's counts: the prompt includes what the cache served; thoughts are billed
        as output."""
        count = [
            v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0
            for v in (prompt, cached, output, thoughts)
        ]
        read = min(count[1], count[0])
        self.cost(fresh=count[0] - read, cache_write=0, cache_read=read, output=count[2] + count[3])


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _tag(text: str, name: str) -> str | None:
    found = re.search(rf"<{name}>([^<]{{1,200}})</{name}>", text)
    return found.group(1) if found else None
