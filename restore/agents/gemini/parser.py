"""Gemini CLI sessions (`$GEMINI_CLI_HOME/.gemini/tmp/<project>/chats/session-*.jsonl`) → items.

Gemini CLI (packages/core/src/services/chatRecordingService.ts) appends one JSON object
per line:

- the session's metadata, first: `{sessionId, projectHash, startTime, lastUpdated, kind:
  main | subagent, directories?, summary?}` — written again, with the same `sessionId`,
  when a later run resumes into the same file;
- a message `{id, timestamp, type: user | gemini | info | error | warning, content (Gemini
  API parts), displayContent?}`; `gemini` ones add `model`, `thoughts [{subject,
  description}]`, `tokens {input, output, cached, thoughts, tool, total}` and `toolCalls
  [{id, name, args, status, result (function response parts), resultDisplay, agentId?}]`.
  A message is appended again, whole, whenever it changes (its tokens arrive, its tool
  calls finish): the same `id` on a later line, so each line maps only what is new;
- `{"$set": {…}}`: metadata (`lastUpdated`, `summary`, `directories`, `sessionId`,
  `memoryScratchpad`) and `messages`, the whole history as the model sees it next,
  written at startup, on resume and after a compression (a `<state_snapshot>` summary in
  place of what it replaced): it repeats messages already mapped, so only a summary is
  taken from it;
- `{"$rewindTo": id}`: an interactive /rewind.

Up to 0.38 the same `ConversationRecord` was one JSON document, `session-*.json`,
rewritten on every change; restore/imports/parse.py feeds its metadata and then each of
its messages as a record. The mapping is docs/import.md's.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any, ClassVar

import orjson

from restore.agents.identity import thread_id_for
from restore.agents.parsing import (
    RESULT_CHARS,
    SourceParser,
    called,
    effect,
    normalize_ts,
    title_from,
    truncate,
)

AGENT = "gemini"
READ_TOOLS = frozenset(
    {
        "read_file",
        "read_many_files",
        "list_directory",
        "glob",
        "grep_search",
        "search_file_content",
        "web_fetch",
        "google_web_search",
        "get_internal_docs",
        "list_background_processes",
        "read_background_output",
        "read_mcp_resource",
        "list_mcp_resources",
        "activate_skill",
        "ask_user",
    }
)
"""Tools that change nothing in the workspace (`search_file_content`: grep_search's name
before 0.2x; `ask_user` asks the person a question)."""
IDEMPOTENT_TOOLS = frozenset(
    {
        "write_todos",
        "update_topic",
        "enter_plan_mode",
        "exit_plan_mode",
        "complete_task",
    }
)
"""Safe to repeat: the todo list (the whole list each time), the narrative topic, the
plan-mode switches, a sub-agent's final answer."""
EDIT_TOOLS = frozenset({"write_file", "replace"})
SHELL_TOOL = "run_shell_command"
SUBAGENT_TOOL = "invoke_agent"
KNOWN_TOOLS = (
    READ_TOOLS | IDEMPOTENT_TOOLS | EDIT_TOOLS | {SHELL_TOOL, SUBAGENT_TOOL, "save_memory"}
)
"""Tools whose effect is known (`save_memory`: until 0.5x). Any other is recorded as a
side effect and reported unmapped (MCP tools included: their effect is unknowable)."""
FINAL = {"success": False, "error": True, "cancelled": True}
"""A tool call's final statuses (→ failed?); before them it is validating, scheduled,
awaiting_approval or executing."""
INJECTED = ("<session_context>", "<hook_context>")
"""User-role text Gemini CLI writes itself: the environment it primes a session with, hook
output. Not the person's words."""
SUMMARY = "<state_snapshot>"
"""How a compression's summary starts (chatCompressionService), in place of the history."""
OPEN_MESSAGES = 16
"""Messages whose progress is remembered: Gemini only ever rewrites its latest one."""
COMMAND_CHARS = 2_000
_EXIT_CODE = re.compile(r"^Exit Code: (-?\d+)\s*$", re.MULTILINE)
_WORKSPACE = re.compile(
    r"\*\*Workspace Directories:\*\*\n\s*- (?P<new>[^\n]+)"
    r"|I'm currently working in the directory: (?P<one>[^\n]+)"
    r"|I'm currently working in the following directories:\n\s*- (?P<many>[^\n]+)"
)
"""Where the session runs, as the environment context says it (0.3x on; before: the last
two): the first workspace directory is the one Gemini CLI was started in."""


def effect_of(tool: str) -> str:
    return effect(tool, READ_TOOLS, IDEMPOTENT_TOOLS)


def handoff(session_id: str) -> list[str]:
    """The command that continues the session in Gemini CLI itself (run in its project
    directory: Gemini looks a session up among that project's)."""
    return ["gemini", "--resume", session_id]


def text_of(content: Any) -> str:
    """The text of Gemini API parts (a string, one part or a list), thoughts left out."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return ""
    texts = []
    for part in content:
        if isinstance(part, dict) and not part.get("thought"):
            part = part.get("text")
        if isinstance(part, str):
            texts.append(part)
    return "\n".join(text for text in texts if text)


def result_text(call: dict[str, Any]) -> str:
    """What a tool call answered the model: its function responses' output (or error)."""
    result = call.get("result")
    parts = result if isinstance(result, list) else [result]
    texts = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        response = part.get("functionResponse")
        if isinstance(response, dict):
            body = response.get("response")
            value = body.get("output", body.get("error")) if isinstance(body, dict) else body
            if isinstance(value, str):
                texts.append(value)
            elif value is not None:
                texts.append(orjson.dumps(value).decode())
        elif isinstance(part.get("text"), str):
            texts.append(part["text"])
    if not texts and isinstance(call.get("resultDisplay"), str):
        texts.append(call["resultDisplay"])
    return "\n".join(texts)


def todo_entries(todos: Any) -> list[tuple[str, str, Any]]:
    """write_todos' list as (id, content, status); `cancelled` and `blocked` (which
    sessiond's three statuses lack) stay pending, saying so in the content."""
    entries = []
    for n, todo in enumerate(t for t in todos if isinstance(t, dict)):
        content, status = str(todo.get("description") or ""), todo.get("status")
        if status in ("cancelled", "blocked"):
            content, status = f"{content} ({status})", "pending"
        entries.append((str(n + 1), content, status))
    return entries


class GeminiParser(SourceParser):
    AGENT = AGENT
    PROVIDER = "google"
    TITLE_ORDER: ClassVar[tuple[str, ...]] = ("summary", "first")
    IGNORED: ClassVar[dict[str, str]] = {
        "record:$rewindTo": "an interactive /rewind drops a message and those after it from "
        "Gemini's history; the thread keeps them (a rewind_boundary needs the store's seq, "
        "which a source line does not have) and goes on with what follows",
        "record:$set.memoryScratchpad": "workflow notes Gemini keeps for its own memory "
        "extraction (tool sequence, touched paths): derived from the conversation",
    }

    SPAWN_MARKERS: ClassVar[tuple[bytes, ...]] = (b"agentId", b"invoke_agent")

    @classmethod
    def spawns(cls, record: dict[str, Any]) -> list[tuple[str, str]]:
        """(the sub-agent's session id, the invoke_agent call) for each finished call of
        a parent's `gemini` message that names the sub-agent's session (`agentId`)."""
        calls = record.get("toolCalls") if record.get("type") == "gemini" else None
        named = [c for c in calls or [] if isinstance(c, dict) and c.get("name") == SUBAGENT_TOOL]
        return [
            (c["agentId"], c["id"])
            for c in named
            if isinstance(c.get("agentId"), str) and isinstance(c.get("id"), str)
        ]

    def initial(self) -> dict[str, Any]:
        return {**super().initial(), "kind": None, "open": {}, "compacted": None, "parent": None}

    def handle(self, record: dict[str, Any]) -> None:
        if isinstance(record.get("id"), str):
            self._message(record)
        elif isinstance(record.get("$set"), dict):
            self._set(record["$set"])
        elif isinstance(record.get("$rewindTo"), str):
            self.unmapped("record", "$rewindTo")
        elif isinstance(record.get("sessionId"), str):
            self._meta(record)
        else:
            self.unmapped("record", next(iter(record), "empty"))

    # --- metadata ---------------------------------------------------------------------------

    def _meta(self, record: dict[str, Any]) -> None:
        """The first line (again, unchanged, when a resumed run writes into this file); a
        one-line legacy record also holds the messages."""
        state = self.state
        if state["sessionId"] is None:
            state["sessionId"] = record["sessionId"]
            state["kind"] = raw if isinstance(raw := record.get("kind"), str) else None
            if state["kind"] == "subagent":
                # A sub-agent's own session (`chats/<parent id>/<its id>.jsonl`): its records
                # do not name the parent, its folder does (the importer reads it there).
                state["parent"] = {"sessionId": None, "toolCallId": None}
            started = normalize_ts(record.get("startTime"))
            if started and not state["created"]:
                state["created"] = state["lastTs"] = started
        self._directories(record.get("directories"))
        self._summary(record.get("summary"))
        for message in record.get("messages") or []:
            if isinstance(message, dict) and isinstance(message.get("id"), str):
                self._message(message)

    def _set(self, updates: dict[str, Any]) -> None:
        for key, value in updates.items():
            if key == "messages" and isinstance(value, list):
                self._history(value)
            elif key == "summary":
                self._summary(value)
            elif key == "directories":
                self._directories(value)
            elif key not in ("lastUpdated", "sessionId", "startTime", "projectHash", "kind"):
                self.unmapped("record", f"$set.{key}")

    def _summary(self, value: Any) -> None:
        """Gemini's one-line summary of a session; a sub-agent's is its final answer."""
        if isinstance(value, str) and value.strip() and self.state["kind"] != "subagent":
            self.state["titles"]["summary"] = title_from(value)

    def _directories(self, value: Any) -> None:
        if isinstance(value, list) and value and isinstance(value[0], str) and value[0]:
            self.state["cwd"] = self.state["cwd"] or value[0]

    def _history(self, messages: list[Any]) -> None:
        """The history restated: already mapped message by message, but for the context
        Gemini primes it with (where the session runs) and a compression's summary."""
        for message in messages:
            if not isinstance(message, dict) or message.get("type") != "user":
                continue
            text = text_of(message.get("content")).strip()
            if text.startswith("<session_context>") and not self.state["cwd"]:
                found = _WORKSPACE.search(text)
                if found:
                    self.state["cwd"] = next(v for v in found.groups() if v).strip()
            elif text.startswith(SUMMARY) and message.get("id") != self.state["compacted"]:
                self.state["compacted"] = message.get("id")
                stamp = normalize_ts(message.get("timestamp"))
                if stamp and stamp > (self.state["lastTs"] or ""):
                    self.state["lastTs"] = stamp
                self.emit({"type": "compact_boundary", "summary": truncate(text, 1_000_000)})

    # --- messages ---------------------------------------------------------------------------

    def _message(self, record: dict[str, Any]) -> None:
        """A message, or a later copy of one: only what it adds is mapped."""
        message_id = record["id"]
        opened = self.state["open"]
        progress = opened.get(message_id)
        if progress is None:
            progress = opened[message_id] = {}
            while len(opened) > OPEN_MESSAGES:
                del opened[next(iter(opened))]
        kind = record.get("type")
        if kind == "user":
            self._user(message_id, record, progress)
        elif kind == "gemini":
            self._gemini(record, progress)
        elif kind in ("info", "warning", "error"):
            if not progress.get("text"):
                progress["text"] = True
                text = text_of(record.get("content"))
                if text.strip():
                    self.message("system", text, level=kind)
        else:
            self.unmapped("record", f"message:{kind}")

    def _user(self, message_id: str, record: dict[str, Any], progress: dict[str, Any]) -> None:
        if progress.get("text"):
            return
        progress["text"] = True
        display = record.get("displayContent")
        text = text_of(display if display else record.get("content"))
        if not text.strip() or text.lstrip().startswith(INJECTED):
            return  # a tool's response (it is in the call's result), or Gemini's own context
        self.state["turn"] = message_id
        if not self.state["titles"].get("first") and not text.lstrip().startswith(("/", "?")):
            self.state["titles"]["first"] = title_from(text)
        self.message("user", text)

    def _gemini(self, record: dict[str, Any], progress: dict[str, Any]) -> None:
        self.model(record.get("model"))
        thoughts = [t for t in record.get("thoughts") or [] if isinstance(t, dict)]
        for thought in thoughts[progress.get("thoughts", 0) :]:
            subject, description = thought.get("subject"), thought.get("description")
            text = "\n\n".join(s for s in (subject, description) if isinstance(s, str) and s)
            if text.strip():
                self.message("assistant", text, thought=True)
        progress["thoughts"] = max(len(thoughts), progress.get("thoughts", 0))
        if not progress.get("text"):
            text = text_of(record.get("content"))
            if text.strip():
                progress["text"] = True
                self.message("assistant", text)
        calls = progress.setdefault("calls", {})
        for n, call in enumerate(record.get("toolCalls") or []):
            if isinstance(call, dict):
                self._call(call, calls, f"{record['id']}:{n}")
        tokens = record.get("tokens")
        if isinstance(tokens, dict) and not progress.get("tokens"):
            progress["tokens"] = True
            self._tokens(tokens)

    # --- tool calls -------------------------------------------------------------------------

    def _call(self, call: dict[str, Any], calls: dict[str, int], fallback_id: str) -> None:
        """Started when first seen, then its outcome once its status is final; each once."""
        call_id = call["id"] if isinstance(call.get("id"), str) and call["id"] else fallback_id
        tool = str(call.get("name") or "unknown")
        arguments = raw if isinstance(raw := call.get("args"), dict) else {}
        stage = calls.get(call_id, 0)
        if stage == 0:
            if tool not in KNOWN_TOOLS:
                self.unmapped("tool", tool)
            extra: dict[str, Any] = {}
            if tool == SHELL_TOOL and isinstance(arguments.get("command"), str):
                extra["command"] = truncate(arguments["command"], COMMAND_CHARS)
                if isinstance(arguments.get("description"), str):
                    extra["description"] = arguments["description"][:COMMAND_CHARS]
            elif tool in EDIT_TOOLS and isinstance(arguments.get("file_path"), str):
                extra["path"] = self._path(arguments["file_path"])
            self.operation(
                call_id, tool, effect_of(tool), state="started", **called(arguments), **extra
            )
            stage = 1
        status = call.get("status")
        if stage == 1 and status in FINAL:
            self._outcome(call_id, tool, arguments, call, FINAL[status])
            stage = 2
        calls[call_id] = stage

    def _outcome(
        self, call_id: str, tool: str, arguments: dict[str, Any], call: dict[str, Any], failed: bool
    ) -> None:
        text = result_text(call)
        extra: dict[str, Any] = {}
        if tool == SHELL_TOOL:
            code = _EXIT_CODE.search(text)
            if code:
                extra["exitCode"] = int(code.group(1))
                # Gemini calls a command that exits non-zero a success: it failed.
                failed = failed or extra["exitCode"] != 0
            elif not failed:
                extra["exitCode"] = 0  # Gemini reports the exit code only when it is not 0
        elif tool == SUBAGENT_TOOL and isinstance(call.get("agentId"), str):
            child = call["agentId"]
            extra.update(childSessionId=child, childThreadId=thread_id_for(AGENT, child, 1))
        self.operation(
            call_id,
            tool,
            effect_of(tool),
            state="failed" if failed else "committed",
            resultPersisted=True,
            result=truncate(text, RESULT_CHARS),
            **extra,
        )
        if failed:
            return
        if tool in EDIT_TOOLS:
            self._edit(call_id, arguments, call.get("resultDisplay"))
        elif tool == "write_todos" and isinstance(arguments.get("todos"), list):
            self.todos(todo_entries(arguments["todos"]))

    def _edit(self, call_id: str, arguments: dict[str, Any], display: Any) -> None:
        """write_file / replace: the file diff Gemini shows holds the contents before
        (`originalContent`, none for a new file) and after (`newContent`, as written,
        with the person's own changes to the proposal)."""
        diff = display if isinstance(display, dict) else {}
        path = diff.get("filePath") or arguments.get("file_path")
        if not isinstance(path, str) or not path:
            return
        after = diff.get("newContent")
        before = diff.get("originalContent")
        if diff.get("isNewFile") is True or not isinstance(before, str):
            before = None
        known = isinstance(after, str)
        self.file_edit(self._path(path), call_id, before, after if known else None, known)

    def _path(self, path: str) -> str:
        return posixpath.join(self.state["cwd"], path) if self.state["cwd"] else path

    def _tokens(self, tokens: dict[str, Any]) -> None:
        """One model call's usage metadata: `input` is the whole prompt (cached included),
        `tool` the tool-use prompt beside it; thoughts are billed as output."""
        count = {
            k: v if isinstance(v := tokens.get(k), int) and v > 0 else 0
            for k in ("input", "cached", "output", "thoughts", "tool")
        }
        cached = min(count["cached"], count["input"])
        self.cost(
            fresh=count["input"] - cached + count["tool"],
            cache_write=0,
            cache_read=cached,
            output=count["output"] + count["thoughts"],
        )
