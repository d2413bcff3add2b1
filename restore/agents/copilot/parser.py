"""GitHub Copilot CLI sessions (`~/.copilot/session-state/<sessionId>/events.jsonl`,
store.py) → items.

Copilot CLI is closed source; this mapping is of what 1.0.102 writes (its npm package's
bundled CLI, run against the mock model). Every line is an event `{type, data, id,
timestamp, parentId}`, and a sub-agent's events are in the same file, tagged with a
top-level `agentId`:
- `session.start` (`sessionId`, `copilotVersion`, `selectedModel`, `context {cwd,
  gitRoot, branch, headCommit}`), `session.resume` (a later run continues the file),
  `session.model_change`, `session.shutdown` (the run's totals);
- `user.message` (`content` as typed; `transformedContent` as sent, with Copilot's
  `<current_datetime>`; `source: agent-…` for a sub-agent's task);
- `assistant.message` (`content`, `reasoningText`, `toolRequests [{toolCallId, name,
  arguments}]`, `model`), `assistant.turn_start` / `turn_end`;
- `tool.execution_start`, `tool.execution_complete` (`success`, `result {content,
  detailedContent}` or `error {message}`, `fileEdits [{path, kind}]`, `shellExecution
  {exitCode}` — a command that exits non-zero is `success: true`);
- `session.usage_record` (one model call: `model`, `inputTokens` — cache reads included —,
  `cacheReadTokens`, `cacheWriteTokens`, `outputTokens`, `reasoningTokens`, `cost`, 0 with
  your own key);
- `subagent.started` / `configured` / `completed` (`toolCallId`: the parent's `task` call).
The todo list is not in the file: the `sql` tool keeps it in the session's own SQLite
database (`session.db`, table `todos`), which the store reads as a trailing record. The
mapping is docs/import.md's.
"""

from __future__ import annotations

from typing import Any, ClassVar

from restore.agents.identity import thread_id_for
from restore.agents.parsing import SourceParser, called, effect, remember_file, title_from, truncate

AGENT = "copilot"
READ_TOOLS = frozenset(
    {
        "view",
        "grep",
        "glob",
        "read_bash",
        "list_bash",
        "read_agent",
        "list_agents",
        "fetch_copilot_cli_documentation",
        "session_store_sql",
        "skill",
        "web_fetch",
        "web_search",
    }
)
IDEMPOTENT_TOOLS = frozenset({"update_todo", "report_intent", "exit_plan_mode"})
EDIT_TOOLS = frozenset({"create", "edit"})
SHELL_TOOL = "bash"
SUBAGENT_TOOL = "task"
KNOWN_TOOLS = (
    READ_TOOLS
    | IDEMPOTENT_TOOLS
    | EDIT_TOOLS
    | {
        SHELL_TOOL,
        SUBAGENT_TOOL,
        "stop_bash",
        "write_bash",
        "write_agent",
        "sql",
        "store_memory",
        "apply_patch",
    }
)
"""The tools Copilot CLI 1.0 offers, by what they may change (`sql` writes the session's own
database: its todo list, tables the agent makes); another is a side effect, reported."""
TODO_STATUS = {
    "done": "completed",
    "in_progress": "in_progress",
    "pending": "pending",
    "blocked": "pending",
}
DATETIME = "<current_datetime>"


def effect_of(tool: str) -> str:
    return effect(tool, READ_TOOLS, IDEMPOTENT_TOOLS)


def handoff(session_id: str) -> list[str]:
    """Copilot CLI's own resume (`copilot --resume ID`, checked against 1.0.102's --help:
    "Resume from a previous session (optionally specify existing session ID …)")."""
    return ["copilot", "--resume", session_id]


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


READ_WHOLE = frozenset(
    {
        "session.start",
        "session.resume",
        "user.message",
        "assistant.message",
        "tool.execution_complete",
        "session.usage_record",
        "session.model_change",
        "subagent.started",
        "todos",
    }
)
"""Event types `_event` maps from their data: the rest it reads only the type of."""
READ_OF_ANY = ("type", "timestamp", "agentId")
"""What `handle` (and the importer, the timestamp) reads of any event."""


class CopilotParser(SourceParser):
    AGENT = AGENT
    PROVIDER = None  # your own key's provider: the model is found by name
    TITLE_ORDER: ClassVar[tuple[str, ...]] = ("first",)
    IGNORED: ClassVar[dict[str, str]] = {
        "event:system.message": "the system prompt Copilot sends",
        "event:assistant.turn_start": "a model call begins: its message follows",
        "event:assistant.turn_end": "a model call ended",
        "event:tool.execution_start": "a call starts: the assistant message named it",
        "event:session.shutdown": "the run's totals: each model call is mapped",
        "event:subagent.configured": "a sub-agent's settings (its model change is mapped)",
        "event:subagent.completed": "a sub-agent ended: its last message is mapped",
        "event:session.info": "a notice for the terminal",
    }

    def initial(self) -> dict[str, Any]:
        return {**super().initial(), "children": {}, "streams": {}, "calls": {}, "files": {}}

    def handle(self, record: dict[str, Any]) -> None:
        kind = str(record.get("type"))
        data = _dict(record.get("data"))
        child = record.get("agentId")
        if isinstance(child, str) and child:
            self._in(child)
        try:
            self._event(kind, data)
        finally:
            if isinstance(child, str) and child:
                self._in(None)

    def read_of(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """An event `_event` only counts (the system prompt, ~70% of a session's bytes; the
        run's totals): its type, time and agent, all `handle` reads of it."""
        if record.get("type") in READ_WHOLE:
            return None
        return {field: record[field] for field in READ_OF_ANY if field in record}

    def _in(self, child: str | None) -> None:
        """Swap what is per conversation (the model, the turn) between the session's and a
        sub-agent's, whose events share the file."""
        state, streams = self.state, self.state["streams"]
        current = self._child or ""
        streams[current] = {"model": state["model"], "turn": state["turn"]}
        loaded = streams.get(child or "") or {"model": None, "turn": None}
        state["model"], state["turn"] = loaded["model"], loaded["turn"]
        self.in_child(child)

    def _event(self, kind: str, data: dict[str, Any]) -> None:
        if kind in ("session.start", "session.resume"):
            self._session(data)
        elif kind == "user.message":
            self._user(data)
        elif kind == "assistant.message":
            self._assistant(data)
        elif kind == "tool.execution_complete":
            self._complete(data)
        elif kind == "session.usage_record":
            self._usage(_dict(data.get("usage")))
        elif kind == "session.model_change":
            self.model(data.get("newModel"))
        elif kind == "subagent.started":
            self._subagent(data)
        elif kind == "todos":
            self._todos(data)
        elif kind.startswith("assistant.") and kind.endswith(("_delta", ".reasoning")):
            return  # streaming pieces (kept out of the file: ephemeral)
        else:
            self.unmapped("event", kind)

    def _session(self, data: dict[str, Any]) -> None:
        state = self.state
        state["sessionId"] = state["sessionId"] or data.get("sessionId")
        context = _dict(data.get("context"))
        for key, field in (("cwd", "cwd"), ("branch", "branch"), ("commit", "headCommit")):
            value = context.get(field)
            if isinstance(value, str) and value and not state[key]:
                state[key] = value
        self.model(data.get("selectedModel"))

    # --- messages -------------------------------------------------------------------------

    def _user(self, data: dict[str, Any]) -> None:
        text = data.get("content")
        if not isinstance(text, str) or not text.strip():
            return
        if text.lstrip().startswith(DATETIME):
            return  # Copilot's own context, not the person's words
        message = data.get("messageId")
        self.state["turn"] = message if isinstance(message, str) else self._key
        titled = self._child is not None or self.state["titles"].get("first")
        if not titled and not text.lstrip().startswith("/"):
            self.state["titles"]["first"] = title_from(text)
        self.message("user", text)

    def _assistant(self, data: dict[str, Any]) -> None:
        self.model(data.get("model"))
        thought = data.get("reasoningText")
        if isinstance(thought, str) and thought.strip():
            self.message("assistant", thought, thought=True)
        text = data.get("content")
        if isinstance(text, str) and text.strip():
            self.message("assistant", text)
        for request in data.get("toolRequests") or []:
            if isinstance(request, dict):
                self._call(request)

    def _call(self, request: dict[str, Any]) -> None:
        tool = str(request.get("name") or "unknown")
        call_id = str(request.get("toolCallId") or self._key)
        arguments = _dict(request.get("arguments"))
        if tool not in KNOWN_TOOLS:
            self.unmapped("tool", tool)
        extra = self.call_fields(tool, arguments, (SHELL_TOOL,), EDIT_TOOLS, "path")
        self.state["calls"][call_id] = {"tool": tool, "arguments": arguments}
        self.operation(
            call_id, tool, effect_of(tool), state="started", **called(arguments), **extra
        )

    def _complete(self, data: dict[str, Any]) -> None:
        call_id = str(data.get("toolCallId") or self._key)
        call = self.state["calls"].pop(call_id, None) or {}
        tool = str(call.get("tool") or "unknown")
        arguments = _dict(call.get("arguments"))
        failed = data.get("success") is not True
        result, error = _dict(data.get("result")), _dict(data.get("error"))
        text = result.get("content") if not failed else error.get("message")
        text = text if isinstance(text, str) else ""
        extra: dict[str, Any] = {}
        code = _dict(data.get("shellExecution")).get("exitCode")
        if tool == SHELL_TOOL and isinstance(code, int) and not isinstance(code, bool):
            extra["exitCode"] = code
            failed = failed or code != 0  # Copilot says `success: true` whatever the exit
        elif tool == SUBAGENT_TOOL:
            child = next(
                (
                    c
                    for c, known in self.state["children"].items()
                    if known.get("toolCallId") == call_id
                ),
                None,
            )
            if child is not None:
                extra.update(childSessionId=child, childThreadId=thread_id_for(AGENT, child, 1))
        self.result(call_id, tool, effect_of(tool), text, failed, **extra)
        if not failed and tool in EDIT_TOOLS:
            self._edit(call_id, tool, arguments, result)

    def _edit(
        self, call_id: str, tool: str, arguments: dict[str, Any], result: dict[str, Any]
    ) -> None:
        """create: the whole file (it did not exist); edit: one string replaced, known when
        the session wrote the file before, else only Copilot's diff."""
        path = arguments.get("path")
        if not isinstance(path, str) or not path:
            return
        path = self.in_cwd(path)
        files = self.state["files"]
        diff = (
            result.get("detailedContent")
            if isinstance(result.get("detailedContent"), str)
            else None
        )
        if tool == "create" and isinstance(arguments.get("file_text"), str):
            after = arguments["file_text"]
            self.file_edit(path, call_id, None, after, True, kind="create")
            remember_file(self.state["files"], path, after)
            return
        before, after = files.get(path), None
        old, new = arguments.get("old_str"), arguments.get("new_str")
        if (
            isinstance(before, str)
            and isinstance(old, str)
            and isinstance(new, str)
            and (before.count(old) == 1)
        ):
            after = before.replace(old, new, 1)
        known = after is not None
        extra: dict[str, Any] = {"kind": tool}
        if diff:
            extra["diff"] = truncate(diff, 20_000)
        self.file_edit(path, call_id, before if known else None, after, known, **extra)
        remember_file(self.state["files"], path, after)

    # --- model calls, sub-agents, todos ---------------------------------------------------

    def _usage(self, usage: dict[str, Any]) -> None:
        """One model call: `inputTokens` holds the cache reads and writes; reasoning is
        billed as output."""
        self.model(usage.get("model"))
        read, write = _int(usage.get("cacheReadTokens")), _int(usage.get("cacheWriteTokens"))
        fresh = max(_int(usage.get("inputTokens")) - read - write, 0)
        output = _int(usage.get("outputTokens")) + _int(usage.get("reasoningTokens"))
        self.cost(fresh=fresh, cache_write=write, cache_read=read, output=output)

    def _subagent(self, data: dict[str, Any]) -> None:
        """A sub-agent started: its events (tagged with its `agentId`) become its thread,
        under the parent's `task` call."""
        child = self._child
        if child is None:
            return
        title = data.get("agentDescription") or data.get("agentDisplayName")
        self.state["children"][child] = {
            "toolCallId": data.get("toolCallId") if isinstance(data.get("toolCallId"),
                                                               str) else None,
            "title": title_from(title) if isinstance(title, str) and title.strip() else None,
        }  # fmt: skip

    def _todos(self, data: dict[str, Any]) -> None:
        """The session database's `todos` table (store.py reads it after the file)."""
        rows = [r for r in data.get("todos") or [] if isinstance(r, dict)]
        self.todos(
            [
                (
                    str(r.get("id") or n),
                    str(r.get("title") or ""),
                    TODO_STATUS.get(str(r.get("status")), "pending"),
                )
                for n, r in enumerate(rows, 1)
            ]
        )
