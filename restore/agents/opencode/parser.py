"""OpenCode sessions (rows of `opencode.db`, store.py) → items.

OpenCode keeps a session as rows (packages/opencode/src/session): the `session` row
(`directory`, `title`, `parent_id` for a sub-agent's, OpenCode's own token and cost totals),
its `message` rows (`data`: `role`, `time`, an assistant's `modelID`/`providerID`, `tokens`,
`cost`, `finish`, `error`) and each message's `part` rows (`data.type`: `text`,
`reasoning`, `tool` with `state {status, input, output, metadata, error}`,
`step-start`, `step-finish` with the step's `tokens` and `cost`, `patch`, `file`,
`agent`, `subtask`, `compaction`, `retry`, `snapshot`). Rows are updated in place while
a turn streams, so the store reads the session whole each time it changes and the parser
maps each row as it is then; every item is named by its row's id (and stage), so a row
read again gives nothing new and a row that moved on (a tool call that finished) gives
only what it adds. The mapping is docs/import.md's.

A shell command that exits non-zero is recorded `completed` with `metadata.exit`: it is
marked failed here. Tokens are priced with genai-prices (the model's own provider when
genai-prices knows it); OpenCode's own figure for each step (`cost`, from the model's
price in its config or models.dev) rides along as `agentUsd`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from restore.agents.identity import thread_id_for
from restore.agents.parsing import (
    RESULT_CHARS,
    SourceParser,
    called,
    effect,
    remember_file,
    title_from,
    truncate,
)

AGENT = "opencode"
READ_TOOLS = frozenset(
    {
        "read",
        "glob",
        "grep",
        "list",
        "webfetch",
        "websearch",
        "codesearch",
        "lsp",
        "todoread",
        "skill",
        "question",
    }
)
IDEMPOTENT_TOOLS = frozenset({"todowrite", "plan_enter", "plan_exit"})
EDIT_TOOLS = frozenset({"write", "edit", "multiedit", "apply_patch", "patch"})
SHELL_TOOLS = frozenset({"bash"})
SUBAGENT_TOOLS = frozenset({"task"})
KNOWN_TOOLS = (
    READ_TOOLS | IDEMPOTENT_TOOLS | EDIT_TOOLS | SHELL_TOOLS | SUBAGENT_TOOLS | {"batch", "invalid"}
)
"""Tools whose effect is known; any other (an MCP tool, a plugin's) is recorded as a side
effect and reported unmapped."""
FINAL = {"completed": False, "error": True}
PROVIDERS = {"openai": "openai", "anthropic": "anthropic", "google": "google",
             "openrouter": "openrouter", "deepseek": "deepseek", "mistral": "mistral",
             "groq": "groq", "xai": "x-ai", "azure": "azure", "amazon-bedrock": "aws"}  # fmt: skip
"""OpenCode's provider ids whose price list genai-prices has (other providers, a custom one
say, let the library find the model by name)."""
PLACEHOLDER_TITLES = ("New session - ", "Child session - ")


def handoff(session_id: str) -> list[str]:
    """The command that continues the session in OpenCode itself (its terminal UI on that
    session: `opencode --session ID`, checked against 1.18's `--help`)."""
    return ["opencode", "--session", session_id]


def iso_ms(value: Any) -> str | None:
    """OpenCode's times are milliseconds since the epoch."""
    if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
        return None
    moment = datetime.fromtimestamp(value / 1000, UTC)
    return moment.isoformat(timespec="microseconds")[:-6] + "Z"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


class OpenCodeParser(SourceParser):
    """OpenCode's rows; a fork of OpenCode (Kilo) keeps the same rows and names more tools
    (its subclass says which)."""

    AGENT = AGENT
    PROVIDER = None  # the provider each message names (`price_source`)
    READ_TOOLS: ClassVar[frozenset[str]] = READ_TOOLS
    IDEMPOTENT_TOOLS: ClassVar[frozenset[str]] = IDEMPOTENT_TOOLS
    KNOWN_TOOLS: ClassVar[frozenset[str]] = KNOWN_TOOLS
    TITLE_ORDER: ClassVar[tuple[str, ...]] = ("agent", "first")
    IGNORED: ClassVar[dict[str, str]] = {
        "part:step-start": "where a step began (its file snapshot's hash): the step's items "
        "follow it",
        "part:patch": "the files a step changed, by snapshot hash: each edit is mapped from "
        "the tool call that made it",
        "part:snapshot": "a file snapshot's hash, for OpenCode's own undo",
        "part:retry": "a model call OpenCode retried: the call that answered is mapped",
        "part:agent": "the @agent a prompt named: the prompt's text is mapped",
        "part:compaction": "where OpenCode compacted the conversation: the summary that "
        "follows is mapped as the agent's message",
    }

    def effect_of(self, tool: str) -> str:
        return effect(tool, self.READ_TOOLS, self.IDEMPOTENT_TOOLS)

    def initial(self) -> dict[str, Any]:
        return {
            **super().initial(),
            "parent": None,
            "roles": {},
            "files": {},
            "provider": None,
            "done": {},
        }

    def handle(self, record: dict[str, Any]) -> None:
        kind = record.get("type")
        if kind == "session":
            self._session(record)
        elif kind == "message":
            self._message(record)
        elif kind == "part":
            self._part(record)
        elif kind == "todos":
            self._todo_table(record)
        else:
            self.unmapped("record", kind)

    # --- the session and its messages --------------------------------------------------------

    def _session(self, row: dict[str, Any]) -> None:
        state = self.state
        state["sessionId"] = state["sessionId"] or row.get("id")
        directory = row.get("directory")
        if isinstance(directory, str) and directory:
            state["cwd"] = state["cwd"] or directory
        state["created"] = state["created"] or iso_ms(row.get("time_created"))
        title = row.get("title")
        if isinstance(title, str) and title.strip() and not title.startswith(PLACEHOLDER_TITLES):
            state["titles"]["agent"] = title_from(title)
        parent = row.get("parent_id")
        if isinstance(parent, str) and parent:
            state["parent"] = {"sessionId": parent, "toolCallId": None}

    def _message(self, record: dict[str, Any]) -> None:
        message_id = str(record.get("id"))
        role = record.get("role")
        self.state["roles"][message_id] = role
        if role == "user":
            self.state["turn"] = message_id
            return
        if role != "assistant":
            self.unmapped("record", f"message:{role}")
            return
        provider = record.get("providerID")
        self.state["provider"] = provider if isinstance(provider, str) else None
        self.model(record.get("modelID"))
        error = _dict(record.get("error"))
        if error:
            data = _dict(error.get("data"))
            text = data.get("message") if isinstance(data.get("message"), str) else None
            self.message("system", text or str(error.get("name") or "error"), level="error")

    # --- parts --------------------------------------------------------------------------------

    def _part(self, record: dict[str, Any]) -> None:
        kind = record.get("kind")
        role = self.state["roles"].get(str(record.get("messageID")))
        if kind == "text":
            self._text(record, role)
        elif kind == "reasoning":
            if _dict(record.get("time")).get("end") is not None:
                text = record.get("text")
                if isinstance(text, str) and text.strip():
                    self.message("assistant", text, thought=True)
        elif kind == "tool":
            self._tool(record)
        elif kind == "step-finish":
            self._step(record)
        elif kind == "file":
            self._file(record, role)
        elif kind == "subtask":
            prompt = record.get("prompt")
            if isinstance(prompt, str) and prompt.strip():
                self.message("user", prompt)
        else:
            self.unmapped("part", kind)

    def _text(self, record: dict[str, Any], role: Any) -> None:
        text = record.get("text")
        if not isinstance(text, str) or not text.strip():
            return
        if role == "user":
            if record.get("synthetic") is True:
                return  # OpenCode's own text beside a prompt (a file it read for it, say)
            if not self.state["titles"].get("first"):
                self.state["titles"]["first"] = title_from(text)
            self.message("user", text)
        elif _dict(record.get("time")).get("end") is not None:
            self.message("assistant", text)  # written whole once it stops streaming

    def _file(self, record: dict[str, Any], role: Any) -> None:
        """A file attached to a prompt (`@file`, an image): named, not inlined."""
        name = record.get("filename") or record.get("url")
        if isinstance(name, str) and name:
            self.message("user" if role == "user" else "assistant", f"[attached: {name}]")

    def _step(self, record: dict[str, Any]) -> None:
        """One model call: its tokens (input without the cache reads and writes, which
        are counted apart; reasoning billed as output), and OpenCode's own price of it."""
        tokens = _dict(record.get("tokens"))
        cache = _dict(tokens.get("cache"))
        fresh, read, write = (
            _int(tokens.get("input")),
            _int(cache.get("read")),
            _int(cache.get("write")),
        )
        output = _int(tokens.get("output")) + _int(tokens.get("reasoning"))
        before = len(self._out)
        self.cost(fresh=fresh, cache_write=write, cache_read=read, output=output)
        agent_usd = record.get("cost")
        if len(self._out) > before and isinstance(agent_usd, int | float):
            self._out[-1]["agentUsd"] = float(agent_usd)

    def price_source(self) -> str | None:
        """The provider the current message names, when genai-prices has its list."""
        provider = self.state["provider"]
        return PROVIDERS.get(provider) if isinstance(provider, str) else None

    # --- tool calls -----------------------------------------------------------------------

    def _tool(self, record: dict[str, Any]) -> None:
        """Started when first seen, then its outcome once it is final; each once (a row
        read again maps to the same item ids)."""
        tool = str(record.get("tool") or "unknown")
        call_id = str(record.get("callID") or record.get("id"))
        status = _dict(record.get("state"))
        arguments = _dict(status.get("input"))
        effect = self.effect_of(tool)
        if tool not in self.KNOWN_TOOLS:
            self.unmapped("tool", tool)
        extra = self.call_fields(tool, arguments, SHELL_TOOLS, EDIT_TOOLS, "filePath")
        self.operation(call_id, tool, effect, state="started", **called(arguments), **extra)
        final = status.get("status")
        if final not in FINAL:
            return  # pending or running: its outcome comes with a later read
        failed = FINAL[final]
        metadata = _dict(status.get("metadata"))
        output = status.get("output") if not failed else status.get("error")
        text = output if isinstance(output, str) else ""
        outcome: dict[str, Any] = {}
        if tool in SHELL_TOOLS:
            code = metadata.get("exit")
            if isinstance(code, int) and not isinstance(code, bool):
                outcome["exitCode"] = code
                failed = failed or code != 0  # OpenCode says `completed` whatever the exit
        elif tool in SUBAGENT_TOOLS and isinstance(metadata.get("sessionId"), str):
            child = metadata["sessionId"]
            outcome.update(childSessionId=child, childThreadId=thread_id_for(self.AGENT, child, 1))
        self.result(call_id, tool, effect, text, failed, **outcome)
        if failed:
            return
        if tool in EDIT_TOOLS:
            self._edit(call_id, tool, arguments, metadata)
        elif tool == "todowrite" and isinstance(arguments.get("todos"), list):
            self._todos(arguments["todos"])

    def _edit(
        self, call_id: str, tool: str, arguments: dict[str, Any], metadata: dict[str, Any]
    ) -> None:
        """write: the whole file (and whether it existed); edit: a string replaced, whose
        before and after are known when the session wrote the file before (else only the
        diff OpenCode shows). Other edit tools: the diff alone."""
        path = arguments.get("filePath") or metadata.get("filepath")
        if not isinstance(path, str) or not path:
            return
        path = self.in_cwd(path)
        files = self.state["files"]
        diff = metadata.get("diff") if isinstance(metadata.get("diff"), str) else None
        if tool == "write" and isinstance(arguments.get("content"), str):
            after = arguments["content"]
            existed = metadata.get("exists")
            before = files.get(path) if existed is not False else None
            known = existed is False or before is not None
            self.file_edit(path, call_id, before, after, known, kind="write")
            remember_file(self.state["files"], path, after)
            return
        before = files.get(path)
        after = None
        old, new = arguments.get("oldString"), arguments.get("newString")
        if (
            tool == "edit"
            and isinstance(before, str)
            and isinstance(old, str)
            and (isinstance(new, str) and old in before)
        ):
            every = arguments.get("replaceAll") is True
            after = before.replace(old, new) if every else before.replace(old, new, 1)
        known = after is not None
        extra: dict[str, Any] = {"kind": tool}
        if diff:
            extra["diff"] = truncate(diff, RESULT_CHARS * 10)
        self.file_edit(path, call_id, before if known else None, after, known, **extra)
        remember_file(self.state["files"], path, after)

    def _todos(self, todos: list[Any]) -> None:
        entries = [
            (str(t.get("id") or n), str(t.get("content") or ""), t.get("status"))
            for n, t in enumerate(todos, 1)
            if isinstance(t, dict)
        ]
        self.state["done"]["todos"] = [[c, str(s)] for _, c, s in entries]
        self.todos(entries)

    def _todo_table(self, record: dict[str, Any]) -> None:
        """The session's todo list as its own table keeps it: mapped only when no todowrite
        call said it (a list set some other way)."""
        rows = [r for r in record.get("todos") or [] if isinstance(r, dict)]
        listed = [[str(r.get("content") or ""), str(r.get("status"))] for r in rows]
        if not rows or listed == self.state["done"].get("todos"):
            return
        self.todos(
            [(str(n), str(r.get("content") or ""), r.get("status")) for n, r in enumerate(rows, 1)]
        )
