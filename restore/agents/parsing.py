"""What every agent's parser shares: the skeleton, ids, timestamps, titles, costs.

A parser is fed one parsed record at a time with its line number and returns the items
that line becomes. Item ids are `L<line>` (and `L<line>.<k>` for a line's further items),
so the same line always gives the same ids: a second import is a no-op by idempotency,
and a thread holds exactly one source file (its identity is the thread's own).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any, ClassVar

import orjson

from restore.agents import pricing
from restore.ids import sha256_of
from restore.search.text import bounded

MESSAGE_CHARS = 1_000_000
"""A message longer than this is cut (and says so): one pasted log must not bloat a thread."""
RESULT_CHARS = 2_000
"""Tool results are kept as a preview; the source transcript still has them in full."""
INPUT_CHARS = 2_000
"""A tool call's arguments are kept as a preview too (their strings, the first this many
characters in all): searchable, and shown; the source transcript has them in full."""
TITLE_CHARS = 120
CHILD = "_child"
"""An item's field naming the sub-agent thread it belongs to (see `in_child`); the importer
takes it off before writing."""
TODO_STATUSES = ("pending", "in_progress", "completed")
# Wrappers Claude Code and Codex put around injected context; a title skips past them.
_WRAPPER = re.compile(
    r"^\s*<(command-message|command-name|system-reminder|ide_opened_file|ide_selection|"
    r"environment_context|user_instructions|local-command-stdout)>.*?</\1>\s*",
    re.DOTALL,
)


def normalize_ts(value: Any) -> str | None:
    """An ISO timestamp as sessiond writes them (UTC, microseconds, `Z`): sortable as text."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="microseconds")[:-6] + "Z"


COMMAND_CHARS = 2_000
"""The longest command a started call keeps beside its arguments."""


def effect(tool: str, read: Collection[str], idempotent: Collection[str] = ()) -> str:
    """What a call of `tool` does, by its agent's own lists of tools: `read` (nothing),
    `idempotent` (the same again if repeated), else `side_effect` (a shell, an edit, a
    sub-agent, an MCP tool: assume the worst)."""
    if tool in read:
        return "read"
    if tool in idempotent:
        return "idempotent"
    return "side_effect"


TRACKED_CHARS = 32_768
"""Files a session wrote whose contents a parser follows (to know an edit's before and
after): up to this size each, the `TRACKED_FILES` written last."""
TRACKED_FILES = 32


def remember_file(files: dict[str, str], path: str, text: str | None) -> None:
    """`path` now holds `text` (None: unknown): kept in `files` (a parser's state) if
    small enough, the oldest let go past `TRACKED_FILES`."""
    files.pop(path, None)
    if text is not None and len(text) <= TRACKED_CHARS:
        files[path] = text
        while len(files) > TRACKED_FILES:
            del files[next(iter(files))]


def truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[… {len(text) - limit:,} more characters in the source transcript]"


def digest(value: Any) -> str:
    """A stable digest of tool arguments, for the operation ledger."""
    return sha256_of(orjson.dumps(value, option=orjson.OPT_SORT_KEYS))


def called(arguments: Any) -> dict[str, Any]:
    """A started tool call's fields for its arguments: their digest (the operation ledger)
    and the arguments as the agent gave them, bounded (`INPUT_CHARS`), which search
    indexes (restore/search/text.py)."""
    fields: dict[str, Any] = {"argsDigest": digest(arguments)}
    if arguments not in (None, "", {}, []):
        fields["input"] = bounded(arguments, INPUT_CHARS)
    return fields


def sha_of_text(text: str) -> str:
    """A text's sha256, as a blob of its UTF-8 would be named (lone surrogates kept)."""
    return sha256_of(text.encode("utf-8", "surrogatepass"))


def title_from(text: str) -> str | None:
    """The first meaningful line of a user message, past injected wrappers."""
    while match := _WRAPPER.match(text):
        text = text[match.end() :]
    line = next((line.strip() for line in text.splitlines() if line.strip()), None)
    if line is None:
        return None
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1].rstrip() + "…"


def todo_status(value: Any) -> str:
    return value if value in TODO_STATUSES else "pending"


def text_of(content: Any) -> str:
    """The text of a content value: a string, or a list of blocks with `text`."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [block.get("text") for block in content if isinstance(block, dict)]
        return "\n".join(part for part in parts if isinstance(part, str) and part)
    return ""


class SourceParser:
    """Turns one source file's records into items; `state` is all it remembers.

    `state` is plain JSON so the importer can save it with its place in the file and
    continue later with the lines appended since, giving the same items as one pass.
    """

    AGENT: ClassVar[str]
    PROVIDER: ClassVar[str | None] = None
    """The agent's price source: whose price list (genai-prices' provider id) its models
    are on; None lets the library find the model's provider."""
    TITLE_ORDER: ClassVar[tuple[str, ...]]
    IGNORED: ClassVar[dict[str, str]] = {}
    """Record types and tools deliberately not mapped (`record:<type>` / `tool:<name>` →
    why): not reported. Anything else `unmapped` counts is reported."""
    SPAWN_MARKERS: ClassVar[tuple[bytes, ...]] = ()
    """Bytes every source line that names a sub-agent it started holds (`spawns`): the
    importer decodes only those lines when it looks for a sub-agent's tool call."""

    def read_of(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """What `handle` reads of `record` when that is a few fields of a large record it
        keeps nothing else of (a record type it only counts): all the redactor need look
        at before the record is fed (the rest is never stored, so never redacted). None:
        the whole record."""
        return None

    @classmethod
    def spawns(cls, record: dict[str, Any]) -> list[tuple[str, str]]:
        """(the sub-agent's key, the tool call that started it) for each sub-agent this
        record of a parent's transcript says it started. The key is what the sub-agent's
        own parser puts in `state["parent"]` to be found by (Claude Code: its agentId; the
        others: its session id). None by default: the agent has no sub-agents."""
        return []

    def __init__(self, state: dict[str, Any] | None = None, fallback_ts: str | None = None):
        self.state: dict[str, Any] = self.initial() if state is None else self.restored(state)
        if fallback_ts and not self.state.get("lastTs"):
            self.state["lastTs"] = fallback_ts
        self._out: list[dict[str, Any]] = []
        self._line = 0
        self._key = "L0"
        self._child: str | None = None
        """The sub-agent whose items the record being read gives (`in_child`), if any."""
        self._stamps: dict[Any, str] = {}
        self.unmapped_seen: dict[str, list[int]] = {}
        """`record:<type>` / `tool:<name>` → [count, first line] of what this parser met
        and does not map, in this run (not saved: a re-import reports only new lines)."""

    def initial(self) -> dict[str, Any]:
        return {
            "sessionId": None,
            "cwd": None,
            "branch": None,
            "commit": None,
            "created": None,
            "lastTs": None,
            "titles": {},
            "model": None,
            "permissions": None,
            "turn": None,
            "pending": {},
        }

    def restored(self, state: dict[str, Any]) -> dict[str, Any]:
        """A saved state, with what was added to `initial` since an earlier release saved
        it (the checkpoint of an import made then) as a fresh parser has it."""
        return {**self.initial(), **state}

    # --- what the importer reads --------------------------------------------------------

    @property
    def title(self) -> str | None:
        titles = self.state["titles"]
        return next((titles[key] for key in self.TITLE_ORDER if titles.get(key)), None)

    @property
    def last_ts(self) -> str | None:
        return self.state.get("lastTs")

    def feed(
        self, line_no: int, record: dict[str, Any], ts: Any = None, key: str | None = None
    ) -> list[dict[str, Any]]:
        """The items of one source line (none for lines that carry only metadata). `key`:
        what the record's items are named by instead of its line (`L<line>`): a database
        row's own id, the same however many rows come before it."""
        self._out = []
        self._line = line_no
        self._key = key or f"L{line_no}"
        stamp = self._stamps.get(ts) if isinstance(ts, str) else None
        if stamp is None:
            stamp = normalize_ts(ts)
            if stamp is not None:  # consecutive lines often share one: parse it once
                self._stamps = {ts: stamp}
        if stamp:
            self.state["lastTs"] = stamp
            self.state["created"] = self.state["created"] or stamp
        self.handle(record)
        return self._out

    def handle(self, record: dict[str, Any]) -> None:
        raise NotImplementedError

    def unmapped(self, kind: str, name: Any) -> None:
        """A record type or tool this mapping does not know. Never dropped silently: it is
        counted, with the first line it was seen on, for the import summary, `sessiond
        doctor` and the compatibility suite (which fails on any not on the parser's
        commented ignore list)."""
        key = f"{kind}:{name}"
        if key in self.IGNORED:
            return
        seen = self.unmapped_seen.get(key)
        if seen is None:
            self.unmapped_seen[key] = [1, self._line]
        else:
            seen[0] += 1

    def in_cwd(self, path: str) -> str:
        """A path the agent named, from the session's cwd (`state["cwd"]`; as it is
        without one)."""
        cwd = self.state.get("cwd")
        return posixpath.normpath(posixpath.join(cwd, path)) if cwd else path

    def call_fields(
        self,
        tool: str,
        arguments: dict[str, Any],
        shells: Collection[str],
        edits: Collection[str],
        path_key: str,
    ) -> dict[str, Any]:
        """What a started call records beside its arguments: a shell's `command` (cut to
        COMMAND_CHARS), an edit's `path` (its argument `path_key`, from the cwd)."""
        if tool in shells and isinstance(arguments.get("command"), str):
            return {"command": truncate(arguments["command"], COMMAND_CHARS)}
        if tool in edits and isinstance(arguments.get(path_key), str):
            return {"path": self.in_cwd(arguments[path_key])}
        return {}

    # --- building items -------------------------------------------------------------------

    def emit(self, item: dict[str, Any]) -> None:
        """Add an item with the line's deterministic id (`L<line>`, `L<line>.<k>`; a keyed
        record's `<key>`, `<key>.<k>`), turn and timestamp."""
        k = len(self._out)
        item["id"] = self._key if k == 0 else f"{self._key}.{k}"
        if self.state["turn"] and "turnId" not in item:
            item["turnId"] = self.state["turn"]
        if self.state["lastTs"]:
            item["ts"] = self.state["lastTs"]
        if self._child is not None:
            item[CHILD] = self._child
        self._out.append(item)

    def in_child(self, child: str | None) -> None:
        """The records that follow (until `in_child(None)`) are a sub-agent's whose events
        the agent writes into the parent's own file (Copilot CLI): their items go to the
        sub-agent's own thread (`CHILD` names it; `state["children"][child]` says which
        call started it and what it is called), not to this one."""
        self._child = child

    def message(self, role: str, text: str, **extra: Any) -> None:
        self.emit(
            {"type": "message", "role": role, "content": truncate(text, MESSAGE_CHARS), **extra}
        )

    def model(self, model: Any) -> None:
        if isinstance(model, str) and model and model != self.state["model"]:
            self.state["model"] = model
            self.emit({"type": "model_override", "model": model})

    def permissions(self, approval: str | None, sandbox: str | None) -> None:
        current = {"approvalMode": approval, "sandbox": sandbox}
        if approval and current != self.state["permissions"]:
            self.state["permissions"] = current
            self.emit({"type": "permissions", "approvalMode": approval, "sandbox": sandbox})

    def operation(self, call_id: str, tool: str, effect: str, **fields: Any) -> None:
        self.emit(
            {"type": "operation", "operationId": call_id, "tool": tool, "effect": effect, **fields}
        )

    def result(
        self, call_id: str, tool: str, effect: str, text: str, failed: bool, **extra: Any
    ) -> None:
        """A tool call's outcome: committed with its (previewed) result, or failed."""
        self.operation(
            call_id,
            tool,
            effect,
            state="failed" if failed else "committed",
            resultPersisted=True,
            result=truncate(text, RESULT_CHARS),
            **extra,
        )

    def todos(self, entries: list[tuple[str, str, Any]]) -> None:
        """(id, content, status) triples; the whole list, as the agent last wrote it."""
        items = [{"id": i, "content": c, "status": todo_status(s)} for i, c, s in entries]
        self.emit({"type": "todos", "items": items})

    def file_edit(
        self,
        path: str,
        call_id: str,
        before: str | None,
        after: str | None,
        known: bool,
        **extra: Any,
    ) -> None:
        """One file the agent changed. Without its contents (`known` false) the shas are
        unknown, and file_history says so instead of calling the file diverged. `extra`:
        what else the source tells of the edit (its kind, its diff)."""
        self.emit(
            {
                "type": "file_edit",
                "path": path,
                "author": "agent",
                "operationId": call_id,
                "beforeSha": sha_of_text(before) if known and before is not None else None,
                "afterSha": sha_of_text(after) if known and after is not None else None,
                "contentKnown": known,
                **extra,
            }
        )

    def price_source(self) -> str | None:
        """Whose price list the current model is on (the agent's `PROVIDER` by default)."""
        return self.PROVIDER

    def cost(
        self,
        *,
        fresh: int,
        cache_write: int,
        cache_read: int,
        output: int,
        cache_write_1h: int = 0,
        model: str | None = None,
        kind: str = "cost",
    ) -> None:
        """Tokens of one model call (USD when the model's price is known); `cache_write_1h`:
        how many of its cache writes were kept for an hour (their own price). `model`:
        another than the session's current one; `kind` `cost_reported`: tokens the agent's
        own totals hold beyond the transcript's replies, priced as one call."""
        if fresh + cache_write + cache_read + output <= 0:
            return
        model = model or self.state["model"] or "unknown"
        priced = pricing.usd(
            model,
            fresh=fresh,
            cache_write=cache_write,
            cache_read=cache_read,
            output=output,
            provider=self.price_source(),
            at=self.state["lastTs"],
            cache_write_1h=cache_write_1h,
        )
        self.emit(
            {
                "type": kind,
                "model": model,
                "inputTokens": fresh + cache_write + cache_read,
                "outputTokens": output,
                "usd": priced or 0.0,
                "priced": priced is not None,
                "cacheReadTokens": cache_read,
                "cacheWriteTokens": cache_write,
            }
        )
