"""Claude Code transcripts (`~/.claude/projects/<encoded-cwd>/<sessionId>.jsonl`) → items.

One JSON object per line, `type` first among equals: `user` and `assistant` lines carry
`message` (the Anthropic API message: `content` blocks, `model`, `usage`) with `uuid`,
`parentUuid`, `sessionId`, `cwd`, `gitBranch`, `isSidechain`; a tool's outcome comes back
on a `user` line as a `tool_result` block plus `toolUseResult` (for Edit/Write/MultiEdit
the original file and the edit, for TodoWrite the lists). `summary`, `custom-title`,
`ai-title` and `permission-mode` lines carry metadata. The mapping is docs/import.md's.

Planning (2.1): `TaskCreate` / `TaskUpdate` / `TaskList` keep a task list (ids "1", "2", …);
`TodoWrite` (the whole list each time) where tasks are off. A sub-agent's transcript
(`<sessionId>/subagents/agent-<id>.jsonl`; ≤ 2.0 `agent-<id>.jsonl` beside the session)
is all sidechain lines carrying `agentId` and the parent's `sessionId`: parsed alone it is
the child's own conversation, and `state["parent"]` says whose (the importer links it).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from restore.agents.identity import thread_id_for
from restore.agents.parsing import (
    RESULT_CHARS,
    SourceParser,
    called,
    effect,
    text_of,
    title_from,
    truncate,
)

AGENT = "claude-code"
READ_TOOLS = frozenset(
    {
        "Read",
        "Glob",
        "Grep",
        "LS",
        "WebFetch",
        "WebSearch",
        "NotebookRead",
        "TodoRead",
        "BashOutput",
        "ListMcpResourcesTool",
        "ReadMcpResourceTool",
        "Skill",
        "TaskList",
        "TaskGet",
    }
)
IDEMPOTENT_TOOLS = frozenset({"TodoWrite", "ExitPlanMode", "TaskUpdate", "ToolSearch"})
EDIT_TOOLS = frozenset({"Edit", "Write", "MultiEdit"})
TASK_TOOLS = frozenset({"TaskCreate", "TaskUpdate", "TaskList", "TaskGet"})
SUBAGENT_TOOLS = frozenset({"Agent", "Task"})  # `Task` until 2.0, `Agent` since
SHELL_TOOLS = frozenset({"Bash"})
KNOWN_TOOLS = (
    READ_TOOLS
    | IDEMPOTENT_TOOLS
    | EDIT_TOOLS
    | TASK_TOOLS
    | SUBAGENT_TOOLS
    | SHELL_TOOLS
    | {"NotebookEdit", "KillShell", "KillBash", "TaskStop", "EnterPlanMode"}
)
"""Tools whose effect is known; any other is recorded as a side effect and reported
unmapped (MCP tools, `mcp__server__tool`, are side effects by design)."""
RECENT_MESSAGES = 32
HOUR = "ephemeral_1h_input_tokens"
"""Where a reply's usage state keeps the cache writes it saw kept for an hour."""
COMMAND_CHARS = 2_000
LEDGER_MODELS = 64
"""Models whose running totals are followed (`cost-state`): a session uses a handful; the
bound keeps a handed-in transcript from growing the saved parser state."""
_AGENT_ID_LINE = re.compile(r"^agentId: ([A-Za-z0-9_-]{1,64})", re.MULTILINE)
_EXIT_CODE = re.compile(r"^(?:Error: )?Exit code (\d+)")


def effect_of(tool: str) -> str:
    return effect(tool, READ_TOOLS, IDEMPOTENT_TOOLS)


def spawned_agent(text: str, outcome: dict[str, Any]) -> str | None:
    """The sub-agent an Agent/Task result reports: `toolUseResult.agentId`, else the
    `agentId: <id>` line Claude Code puts in the result text for the model."""
    agent_id = outcome.get("agentId")
    if isinstance(agent_id, str) and agent_id:
        return agent_id
    found = _AGENT_ID_LINE.search(text)
    return found.group(1) if found else None


def subagent_session_id(agent_id: str) -> str:
    """The session id a sub-agent's thread is named by (its transcript's file name)."""
    return f"agent-{agent_id}"


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
        after = _replace(
            original, result.get("oldString"), result.get("newString"), result.get("replaceAll")
        )
    else:
        for edit in result.get("edits") or []:
            if after is None or not isinstance(edit, dict):
                break
            after = _replace(
                after, edit.get("old_string"), edit.get("new_string"), edit.get("replace_all")
            )
    return original, after, after is not None


READ_WHOLE = frozenset(
    {"user", "assistant", "cost-state", "system", "summary", "custom-title", "ai-title"}
)
"""Record types `handle` maps from more than their top-level fields."""
READ_OF_ANY = ("type", "subtype", "timestamp", "cwd", "gitBranch", "sessionId", "permissionMode")
"""What `handle` reads of any record."""


class ClaudeCodeParser(SourceParser):
    AGENT = AGENT
    PROVIDER = "anthropic"
    TITLE_ORDER: ClassVar[tuple[str, ...]] = ("custom", "ai", "summary", "first")
    MAPPED: ClassVar[frozenset[str]] = frozenset(
        {
            "user",
            "assistant",
            "summary",
            "custom-title",
            "ai-title",
            "permission-mode",
        }
    )
    IGNORED: ClassVar[dict[str, str]] = {
        # What Claude Code keeps for itself: none of it is conversation, state to restore,
        # or anything a resume needs (the conversation is in the user/assistant lines).
        "record:file-history-snapshot": "Claude Code's own checkpoints for /rewind (backups "
        "under ~/.claude/file-history); file_history comes from the edit tools' results",
        "record:queue-operation": "a prompt queued and dequeued: the prompt itself is the "
        "next user line",
        "record:last-prompt": "the last prompt again, for Claude Code's prompt history",
        "record:atis-latch": "an internal feature latch, no content",
        "record:tools-used": "the tools used so far, by name: each call is its own operation",
        "record:mode": "the session's interaction mode (normal/plan), not a permission",
        "record:api-request": "the wire request sent (deduplicated); its messages are the "
        "user and assistant lines",
        "record:api-request-blob": "part of a recorded wire request",
        "record:api-request-shape": "the shape of a recorded wire request",
        "record:progress": "progress of a running tool or hook, superseded by its result",
        # Attachments: context Claude Code renders into the model's input as
        # <system-reminder> text (environment, dates, listings, nudges).
        "record:attachment:environment": "the environment block of the system prompt",
        "record:attachment:model": "which model answers (the assistant lines name it)",
        "record:attachment:date": "today's date, for the model",
        "record:attachment:deferred_tools_delta": "which tools ToolSearch can load",
        "record:attachment:deferred_tools_record": "which deferred tools were loaded",
        "record:attachment:agent_listing_delta": "which sub-agent types exist",
        "record:attachment:skill_listing": "which skills exist",
        "record:attachment:auto_mode": "guidance for the permission mode",
        "record:attachment:session_context": "git status at the start, for the model",
        "record:attachment:remote_session_change": "commit attribution guidance",
        "record:attachment:prompt_snapshot": "the system prompt as sent",
        "record:attachment:silent_turn_reminder": "a nudge to report progress",
    }

    SPAWN_MARKERS: ClassVar[tuple[bytes, ...]] = (b"agentId", b"tool_result")

    @classmethod
    def spawns(cls, record: dict[str, Any]) -> list[tuple[str, str]]:
        """(agentId, the Agent/Task call) for each sub-agent result on a user line (the
        tool_result whose result names the agent)."""
        message = record.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("content"), list):
            return []
        outcome = record.get("toolUseResult")
        found = []
        for block in message["content"]:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                text = text_of(block.get("content"))
                agent_id = spawned_agent(text, outcome if isinstance(outcome, dict) else {})
                call = block.get("tool_use_id")
                if agent_id and isinstance(call, str):
                    found.append((agent_id, call))
        return found

    def initial(self) -> dict[str, Any]:
        return {
            **super().initial(),
            "usage": {"id": None, "seen": {}},
            "recent": [],
            "tasks": [],
            "calls": {},
            "parent": None,
            "conversation": False,
            "ledger": _no_ledger(),
        }

    def restored(self, state: dict[str, Any]) -> dict[str, Any]:
        """A state saved before Claude Code's totals were read: the replies it counted are
        not in a ledger, so the next totals are only a baseline (`blind`)."""
        return {**super().restored(state), "ledger": state.get("ledger", _no_ledger(blind=True))}

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
        if kind in ("user", "assistant") and not state["conversation"]:
            state["conversation"] = True
            agent_id = record.get("agentId")
            if record.get("isSidechain") is True and isinstance(agent_id, str) and agent_id:
                # A sub-agent's own transcript: its sidechain lines are this thread's
                # conversation, and the session they name is the parent's.
                state["parent"] = {
                    "sessionId": record.get("sessionId"),
                    "toolCallId": None,
                    "agentId": agent_id,
                }
        if kind == "user":
            self._user(record)
        elif kind == "assistant":
            self._assistant(record)
        elif kind == "cost-state":
            self._cost_state(record)
        elif kind == "system" and record.get("subtype") == "compact_boundary":
            self.emit({"type": "compact_boundary", "summary": "Conversation compacted"})
        elif kind in ("summary", "custom-title", "ai-title"):
            field = {"summary": "summary", "custom-title": "customTitle", "ai-title": "aiTitle"}
            value = record.get(field[kind])
            if isinstance(value, str) and value.strip():
                state["titles"][kind.split("-")[0]] = title_from(value)
        elif kind not in self.MAPPED:
            detail = record.get("subtype") if kind == "system" else None
            if kind == "attachment" and isinstance(record.get("attachment"), dict):
                detail = record["attachment"].get("type")
            self.unmapped("record", f"{kind}:{detail}" if detail else kind)

    def read_of(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """A record `handle` only counts (an attachment, Claude Code's API request shapes:
        two thirds of a session's bytes, most of it the system prompt and tool schemas):
        the fields `handle` reads of it."""
        kind = record.get("type")
        if kind in READ_WHOLE:
            return None
        read = {field: record[field] for field in READ_OF_ANY if field in record}
        attachment = record.get("attachment")
        if isinstance(attachment, dict) and "type" in attachment:
            read["attachment"] = {"type": attachment["type"]}
        return read

    def _sidechain(self, record: dict[str, Any]) -> bool:
        """A sidechain line inside a main transcript (older versions wrote sub-agents
        inline): kept, marked, never a turn. In a sub-agent's own file it is the thread."""
        return record.get("isSidechain") is True and self.state["parent"] is None

    def _user(self, record: dict[str, Any]) -> None:
        message = record.get("message")
        if record.get("isMeta") is True or not isinstance(message, dict):
            return  # injected by Claude Code (caveats, skill text), not the user's words
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        outcome = record.get("toolUseResult")
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                self._tool_result(block, outcome)
        text = text_of([b for b in blocks if isinstance(b, dict) and b.get("type") == "text"])
        if isinstance(content, str):
            text = content
        if not text.strip():
            return
        extra: dict[str, Any] = {"sourceUuid": record.get("uuid")}
        if self._sidechain(record):
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
        if text.strip():
            extra = {"sidechain": True} if self._sidechain(record) else {}
            self.message("assistant", text, sourceUuid=record.get("uuid"), **extra)
        for block in blocks:
            if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                self._tool_use(block)
        self._usage(message)

    def _tool_use(self, block: dict[str, Any]) -> None:
        tool = str(block.get("name") or "unknown")
        arguments = raw if isinstance(raw := block.get("input"), dict) else {}
        self.state["pending"][block["id"]] = tool
        if tool not in KNOWN_TOOLS and not tool.startswith("mcp__"):
            self.unmapped("tool", tool)
        extra: dict[str, Any] = {}
        if tool in SHELL_TOOLS and isinstance(arguments.get("command"), str):
            extra["command"] = truncate(arguments["command"], COMMAND_CHARS)
            if isinstance(arguments.get("description"), str):
                extra["description"] = arguments["description"][:COMMAND_CHARS]
        elif tool in EDIT_TOOLS and isinstance(arguments.get("file_path"), str):
            extra["path"] = arguments["file_path"]
        # What the result will not say: a task's fields (the result names only what
        # changed), a sub-agent's edit (its lines carry no toolUseResult).
        if tool in ("TaskCreate", "TaskUpdate"):
            self.state["calls"][block["id"]] = arguments
        elif tool == "TodoWrite" and isinstance(arguments.get("todos"), list):
            # The list once Claude Code accepted it: an invalid one is refused (is_error).
            self.state["calls"][block["id"]] = {"todos": arguments["todos"]}
        elif tool in EDIT_TOOLS or tool in SHELL_TOOLS:
            kept = ("file_path", "run_in_background")
            self.state["calls"][block["id"]] = {k: arguments[k] for k in kept if k in arguments}
        self.operation(
            block["id"], tool, effect_of(tool), state="started", **called(arguments), **extra
        )

    def _tool_result(self, block: dict[str, Any], outcome: Any) -> None:
        call_id = str(block.get("tool_use_id") or f"L{self._line}")
        tool = self.state["pending"].pop(call_id, None) or "unknown"
        arguments = self.state["calls"].pop(call_id, None) or {}
        failed = block.get("is_error") is True
        result = outcome if isinstance(outcome, dict) else {}
        text = text_of(block.get("content"))
        extra: dict[str, Any] = {}
        if tool in SHELL_TOOLS:
            code = _EXIT_CODE.match(text)
            if code:
                extra["exitCode"] = int(code.group(1))
            elif not (failed or result.get("interrupted") or arguments.get("run_in_background")):
                extra["exitCode"] = 0  # Claude Code fails a command that exits non-zero
        elif tool in SUBAGENT_TOOLS and (agent_id := spawned_agent(text, result)):
            child = subagent_session_id(agent_id)
            extra.update(childSessionId=child, childThreadId=thread_id_for(AGENT, child, 1))
        outcome_state = "failed" if failed else "committed"
        self.operation(
            call_id,
            tool,
            effect_of(tool),
            state=outcome_state,
            resultPersisted=True,
            result=truncate(text, RESULT_CHARS),
            **extra,
        )
        path = result.get("filePath", arguments.get("file_path"))
        if tool in EDIT_TOOLS and not failed and isinstance(path, str):
            before, after, known = edited_contents(tool, result)
            self.file_edit(path, call_id, before, after, known)
        elif tool in TASK_TOOLS and not failed:
            self._tasks(tool, arguments, result)
        elif tool == "TodoWrite" and not failed and isinstance(arguments.get("todos"), list):
            todos = [t for t in arguments["todos"] if isinstance(t, dict)]
            self.todos(
                [
                    (str(t.get("id") or n), str(t.get("content") or ""), t.get("status"))
                    for n, t in enumerate(todos, 1)
                ]
            )

    def _tasks(self, tool: str, arguments: dict[str, Any], result: dict[str, Any]) -> None:
        """The task list after a Task tool's result, emitted as the whole list when it
        changed. Ids are Claude Code's ("1", "2", …), listed in its order (by id)."""
        tasks: list[dict[str, Any]] = [dict(task) for task in self.state["tasks"]]
        if tool == "TaskCreate" and isinstance(result.get("task"), dict):
            task = result["task"]
            if isinstance(task.get("id"), str) and all(t["id"] != task["id"] for t in tasks):
                subject = task.get("subject") or arguments.get("subject") or ""
                tasks.append({"id": task["id"], "content": str(subject), "status": "pending"})
        elif tool == "TaskUpdate" and result.get("success") is True:
            task_id = str(result.get("taskId") or arguments.get("taskId") or "")
            change = raw if isinstance(raw := result.get("statusChange"), dict) else {}
            status = change.get("to") or arguments.get("status")
            if status == "deleted":
                tasks = [t for t in tasks if t["id"] != task_id]
            for task in tasks:
                if task["id"] == task_id:
                    if isinstance(arguments.get("subject"), str):
                        task["content"] = arguments["subject"]
                    if isinstance(status, str):
                        task["status"] = status
        elif tool == "TaskList" and isinstance(result.get("tasks"), list):
            listed = [t for t in result["tasks"] if isinstance(t, dict) and t.get("id") is not None]
            tasks = [
                {
                    "id": str(t["id"]),
                    "content": str(t.get("subject") or ""),
                    "status": t.get("status"),
                }
                for t in listed
            ]
        tasks.sort(key=_task_order)
        if tasks != self.state["tasks"]:
            self.state["tasks"] = tasks
            self.todos([(t["id"], t["content"], t["status"]) for t in tasks])

    def _usage(self, message: dict[str, Any]) -> None:
        """Tokens of each API call once: a streamed reply repeats its usage (growing) on
        every content-block line, so each line adds only what grew since the last one."""
        usage = message.get("usage")
        if not isinstance(usage, dict):
            return
        keys = (
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
            "output_tokens",
        )
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
        # The cache writes kept for an hour (`cache_creation`'s split), priced apart; a
        # state saved before this was read has none seen.
        split = usage.get("cache_creation")
        hour = split.get("ephemeral_1h_input_tokens") if isinstance(split, dict) else None
        hour = hour if isinstance(hour, int) and hour > 0 else 0
        grown_hour = max(0, hour - tracked["seen"].get(HOUR, 0))
        tracked["seen"] = {k: max(counts[k], tracked["seen"][k]) for k in keys}
        tracked["seen"][HOUR] = max(hour, tracked["seen"].get(HOUR, 0))
        ledger = self.state.setdefault("ledger", _no_ledger(blind=True))  # older states
        model = self.state["model"] or "unknown"
        if model in ledger["counted"] or len(ledger["counted"]) < LEDGER_MODELS:
            counted = ledger["counted"].setdefault(model, [0, 0, 0, 0])
            for n, key in enumerate(keys):
                counted[n] += grown[key]
        self.cost(
            fresh=grown["input_tokens"],
            cache_write=grown["cache_creation_input_tokens"],
            cache_read=grown["cache_read_input_tokens"],
            output=grown["output_tokens"],
            cache_write_1h=grown_hour,
        )

    def _cost_state(self, record: dict[str, Any]) -> None:
        """Claude Code's own running totals (`cost-state`, written when a run ends; a
        resumed run restores them, `startTime` unchanged): per model, every model call the
        process made, those of its `/compact` among them, which no assistant line holds.
        What they grew by since the last one, less what this transcript's replies counted
        meanwhile, is emitted as `cost_reported` per model: the compactions' calls, and
        the sub-agents' (which their own threads count: the cost subsystem takes those
        out). Nothing is counted twice: the first totals of a ledger (a new `startTime`,
        or totals that went down) only count what exceeds the replies since the last; a
        later one also nets out replies the previous totals had not reached yet."""
        usage = record.get("modelUsage")
        if self.state["parent"] is not None or not isinstance(usage, dict):
            return  # a sub-agent's file: the totals are its parent process's
        rows = [
            (m, row) for m, row in usage.items() if isinstance(m, str) and isinstance(row, dict)
        ]
        reported = {model: _ledger_row(row) for model, row in rows[:LEDGER_MODELS]}
        ledger = self.state.setdefault("ledger", _no_ledger(blind=True))
        if ledger.get("blind"):  # imported before totals were read: they are the baseline
            self.state["ledger"] = {
                **_no_ledger(),
                "start": record.get("startTime"),
                "reported": reported,
            }
            return
        before = ledger["reported"]
        same = ledger["start"] is not None and ledger["start"] == record.get("startTime")
        same = same and all(
            m in reported and all(a <= b for a, b in zip(row, reported[m], strict=True))
            for m, row in before.items()
        )
        left: dict[str, list[int]] = {}
        for model, row in reported.items():
            grew = [
                b - a
                for a, b in zip(before.get(model, [0] * 4) if same else [0] * 4, row, strict=True)
            ]
            counted = ledger["counted"].get(model, [0] * 4)
            fresh, write, read, output = (max(0, g - c) for g, c in zip(grew, counted, strict=True))
            left[model] = [max(0, c - g) for g, c in zip(grew, counted, strict=True)]
            self.cost(
                fresh=fresh,
                cache_write=write,
                cache_read=read,
                output=output,
                model=model,
                kind="cost_reported",
            )
        self.state["ledger"] = {
            "start": record.get("startTime"),
            "reported": reported,
            "counted": left if same else {},
        }


def _no_ledger(*, blind: bool = False) -> dict[str, Any]:
    """What the parser knows of Claude Code's running totals: none seen yet (`start`: the
    totals' `startTime`; `reported`/`counted` per model: [fresh input, cache write,
    cache read, output] as last reported, and as counted from replies since). `blind`:
    the state was saved before totals were read (an older import), so the replies before
    are not in `counted` and the next totals are only a baseline."""
    return {"start": None, "reported": {}, "counted": {}, **({"blind": True} if blind else {})}


def _ledger_row(row: dict[str, Any]) -> list[int]:
    keys = ("inputTokens", "cacheCreationInputTokens", "cacheReadInputTokens", "outputTokens")
    return [int(v) if isinstance(v := row.get(k), int | float) and v > 0 else 0 for k in keys]


def _task_order(task: dict[str, Any]) -> tuple[int, str]:
    """Claude Code numbers tasks "1", "2", …: by number, then by text for any other id."""
    task_id = task["id"]
    return (int(task_id), "") if task_id.isdigit() else (1 << 62, task_id)
