"""`ThreadRecorder`: one thread's ACP traffic, as the proxy saw it, into sessiond items and
the blobs they name (the mapping is this package's docstring)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from restore.search.text import MAX_TEXT, bounded
from restore.sources.acp.shapes import (
    CHUNKS,
    OPEN_STATES,
    RANK,
    READ_ONLY_KINDS,
    SESSION_STATE,
    TODO_STATUSES,
    TOOL_FIELDS,
    TOOL_STATES,
    Recorded,
    _clean,
    _merged,
    _Message,
    _object,
    _operation_id,
    _Parts,
    _paths,
    _text_blob,
    _Tool,
    sha_of,
)


class ThreadRecorder:
    """The recording state of one thread: the open message, the turn's tool calls, the
    model and mode last recorded, and the cumulative cost AGENT reported so far."""

    def __init__(self, scope: str) -> None:
        self.scope = scope
        self.turn_id: str | None = None
        self.model: str | None = None
        self.mode: str | None = None
        self.cost_seen = 0.0
        self._ord = 0
        self._message: _Message | None = None
        self._tools: dict[str, _Tool] = {}
        self._edits: set[tuple[str, str | None]] = set()

    @classmethod
    def continuing(cls, items: Iterable[dict[str, Any]], scope: str) -> ThreadRecorder:
        """A recorder for a thread read back from its file: the model, mode and cost
        baseline carry over, so nothing is recorded twice after a restart."""
        recorder = cls(scope)
        for item in items:
            kind = item.get("type")
            if kind == "model_override" and isinstance(item.get("model"), str):
                recorder.model = item["model"]
            elif kind == "permissions" and isinstance(item.get("approvalMode"), str):
                recorder.mode = item["approvalMode"]
            elif kind == "acp_session" and item.get("via") == "new":
                recorder.cost_seen = 0.0
            elif kind == "acp_update" and item.get("update", {}).get("sessionUpdate") == (
                "usage_update"
            ):
                amount = (item["update"].get("cost") or {}).get("amount")
                if isinstance(amount, int | float):
                    recorder.cost_seen = float(amount)
        return recorder

    # --- turns ---------------------------------------------------------------------------

    def begin_turn(
        self,
        turn_id: str,
        prompt: list[Any],
        context: dict[str, Any] | None = None,
        message_id: str | None = None,
    ) -> Recorded:
        """The user's prompt: a turn starts, its message, and the prompt as raw chunks (the
        editor drew it itself; a replay has to draw it too). `context`: the block of hook
        context sent to AGENT ahead of the prompt (`context_block`), kept on the turn's
        start, not in the user's message: a replay never shows it as the user's.
        `message_id`: the editor's `messageId` of the prompt (ACP v1, optional), kept on
        its chunks so a replay names it and `replayFrom` can start there."""
        out = Recorded(self._flush_message())
        self.scope = self.turn_id = turn_id
        self._ord = 0
        self._tools = {}
        self._edits = set()
        parts = _merged(prompt)
        start: dict[str, Any] = {
            "type": "turn",
            "id": f"{turn_id}:start",
            "turnId": turn_id,
            "phase": "started",
        }
        if context is not None:
            start["agentContext"] = [context["block"]]
            start["promptSections"] = list(context["sections"])
        out.items.append(start)
        out.items.append(
            {
                "type": "message",
                "id": f"{turn_id}:prompt",
                "role": "user",
                "content": parts,
                "turnId": turn_id,
                "origin": "acp",
            }
        )
        for block in prompt:
            if isinstance(block, dict):
                update = {"sessionUpdate": "user_message_chunk", "content": block}
                if message_id is not None:
                    update["messageId"] = message_id
                out.items.append(self._raw(self._take_ord(), update, None, synthesized=True))
        return out

    def steer(self, prompt: list[Any]) -> Recorded:
        """The person's words sent into the running turn (or the idle span) by
        `_session/steering` (claude-agent-acp, codex-acp): a user message marked
        `steered` and the words as raw chunks, as a prompt's are (the editor drew them
        itself; a replay has to draw them too). The agent's message open until now ends
        here: what it says next answers the steer."""
        out = Recorded(self._flush_message())
        ord_ = self._take_ord()
        out.items.append(
            _clean(
                {
                    "type": "message",
                    "id": f"{self.scope}:s{ord_}",
                    "role": "user",
                    "content": _merged(prompt),
                    "turnId": self.turn_id,
                    "origin": "acp",
                    "steered": True,
                }
            )
        )
        for block in prompt:
            if isinstance(block, dict):
                update = {"sessionUpdate": "user_message_chunk", "content": block}
                out.items.append(self._raw(self._take_ord(), update, None, synthesized=True))
        return out

    def end_turn(
        self,
        next_scope: str,
        *,
        stop_reason: str | None = None,
        usage: Any = None,
        error: str | None = None,
        continue_reason: str | None = None,
    ) -> Recorded:
        """The turn's end: the open message, the turn's token usage, `turn` completed (or
        interrupted, with why). Later updates belong to the idle span `next_scope`."""
        out = Recorded(self._flush_message())
        turn = self.turn_id
        if turn is not None:
            if error is not None:
                out.add(self._close_open_tools(error))
            if isinstance(usage, dict):
                out.items.append(self._usage_cost(f"{turn}:cost", usage))
            out.items.append(
                _clean(
                    {
                        "type": "turn",
                        "id": f"{turn}:end",
                        "turnId": turn,
                        "phase": "completed" if error is None else "interrupted",
                        "stopReason": stop_reason,
                        "error": error,
                        "continueReason": continue_reason,
                    }
                )
            )
        self.turn_id = None
        self.scope = next_scope
        self._ord = 0
        return out

    def _close_open_tools(self, reason: str) -> Recorded:
        """Every tool call still pending or running when its turn ended abnormally gets a
        `failed` update saying why, so no editor shows it running forever, live or in a
        replay. Made here (`synthesized`): a recovery derives the same ones again."""
        out = Recorded()
        for tool_call_id, tool in self._tools.items():
            if tool.state not in OPEN_STATES:
                continue
            note = {"type": "text", "text": f"Interrupted: {reason}."}
            content = [c for c in tool.fields.get("content") or [] if isinstance(c, dict)]
            update = {
                "sessionUpdate": "tool_call_update",
                "toolCallId": tool_call_id,
                **{
                    k: tool.fields[k]
                    for k in ("title", "kind")
                    if isinstance(tool.fields.get(k), str)
                },
                "status": "failed",
                "content": [*content, {"type": "content", "content": note}],
                "_meta": {"sessiond": {"interrupted": reason}},
            }
            ord_ = self._take_ord()
            out.items.append(self._raw(ord_, update, None, synthesized=True))
            out.add(self._tool_step(update, ord_))
            out.shown.append({"update": update})
        return out

    # --- updates -------------------------------------------------------------------------

    def update(self, params: dict[str, Any]) -> Recorded:
        """One `session/update` notification's params: the raw item, and whatever it
        completes or changes (a finished message, an operation step, todos, cost, ...)."""
        update = params.get("update")
        if not isinstance(update, dict):
            return Recorded()
        ord_ = self._take_ord()
        raw = self._raw(ord_, update, params.get("_meta"))
        kind = update.get("sessionUpdate")
        if kind in CHUNKS:
            message_id = update.get("messageId")
            current = self._message
            out = Recorded()
            if current is None or current.kind != kind or current.message_id != message_id:
                out.items += self._flush_message()
                current = self._message = _Message(ord_, kind, message_id, _Parts())
            current.parts.add(update.get("content"))
            if kind == "user_message_chunk":
                raw["agentSentAsUser"] = True
            out.items.append(raw)
            return out
        out = Recorded(self._flush_message())
        out.items.append(raw)
        if kind in ("tool_call", "tool_call_update"):
            out.add(self._tool_step(update, ord_))
        elif kind == "plan" and isinstance(update.get("entries"), list):
            out.items.append(self._todos(update["entries"], ord_))
        elif kind == "usage_update":
            out.items += self._usage_update(update, ord_)
        elif kind == "current_mode_update":
            out.items += self._mode_changed(update.get("currentModeId"), ord_)
        elif kind == "config_option_update":
            out.items += self._model_changed(_model_of(update), ord_)
        elif kind == "session_info_update" and isinstance(update.get("title"), str):
            out.items.append(
                {"type": "thread_title", "id": f"{self.scope}:t{ord_}", "title": update["title"]}
            )
        return out

    def session_state(self, result: Any) -> Recorded:
        """A session/new, load or resume answer: its current mode and model."""
        if not isinstance(result, dict):
            return Recorded()
        ord_ = self._take_ord()
        modes = result.get("modes")
        mode = modes.get("currentModeId") if isinstance(modes, dict) else None
        items = self._mode_changed(mode, ord_) + self._model_changed(_model_of(result), ord_)
        return Recorded(items)

    def agent_session(
        self, agent_session_id: str, via: str, command: list[str], answer: Any = None
    ) -> Recorded:
        """The thread now talks to AGENT's session `agent_session_id`, reached `via` new,
        resume or load; a new session's cumulative cost starts from zero. `answer`: AGENT's
        answer, whose modes, models and config options a later load answers with."""
        if via == "new":
            self.cost_seen = 0.0
        item: dict[str, Any] = {
            "type": "acp_session",
            "id": f"{self.scope}:x{self._take_ord()}",
            "agentSessionId": agent_session_id,
            "via": via,
            "agentCommand": command,
        }
        if isinstance(answer, dict):
            item["session"] = {k: answer[k] for k in SESSION_STATE if answer.get(k) is not None}
        return Recorded([item])

    # --- requests AGENT made of the editor -----------------------------------------------

    def permission(self, request: dict[str, Any], result: Any, error: Any = None) -> Recorded:
        """The user's answer to `session/request_permission` (an error: not answered)."""
        tool_call = _object(request.get("toolCall"))
        tool_call_id = tool_call.get("toolCallId")
        tool = self._tools.get(tool_call_id) if isinstance(tool_call_id, str) else None
        if tool is None and isinstance(tool_call_id, str):
            tool = self._asked_about(tool_call_id, tool_call)
        merged = {**(tool.fields if tool else {}), **_clean(dict(tool_call))}
        outcome = result.get("outcome") if isinstance(result, dict) else None
        outcome = outcome if isinstance(outcome, dict) else {}
        chosen = outcome.get("optionId")
        options = [o for o in request.get("options") or [] if isinstance(o, dict)]
        option_kind = next((o.get("kind") for o in options if o.get("optionId") == chosen), None)
        selected = outcome.get("outcome") == "selected" and error is None
        item = {
            "type": "permission_decision",
            "id": f"{self.scope}:p{self._take_ord()}",
            "toolCallId": tool_call_id if isinstance(tool_call_id, str) else None,
            "operationId": tool.operation_id if tool else None,
            "title": merged.get("title") if isinstance(merged.get("title"), str) else None,
            "paths": _paths(merged),
            "outcome": "selected" if selected else "cancelled",
            "optionId": chosen if selected and isinstance(chosen, str) else None,
            "optionKind": option_kind if selected else None,
            "allowed": bool(selected and str(option_kind or "").startswith("allow")),
            "turnId": self.turn_id,
        }
        return Recorded([_clean(item)])

    def _asked_about(self, tool_call_id: str, tool_call: dict[str, Any]) -> _Tool:
        """A tool call known only from a permission request (Gemini CLI, and Codex until
        its command starts, send no `tool_call` before asking): kept, so an abnormal end
        of the turn closes it too."""
        fields = {k: tool_call[k] for k in TOOL_FIELDS if tool_call.get(k) is not None}
        tool = _Tool(_operation_id(self.scope, tool_call_id), fields, "planned")
        self._tools[tool_call_id] = tool
        return tool

    def file_write(self, path: str, before: bytes | None, content: str) -> Recorded:
        """`fs/write_text_file` the editor carried out: a `file_edit` with both blobs."""
        blobs: dict[str, bytes] = {}
        after = _text_blob(content, blobs)
        if (path, after) in self._edits:
            return Recorded()
        before_sha = None
        if before is not None:
            before_sha = sha_of(before)
            blobs[before_sha] = before
        self._edits.add((path, after))
        item = self._file_edit(
            f"{self.scope}:w{self._take_ord()}", path, before_sha, after, self._tool_touching(path)
        )
        return Recorded([item], blobs)

    # --- helpers -------------------------------------------------------------------------

    def _take_ord(self) -> int:
        ord_ = self._ord
        self._ord += 1
        return ord_

    def _raw(
        self, ord_: int, update: dict[str, Any], meta: Any, *, synthesized: bool = False
    ) -> dict[str, Any]:
        raw: dict[str, Any] = {
            "type": "acp_update",
            "id": f"{self.scope}:u{ord_}",
            "scope": self.scope,
            "ord": ord_,
            "update": update,
        }
        if isinstance(meta, dict):
            raw["meta"] = meta
        if synthesized:
            raw["synthesized"] = True
        if self.turn_id is not None:
            raw["turnId"] = self.turn_id
        return raw

    def _flush_message(self) -> list[dict[str, Any]]:
        message, self._message = self._message, None
        if message is None:
            return []
        role, thought = CHUNKS[message.kind]
        item = {
            "type": "message",
            "id": f"{self.scope}:m{message.ord}",
            "role": role,
            "content": message.parts.done(),
            "turnId": self.turn_id,
            "origin": "acp",
            "messageId": message.message_id,
            "thought": True if thought else None,
            "agentSentAsUser": True if message.kind == "user_message_chunk" else None,
        }
        return [_clean(item)]

    def _tool_step(self, update: dict[str, Any], ord_: int) -> Recorded:
        tool_call_id = update.get("toolCallId")
        if not isinstance(tool_call_id, str):
            return Recorded()
        tool = self._tools.get(tool_call_id)
        if tool is None:
            tool = self._tools[tool_call_id] = _Tool(_operation_id(self.scope, tool_call_id), {})
        tool.fields.update((k, update[k]) for k in TOOL_FIELDS if update.get(k) is not None)
        if tool.parent is None and (parent := _parent_tool_call(update)) is not None:
            tool.parent = _operation_id(self.scope, parent)
        state = TOOL_STATES.get(str(tool.fields.get("status") or "pending"), "planned")
        if tool.state is not None and RANK[state] <= RANK[tool.state]:
            return Recorded()  # same step again (more content): the raw update has it
        tool.state = state
        out = Recorded()
        kind = tool.fields.get("kind") if isinstance(tool.fields.get("kind"), str) else None
        raw_input = tool.fields.get("rawInput")
        digest = None
        if raw_input is not None:
            digest = sha_of(json.dumps(raw_input, sort_keys=True, default=str).encode())
        # The call's arguments and output on its operation items too, bounded as search
        # indexes a record (restore/search/text.py); the raw updates beside hold them whole.
        given = None
        if raw_input is not None and raw_input != tool.recorded_input:
            tool.recorded_input = raw_input
            given = bounded(raw_input, MAX_TEXT)
        output = tool.fields.get("rawOutput") if state in ("committed", "failed") else None
        out.items.append(
            _clean(
                {
                    "type": "operation",
                    "id": f"{self.scope}:o{ord_}",
                    "operationId": tool.operation_id,
                    "tool": kind or "other",
                    "argsDigest": digest,
                    "effect": "read" if kind in READ_ONLY_KINDS else "side_effect",
                    "state": state,
                    "resultPersisted": state == "committed",
                    "turnId": self.turn_id,
                    "toolCallId": tool_call_id,
                    "parentOperationId": tool.parent,
                    "title": tool.fields.get("title"),
                    "rawInput": given,
                    "rawOutput": None if output is None else bounded(output, MAX_TEXT),
                    "status": tool.fields.get("status"),
                    "locations": tool.fields.get("locations"),
                    "content": _content_summary(tool.fields.get("content"), out.blobs),
                }
            )
        )
        if state == "committed":
            out.items += self._diff_edits(tool, ord_, out.blobs)
        return out

    def _diff_edits(self, tool: _Tool, ord_: int, blobs: dict[str, bytes]) -> list[dict[str, Any]]:
        edits = []
        for index, content in enumerate(tool.fields.get("content") or []):
            if not isinstance(content, dict) or content.get("type") != "diff":
                continue
            path = content.get("path")
            if not isinstance(path, str):
                continue
            after = _text_blob(content.get("newText"), blobs)
            if (path, after) in self._edits:
                continue
            self._edits.add((path, after))
            before = _text_blob(content.get("oldText"), blobs)
            edits.append(
                self._file_edit(
                    f"{self.scope}:e{ord_}.{index}", path, before, after, tool.operation_id
                )
            )
        return edits

    def _file_edit(
        self,
        item_id: str,
        path: str,
        before: str | None,
        after: str | None,
        operation_id: str | None,
    ) -> dict[str, Any]:
        return _clean(
            {
                "type": "file_edit",
                "id": item_id,
                "path": path,
                "beforeSha": before,
                "afterSha": after,
                "author": "agent",
                "operationId": operation_id,
                "turnId": self.turn_id,
                "origin": "acp",
            }
        )

    def _tool_touching(self, path: str) -> str | None:
        """The operation a file write belongs to: the latest tool call naming the path,
        else the latest one still running."""
        tools = list(self._tools.values())
        for tool in reversed(tools):
            if path in _paths(tool.fields):
                return tool.operation_id
        for tool in reversed(tools):
            if tool.state in ("planned", "started"):
                return tool.operation_id
        return None

    def _todos(self, entries: list[Any], ord_: int) -> dict[str, Any]:
        todos = []
        for index, entry in enumerate(entries):
            if not isinstance(entry, dict):
                continue
            status = entry.get("status")
            todo = {
                "id": str(index),
                "content": str(entry.get("content") or ""),
                "status": status if status in TODO_STATUSES else "pending",
            }
            if isinstance(entry.get("priority"), str):
                todo["priority"] = entry["priority"]
            todos.append(todo)
        item = {
            "type": "todos",
            "id": f"{self.scope}:d{ord_}",
            "items": todos,
            "turnId": self.turn_id,
        }
        return _clean(item)

    def _usage_update(self, update: dict[str, Any], ord_: int) -> list[dict[str, Any]]:
        """`usage_update.cost` is cumulative for AGENT's session: record what it grew by."""
        cost = update.get("cost")
        if not isinstance(cost, dict) or not isinstance(cost.get("amount"), int | float):
            return []
        amount = float(cost["amount"])
        delta = amount - self.cost_seen if amount >= self.cost_seen else amount
        self.cost_seen = amount
        delta = round(delta, 10)
        if delta <= 0:
            return []
        currency = cost.get("currency") if isinstance(cost.get("currency"), str) else None
        item = {
            "type": "cost",
            "id": f"{self.scope}:c{ord_}",
            "model": self.model or "unknown",
            "inputTokens": 0,
            "outputTokens": 0,
            "usd": delta if currency == "USD" else 0.0,
            "amount": delta,
            "currency": currency,
            "contextUsed": update.get("used"),
            "contextSize": update.get("size"),
            "turnId": self.turn_id,
        }
        return [_clean(item)]

    def _usage_cost(self, item_id: str, usage: dict[str, Any]) -> dict[str, Any]:
        """The prompt response's `usage`: this turn's tokens (money comes from
        `usage_update`, so it is not counted twice)."""

        def tokens(name: str) -> int | None:
            value = usage.get(name)
            return value if isinstance(value, int) and value >= 0 else None

        return _clean(
            {
                "type": "cost",
                "id": item_id,
                "model": self.model or "unknown",
                "inputTokens": tokens("inputTokens") or 0,
                "outputTokens": tokens("outputTokens") or 0,
                "usd": 0.0,
                "thoughtTokens": tokens("thoughtTokens"),
                "cachedReadTokens": tokens("cachedReadTokens"),
                "cachedWriteTokens": tokens("cachedWriteTokens"),
                "turnId": self.turn_id,
            }
        )

    def _mode_changed(self, mode: Any, ord_: int) -> list[dict[str, Any]]:
        if not isinstance(mode, str) or mode == self.mode:
            return []
        self.mode = mode
        item = {
            "type": "permissions",
            "id": f"{self.scope}:a{ord_}",
            "approvalMode": mode,
            "toolProfile": "acp-mode",
            "turnId": self.turn_id,
        }
        return [_clean(item)]

    def _model_changed(self, model: str | None, ord_: int) -> list[dict[str, Any]]:
        if model is None or model == self.model:
            return []
        self.model = model
        item = {
            "type": "model_override",
            "id": f"{self.scope}:n{ord_}",
            "model": model,
            "turnId": self.turn_id,
        }
        return [_clean(item)]


def _parent_tool_call(update: dict[str, Any]) -> str | None:
    """The tool call whose sub-agent made this one. ACP v1 has no sub-sessions: an agent
    that runs sub-agents sends their calls in the same session, and claude-agent-acp marks
    them `_meta.claudeCode.parentToolUseId` (the Agent/Task call). Recorded as the
    operation's `parentOperationId`, as Codex's nested calls are, so a transcript nests
    them under the call that started them."""
    meta = update.get("_meta")
    agent_meta = meta.get("claudeCode") if isinstance(meta, dict) else None
    parent = agent_meta.get("parentToolUseId") if isinstance(agent_meta, dict) else None
    return parent if isinstance(parent, str) and parent else None


def _model_of(value: dict[str, Any]) -> str | None:
    """The current model: the config option of category `model`, else the (unstable)
    `models.currentModelId` of a session answer."""
    for option in value.get("configOptions") or []:
        if not isinstance(option, dict):
            continue
        if option.get("category") == "model" or option.get("id") == "model":
            current = option.get("currentValue")
            if isinstance(current, str):
                return current
    models = value.get("models")
    if isinstance(models, dict) and isinstance(models.get("currentModelId"), str):
        return str(models["currentModelId"])
    return None


def _content_summary(content: Any, blobs: dict[str, bytes]) -> list[dict[str, Any]] | None:
    """Tool call content for the operation item: diffs by blob sha (their text is in the
    blobs and in the raw update), everything else as sent."""
    if not isinstance(content, list):
        return None
    summary = []
    for entry in content:
        if isinstance(entry, dict) and entry.get("type") == "diff":
            summary.append(
                _clean(
                    {
                        "type": "diff",
                        "path": entry.get("path"),
                        "oldSha": _text_blob(entry.get("oldText"), blobs),
                        "newSha": _text_blob(entry.get("newText"), blobs),
                    }
                )
            )
        elif isinstance(entry, dict):
            summary.append(entry)
    return summary
