"""Codex rollouts (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<ts>-<uuid>.jsonl`) → items.

Every line is a `RolloutLine` (codex-rs/protocol): `{timestamp, type, payload}` where
`type` is `session_meta` (first line: id, cwd, git, source), `turn_context` (per turn:
cwd, model, approval_policy, sandbox_policy), `response_item` (the model's history:
`message`, `function_call` / `custom_tool_call` and their outputs, `local_shell_call`,
`agent_message` between agents, `reasoning`), `compacted` (a compaction summary) or
`event_msg` (`token_count`, `thread_name_updated`, `item_completed`, ...).

What a tool call did is told by the events Codex writes beside it, not by the call:
`item_completed` `FileChange` (`patch_apply_end` in older rollouts) says which files an
apply_patch changed, how, and whether it failed; `CommandExecution` (`exec_command_end`)
a command's argv, exit code and output. In code mode (the default model's one `exec` tool
running JavaScript) these events are the only record of the nested tool calls, so each
becomes an operation of its own under the `exec` call. The mapping is docs/import.md's.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from typing import Any, ClassVar

import orjson

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

AGENT = "codex"
READ_TOOLS = frozenset({"view_image", "web_search", "read_file", "list_dir", "grep_files",
                        "list_agents", "wait_agent", "get_goal", "tool_search", "wait",
                        "list_mcp_resources", "list_mcp_resource_templates",
                        "read_mcp_resource", "sleep", "clock__curr_time"})  # fmt: skip
IDEMPOTENT_TOOLS = frozenset({"update_plan"})
GOAL_TOOLS = frozenset({"create_goal", "update_goal", "get_goal"})
GOAL_STATUS = {"active": "in_progress", "complete": "completed"}
"""A goal's status as a todo's; `paused`, `blocked` and budget-limited goals are pending
(their status is said in the text)."""
SIDE_EFFECT_TOOLS = frozenset({"apply_patch", "exec", "exec_command", "write_stdin", "shell",
                               "container.exec", "local_shell", "shell_command",
                               "spawn_agent", "followup_task", "send_message",
                               "interrupt_agent", "create_goal", "update_goal",
                               "request_user_input", "request_user_input_async",
                               "send_message_to_user_async"})  # fmt: skip
"""The tools Codex offers (0.171's code-mode and classic sets, and the older shell tools),
by what they may change; any other name (an MCP tool, a tool of a newer Codex) is still
an operation, assumed to have side effects, and reported as unmapped."""
KNOWN_TOOLS = READ_TOOLS | IDEMPOTENT_TOOLS | SIDE_EFFECT_TOOLS
CODE_MODE_TOOL = "exec"
"""The default model's one tool (code mode): JavaScript calling `tools.apply_patch(...)`,
`tools.exec_command(...)`, … inside Codex; its nested calls are told only by the events."""
SHELL_TOOLS = frozenset({"shell", "container.exec", "local_shell", "shell_command",
                         "exec_command"})  # fmt: skip
# Context Codex injects as user messages; none of it is the user's own words.
INJECTED = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions",
            "<permissions instructions>", "<user_shell_command>", "<turn_aborted>")  # fmt: skip
TOTALS = ("input_tokens", "cached_input_tokens", "output_tokens")
DIFF_CHARS = 20_000
"""A file edit keeps its diff up to this size; the rollout keeps it whole."""
TRACKED_CHARS = 32_768
"""Contents of files the session wrote, kept in the parser's state so a later diff of the
same file gives its new contents (and its sha). The state is saved whole with every
import checkpoint, so they are bounded in total, the oldest forgotten first: an update
of a file not held is `contentKnown: false`, as without them."""
FAILED = ("failed", "declined")
"""Statuses of an apply or a command that did not happen (declined: by the person)."""
READ_ONLY_COMMANDS = frozenset({"read", "list_files", "search"})
"""Codex's own `parsed_cmd` kinds of commands that change no file."""
_EXIT = re.compile(r"^(?:Exit code:|Process exited with code) (-?\d+)\s*$", re.MULTILINE)
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")
_RUNNING = re.compile(r"Script running with cell ID (\S+)")
EXEC_ENDED = ("Script completed", "Script failed")
_PATCH = re.compile(r"\*\*\* Begin Patch\n.*?\*\*\* End Patch", re.DOTALL)


def effect_of(tool: str) -> str:
    return effect(tool, READ_TOOLS, IDEMPOTENT_TOOLS)


def handoff(session_id: str) -> list[str]:
    """The command that continues the session in Codex itself (its interactive TUI:
    `codex resume [SESSION_ID] [PROMPT]`, checked against 0.171's `--help`; a session
    `codex exec` wrote resumes there too, by id)."""
    return ["codex", "resume", session_id]


def patch_changes(patch: str) -> list[tuple[str, str | None, bool]]:
    """(path, contents after, known) per file an apply_patch envelope touches.

    Only for rollouts without the apply events (older Codex): added files carry their
    whole contents (`+` lines, each ending in a newline, as Codex writes them); deleted
    ones have none; an update is a diff against contents the rollout does not hold, so its
    result is unknown. A move deletes the old path.
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


def apply_unified_diff(before: str, diff: str) -> str | None:
    """`before` with a unified diff's hunks applied, or None when a hunk does not match.

    Hand-written rather than a library's: Codex's `unified_diff` is bare hunks (no
    `---`/`+++` header, which diff libraries need to find a patch), and any mismatch must
    give None, never a fuzzy guess, since the result's sha judges the file on resume.
    """
    source = before.splitlines(keepends=True)
    out: list[str] = []
    pos = 0
    last = ""
    for line in diff.splitlines(keepends=True):
        if hunk := _HUNK.match(line):
            start = int(hunk[1]) - (0 if hunk[2] == "0" else 1)
            if start < pos or start > len(source):
                return None
            out += source[pos:start]
            pos = start
            continue
        tag, text = line[:1], line[1:]
        if tag in (" ", "-"):
            if pos >= len(source) or source[pos].rstrip("\r\n") != text.rstrip("\r\n"):
                return None
            if tag == " ":
                out.append(source[pos])
            pos += 1
        elif tag == "+":
            out.append(text if text.endswith("\n") else text + "\n")
        elif tag == "\\" and last == "+" and out:  # `\ No newline at end of file`
            out[-1] = out[-1].rstrip("\r\n")
        if tag in (" ", "-", "+"):
            last = tag
    return "".join(out + source[pos:])


def shell_patch(command: Any) -> str | None:
    """The apply_patch envelope of a shell call that runs apply_patch (Codex 0.4x sent
    every edit this way: `["apply_patch", "*** Begin Patch…"]`, or a `bash -lc` heredoc)."""
    if not isinstance(command, list) or not command or not all(isinstance(a, str) for a in command):
        return None
    if command[0] in ("apply_patch", "applypatch") and len(command) >= 2:
        return str(command[1])
    if len(command) == 3 and command[1] in ("-lc", "-c") and "apply_patch" in command[2]:
        found = _PATCH.search(command[2])
        return found.group(0) + "\n" if found else None
    return None


def command_text(command: Any) -> str | None:
    """A command as a person reads it: the script of a `bash -lc` wrapper, else the argv
    joined as a shell would take it."""
    if isinstance(command, str):
        return command
    if not isinstance(command, list) or not all(isinstance(a, str) for a in command):
        return None
    if len(command) == 3 and command[1] in ("-lc", "-c"):
        return str(command[2])
    return shlex.join(command)


def exit_code_of(text: str) -> int | None:
    """The exit code Codex prints before a command's output (`Exit code: N`, `Process
    exited with code N`); the output itself is not searched."""
    head = text.split("\nOutput:", 1)[0]
    found = _EXIT.search(head)
    return int(found[1]) if found else None


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
            return str(value["type"]).replace("_", "-")
        return next(iter(value), None)
    return None


def _legacy_exec_output(text: str) -> tuple[str, int | None] | None:
    """Codex ≤ 0.4x answered shell calls with JSON, `{"output", "metadata": {"exit_code"}}`
    (`format_exec_output_apply_patch`, codex-rs/core/src/tools/mod.rs)."""
    if not text.startswith('{"output"'):
        return None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("output"), str):
        return None
    meta = value.get("metadata")
    code = meta.get("exit_code") if isinstance(meta, dict) else None
    return value["output"], code if isinstance(code, int) else None


class CodexParser(SourceParser):
    AGENT = AGENT
    PROVIDER = "openai"
    TITLE_ORDER: ClassVar[tuple[str, ...]] = ("name", "first", "agent")
    IGNORED: ClassVar[dict[str, str]] = {
        # What is deliberately not mapped, and why; anything else the mapping does not know
        # is reported through `unmapped`: `record:` (a line's type), `response_item:`,
        # `event:` (event_msg), `item:` (item_completed), `file_change:`, `tool:`.
        # records
        "record:world_state": "Codex's snapshot of the context it injects (AGENTS.md, skills, "
        "environment): the same facts as session_meta and turn_context",
        "record:token_usage_record": "per-response usage; token_count's running totals "
        "already count every response (both would count it twice)",
        "record:inter_agent_communication_metadata": "whether an inter-agent message starts a "
        "turn; the message itself is the agent_message response item that follows",
        # response items
        "response_item:additional_tools": "the tool definitions offered to the model",
        "response_item:reasoning": "the model's reasoning (encrypted); not imported",
        "output:agent.goal_objective": "a goal's objective restated for the model (no call "
        "answered): the goal's todo holds it",
        # events
        "event:task_started": "turn start: turns are the prompting user messages",
        "event:task_complete": "turn end, repeating the last agent message",
        "event:turn_aborted": "the interruption; the history up to it is imported",
        "event:thread_settings_applied": "the same settings as the turn_context line",
        "event:agent_message": "a copy of the assistant's response_item message",
        "event:agent_reasoning": "reasoning summaries; not imported",
        "event:agent_reasoning_raw_content": "raw reasoning; not imported",
        "event:context_compacted": "the compaction; the compacted line carries its summary",
        # item_completed items
        "item:UserMessage": "a copy of the user's response_item message",
        "item:AgentMessage": "a copy of the assistant's response_item message",
        "item:Reasoning": "the model's reasoning; not imported",
        "item:ContextCompaction": "the compaction; the compacted line carries its summary",
        "item:CollabAgentToolCall": "a multi-agent tool call (wait_agent, …): its "
        "function_call and output are the operation",
    }

    SPAWN_MARKERS: ClassVar[tuple[bytes, ...]] = (b"SubAgentActivity",)

    @classmethod
    def spawns(cls, record: dict[str, Any]) -> list[tuple[str, str]]:
        """(the sub-agent's session id, the spawn_agent call) from a parent's
        `item_completed SubAgentActivity {kind: started, id: <call_id>, agent_thread_id}`."""
        payload = record.get("payload")
        item = payload.get("item") if isinstance(payload, dict) else None
        if (
            record.get("type") != "event_msg"
            or not isinstance(item, dict)
            or item.get("type") != "SubAgentActivity"
            or item.get("kind") != "started"
        ):
            return []
        child, call = item.get("agent_thread_id"), item.get("id")
        return [(child, call)] if isinstance(child, str) and isinstance(call, str) else []

    def initial(self) -> dict[str, Any]:
        return {**super().initial(), "totals": dict.fromkeys(TOTALS, 0), "metaSeen": False,
                "repoUrl": None, "parent": None, "agentPath": None, "exec": None,
                "cells": {}, "contents": {}}  # fmt: skip

    def handle(self, record: dict[str, Any]) -> None:
        payload = record.get("payload")
        kind = record.get("type")
        if not isinstance(payload, dict):
            self.unmapped("record", kind)
        elif kind == "session_meta":
            self._session_meta(payload)
        elif kind == "turn_context":
            self._turn_context(payload)
        elif kind == "response_item":
            self._response_item(payload)
        elif kind == "compacted" and isinstance(payload.get("message"), str):
            self.emit({"type": "compact_boundary", "summary": payload["message"]})
        elif kind == "event_msg":
            self._event(payload)
        else:
            self.unmapped("record", kind)

    # --- metadata ---------------------------------------------------------------------------

    def _session_meta(self, meta: dict[str, Any]) -> None:
        state = self.state
        if state["metaSeen"]:
            return  # a fork or resume may repeat it; the first one is this session's
        state["metaSeen"] = True
        state["sessionId"] = raw if isinstance(raw := meta.get("id"), str) else None
        if isinstance(meta.get("cwd"), str) and meta["cwd"]:
            state["cwd"] = meta["cwd"]
        git = raw if isinstance(raw := meta.get("git"), dict) else {}
        state["branch"] = git.get("branch") or state["branch"]
        state["commit"] = git.get("commit_hash") or state["commit"]
        state["repoUrl"] = git.get("repository_url")
        source = meta.get("source")
        if isinstance(source, dict) and isinstance(source.get("subagent"), dict):
            # A sub-agent's own rollout: `source.subagent.thread_spawn {parent_thread_id,
            # depth, agent_path, agent_nickname}` (0.171 also puts parent_thread_id on top).
            # `parent` in the shape sub-agent threads take it: the parent's session; the
            # spawn_agent call is only in the parent's rollout (its SubAgentActivity).
            spawn = source["subagent"].get("thread_spawn") or {}
            parent = spawn.get("parent_thread_id") or meta.get("parent_thread_id")
            state["parent"] = {"sessionId": parent, "toolCallId": None} if parent else None
            state["agentPath"] = spawn.get("agent_path")
            name = spawn.get("agent_nickname")
            label = " ".join(str(p) for p in (name, spawn.get("agent_path")) if p)
            if label:
                state["titles"]["agent"] = title_from(f"Sub-agent {label}")

    def _turn_context(self, context: dict[str, Any]) -> None:
        if isinstance(context.get("cwd"), str) and not self.state["cwd"]:
            self.state["cwd"] = context["cwd"]
        self.model(context.get("model"))
        self.permissions(
            _policy_name(context.get("approval_policy")),
            _policy_name(context.get("sandbox_policy")),
        )

    # --- the model's history ----------------------------------------------------------------

    def _response_item(self, item: dict[str, Any]) -> None:
        kind = item.get("type")
        if kind == "message":
            self._message(item)
        elif kind == "agent_message":
            self._agent_message(item)
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            self._call(item)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            self._output(item)
        else:
            self.unmapped("response_item", kind)

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

    def _agent_message(self, item: dict[str, Any]) -> None:
        """A message between agents (multi-agent v2): a parent's task to its sub-agent, a
        sub-agent's final answer to its parent. Only its plain text is imported (the task
        itself travels as `encrypted_content`, readable by the model provider alone)."""
        text = text_of(item.get("content"))
        if not text.strip():
            return
        self.state["turn"] = f"L{self._line}"
        self.message("user", text, fromAgent=item.get("author"), toAgent=item.get("recipient"))

    def _call(self, item: dict[str, Any]) -> None:
        call_id = str(item.get("call_id") or item.get("id") or f"L{self._line}")
        if item["type"] == "local_shell_call":
            tool, arguments = "local_shell", item.get("action") or {}
        elif item["type"] == "custom_tool_call":  # freeform tools: apply_patch's raw patch
            tool, arguments = str(item.get("name") or "unknown"), {"input": item.get("input")}
        else:
            tool, arguments = str(item.get("name") or "unknown"), _arguments(item.get("arguments"))
        if tool not in KNOWN_TOOLS:
            self.unmapped("tool", tool)
        pending: dict[str, Any] = {"tool": tool}
        if tool == "apply_patch" and isinstance(arguments.get("input"), str):
            pending["patch"] = arguments["input"]
        elif tool in SHELL_TOOLS:
            command = arguments.get("cmd") or arguments.get("command")
            if patch := shell_patch(command):
                pending["patch"] = patch
            elif text := command_text(command):
                pending["command"] = text
        elif tool == "wait" and (cell := arguments.get("cell_id")) is not None:
            pending["cell"] = str(cell)  # the script it waits for runs on: its nested calls
            self.state["exec"] = self.state["cells"].get(str(cell), self.state["exec"])
        extra: dict[str, Any] = {}
        if tool == CODE_MODE_TOOL:
            self.state["exec"] = call_id  # its nested calls' events come before its output
            if isinstance(arguments.get("input"), str):
                extra["input"] = truncate(arguments["input"], RESULT_CHARS)
        self.state["pending"][call_id] = pending
        if "command" in pending:
            extra["command"] = pending["command"]
        if tool == "update_plan" and isinstance(arguments.get("plan"), list):
            pending["plan"] = arguments["plan"]  # the plan once Codex accepted it
        self.operation(call_id, tool, effect_of(tool), state="started",
                       **{**called(arguments), **extra})  # fmt: skip

    def _output(self, item: dict[str, Any]) -> None:
        if not item.get("call_id") and item.get("name"):
            # An output that answers no call: Codex 0.171 restates a goal's objective for
            # the model as `{name: goal_objective, namespace: agent, output}` (the goal's
            # todo holds it). Anything else of the kind is reported, never a tool call.
            self.unmapped("output", f"{item.get('namespace') or ''}.{item['name']}".lstrip("."))
            return
        call_id = str(item.get("call_id") or f"L{self._line}")
        output = item.get("output")
        pending = self.state["pending"].get(call_id)
        if pending is not None and pending["tool"] == CODE_MODE_TOOL:
            if not self._exec_done(call_id, text_of(output)):
                return
        elif pending is not None and pending["tool"] == "wait":
            self._wait_done(pending, text_of(output))
        pending = self.state["pending"].pop(call_id, None) or {"tool": "unknown"}
        tool = pending["tool"]
        failed = pending.get("failed")
        if isinstance(output, dict):  # older rollouts: {content, success}
            failed = failed or output.get("success") is False
            output = output.get("content")
        text = text_of(output)
        exit_code = pending.get("exitCode")
        if (legacy := _legacy_exec_output(text)) is not None:
            text, code = legacy
            exit_code = code if exit_code is None else exit_code
        elif exit_code is None and tool != CODE_MODE_TOOL:
            exit_code = exit_code_of(text)
        if failed is None:
            failed = self._failed_by_output(tool, text, exit_code)
        if tool == CODE_MODE_TOOL and self.state["exec"] == call_id:
            self.state["exec"] = None
        extra = {k: pending[k] for k in ("command", "childSessionId", "agentPath") if k in pending}
        if isinstance(pending.get("childSessionId"), str):
            extra["childThreadId"] = thread_id_for(AGENT, pending["childSessionId"], 1)
        if exit_code is not None:
            extra["exitCode"] = exit_code
        self.result(call_id, tool, effect_of(tool), text, bool(failed), **extra)
        if "command" in pending and not pending.get("readOnly"):
            self.state["contents"] = {}  # a command may have changed any file
        if "patch" in pending and not failed and not pending.get("applied"):
            self._patch_edits(pending["patch"], call_id)
        if tool in GOAL_TOOLS and not failed:
            self._goal(text)
        if tool == "update_plan" and not failed and isinstance(pending.get("plan"), list):
            steps = [s for s in pending["plan"] if isinstance(s, dict)]
            self.todos([(str(n), str(s.get("step") or ""), s.get("status"))
                        for n, s in enumerate(steps, 1)])  # fmt: skip

    def _goal(self, text: str) -> None:
        """Codex 0.17x plans with goals (`create_goal` / `update_goal`, answered with the
        goal as JSON) where it had `update_plan`: a thread's goals are its todo list, each
        objective once, in the order created, with the status Codex last answered."""
        try:
            answer = orjson.loads(text)
        except orjson.JSONDecodeError:
            return
        goal = answer.get("goal") if isinstance(answer, dict) else None
        if not isinstance(goal, dict) or not isinstance(goal.get("objective"), str):
            return
        goals: list[list[str]] = self.state.setdefault("goals", [])
        key = f"{goal.get('createdAt')}:{goal['objective']}"
        status = str(goal.get("status") or "active")
        entry = next((g for g in goals if g[0] == key), None)
        if entry is not None and entry[2] == status:
            return  # get_goal, or an update that changed nothing
        if entry is None:
            goals.append([key, goal["objective"], status])
        else:
            entry[2] = status
        self.todos([
            (f"goal-{n}", objective if status in GOAL_STATUS else f"{objective} ({status})",
             GOAL_STATUS.get(status, "pending"))
            for n, (_, objective, status) in enumerate(goals, 1)
        ])  # fmt: skip

    def _exec_done(self, call_id: str, text: str) -> bool:
        """Whether this output ends the `exec` script. A script still running when its
        yield time ran out answers `Script running with cell ID N` and is finished by a
        later `wait {cell_id: N}`; `notify(...)` adds outputs of its own text."""
        if text.startswith(EXEC_ENDED):
            return True
        if running := _RUNNING.match(text):
            self.state["cells"][running[1]] = call_id
        return False

    def _wait_done(self, pending: dict[str, Any], text: str) -> None:
        """A `wait` that saw its cell's script end ends that `exec` too, with this output."""
        cell = self.state["cells"].get(str(pending.get("cell")))
        if cell is not None and cell in self.state["pending"] and text.startswith(EXEC_ENDED):
            del self.state["cells"][str(pending["cell"])]
            self.state["pending"].pop(cell)
            self.result(cell, CODE_MODE_TOOL, effect_of(CODE_MODE_TOOL), text,
                        text.startswith("Script failed"))  # fmt: skip
            if self.state["exec"] == cell:
                self.state["exec"] = None

    @staticmethod
    def _failed_by_output(tool: str, text: str, exit_code: int | None) -> bool:
        """Whether a call failed, from its output alone (no event told): a non-zero exit,
        a patch Codex refused before writing, a script that threw, a call Codex rejected."""
        if exit_code is not None:
            return exit_code != 0
        if tool == CODE_MODE_TOOL:
            return text.startswith("Script failed")
        return text.startswith(("apply_patch verification failed", "unsupported call:"))

    def _patch_edits(self, patch: str, call_id: str) -> None:
        """File edits from the patch text, for rollouts without the apply events."""
        cwd = self.state["cwd"] or ""
        for path, after, known in patch_changes(patch):
            full = posixpath.join(cwd, path)
            self._remember(full, after if known else None)
            self.file_edit(full, call_id, None, after, known)

    # --- events -----------------------------------------------------------------------------

    def _event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "token_count":
            self._tokens(event.get("info"))
        elif kind == "thread_name_updated" and isinstance(event.get("thread_name"), str):
            self.state["titles"]["name"] = title_from(event["thread_name"])
        elif kind == "user_message" and isinstance(event.get("message"), str):
            titles = self.state["titles"]  # the transcript's clean copy of the first prompt
            titles["first"] = titles.get("first") or title_from(event["message"])
        elif kind == "item_completed" and isinstance(event.get("item"), dict):
            self._item(event["item"])
        elif kind == "patch_apply_end":  # older rollouts' FileChange
            status = event.get("status") or ("completed" if event.get("success") else "failed")
            self._file_change({**event, "id": event.get("call_id"), "status": status})
        elif kind == "exec_command_end":  # older rollouts' CommandExecution
            self._command({**event, "id": event.get("call_id")})
        else:
            self.unmapped("event", kind)

    def _item(self, item: dict[str, Any]) -> None:
        kind = item.get("type")
        if kind == "FileChange":
            self._file_change(item)
        elif kind == "CommandExecution":
            self._command(item)
        elif kind == "SubAgentActivity":
            self._sub_agent(item)
        else:
            self.unmapped("item", kind)

    def _nested(self, item: dict[str, Any], tool: str, failed: bool, result: str,
                args: Any, **extra: Any) -> str | None:  # fmt: skip
        """The operation of a tool call told only by its event: a code-mode `exec`'s nested
        call (under that `exec`). None when the event belongs to a direct call instead."""
        item_id = item.get("id")
        if isinstance(item_id, str) and item_id in self.state["pending"]:
            return None
        op_id = item_id if isinstance(item_id, str) and item_id else f"L{self._line}"
        parent = self.state["exec"]
        if parent:
            extra["parentOperationId"] = parent
        self.operation(op_id, tool, effect_of(tool), state="failed" if failed else "committed",
                       **called(args), resultPersisted=True,
                       result=truncate(result, RESULT_CHARS), **extra)  # fmt: skip
        return op_id

    def _file_change(self, item: dict[str, Any]) -> None:
        """What an apply_patch did, file by file (`changes: {path: {type: add, content} |
        {type: delete, content} | {type: update, unified_diff, move_path}}`): the truth
        about edits. A failed patch changed nothing: no file edit."""
        changes = raw if isinstance(raw := item.get("changes"), dict) else {}
        failed = item.get("status") in FAILED
        output = str(item.get("stderr") or "") if failed else str(item.get("stdout") or "")
        op_id = self._nested(item, "apply_patch", failed, output, changes)
        if op_id is None:  # a direct apply_patch: its output line closes the operation
            op_id = str(item["id"])
            pending = self.state["pending"][op_id]
            pending["failed"], pending["applied"] = failed, True
        if failed:
            return
        cwd = self.state["cwd"] or ""
        for raw_path, change in changes.items():
            if isinstance(change, dict):
                self._change(posixpath.join(cwd, str(raw_path)), change, op_id)

    def _change(self, path: str, change: dict[str, Any], op_id: str) -> None:
        kind = change.get("type")
        contents = self.state["contents"]
        if kind == "add" and isinstance(change.get("content"), str):
            self._remember(path, change["content"])
            self.file_edit(path, op_id, None, change["content"], True, change="add")
        elif kind == "delete":
            before = raw if isinstance(raw := change.get("content"), str) else None
            contents.pop(path, None)
            self.file_edit(path, op_id, before, None, True, change="delete")
        elif kind == "update":
            diff = raw if isinstance(raw := change.get("unified_diff"), str) else ""
            before = contents.pop(path, None)
            after = apply_unified_diff(before, diff) if before is not None else None
            moved = change.get("move_path")
            target = path
            if isinstance(moved, str) and moved:
                target = posixpath.join(posixpath.dirname(path), moved)
                self.file_edit(path, op_id, before, None, before is not None, change="move",
                               movedTo=target)  # fmt: skip
            self._remember(target, after)
            fields: dict[str, Any] = {"diff": truncate(diff, DIFF_CHARS)}
            if target != path:
                fields["movedFrom"] = path
            self.file_edit(target, op_id, before if target == path else None, after,
                           after is not None, change="move" if target != path else "update",
                           **fields)  # fmt: skip
        else:
            self.unmapped("file_change", kind)

    def _remember(self, path: str, text: str | None) -> None:
        """Keep what a file holds now, for the next diff of it (within the bounds)."""
        contents = self.state["contents"]
        contents.pop(path, None)
        if text is None or len(text) > TRACKED_CHARS:
            return
        contents[path] = text
        held = sum(len(held) for held in contents.values())
        while held > TRACKED_CHARS:
            held -= len(contents.pop(next(iter(contents))))

    def _command(self, item: dict[str, Any]) -> None:
        """A command's run: argv, exit code, output. A direct call's operation takes them
        when its output line comes; a nested one becomes an operation now."""
        command = command_text(item.get("command"))
        code = raw if isinstance(raw := item.get("exit_code"), int) else None
        failed = item.get("status") in FAILED or (code is not None and code != 0)
        parsed = raw if isinstance(raw := item.get("parsed_cmd"), list) else []
        read_only = bool(parsed) and all(
            isinstance(p, dict) and p.get("type") in READ_ONLY_COMMANDS for p in parsed
        )
        output = item.get("aggregated_output")
        extra: dict[str, Any] = {"command": command} if command else {}
        if code is not None:
            extra["exitCode"] = code
        op_id = self._nested(item, "exec_command", failed, str(output or ""), item.get("command"),
                             **extra)  # fmt: skip
        if op_id is None:
            pending = self.state["pending"][str(item["id"])]
            pending.update(extra, failed=failed, readOnly=read_only)
        elif not read_only:
            self.state["contents"] = {}  # a command may have changed any file

    def _sub_agent(self, item: dict[str, Any]) -> None:
        """A sub-agent started by a spawn_agent call (`id` is that call's id): the call's
        operation names the child's session, whose own rollout names this one as parent."""
        pending = self.state["pending"].get(str(item.get("id")))
        if item.get("kind") == "started" and pending is not None:
            pending["childSessionId"] = item.get("agent_thread_id")
            pending["agentPath"] = item.get("agent_path")
        # `completed` (its own id): the sub-agent's answer arrives as an agent_message

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
