"""Item types: the durable records of a thread (docs/protocol.md, docs/storage.md#item-types).

Clients record the types in `RecordableItem`; the server writes `session_meta`,
`lifecycle` and `thread_title` itself. Every stored line also carries `v`, `seq`, `ts` and
`sessionId`, stamped by the store. Unknown fields are kept (a newer client may add some).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter

from protocol.base import WireModel
from protocol.json_text import deepest_past
from protocol.names import PRINTABLE

ITEM_ID_MAX = 128
"""Client-chosen ids are bounded so one bad client cannot bloat the idempotency set."""

ItemId = Annotated[str, Field(min_length=1, max_length=ITEM_ID_MAX, pattern=PRINTABLE)]

ITEM_DEPTH_MAX = 128
"""How deeply an item's values may nest (the item itself is level 1). What agents record is
shallow; the stores' encoder stops at 255 levels and pydantic's serializer a little before,
so a deeper item is refused up front, by name, instead of failing inside the writer."""


def nests_deeper(value: Any, limit: int = ITEM_DEPTH_MAX) -> bool:
    """Whether `value` (parsed JSON) has containers nested more than `limit` levels deep."""
    return deepest_past(value, limit) is not None


LifecycleSource = Literal["startup", "resume", "clear", "compact", "reset"]
ResetReason = Literal["daily", "idle"]


class ItemBase(WireModel):
    model_config = ConfigDict(extra="allow")

    id: ItemId = Field(
        description="Chosen by the client, unique in the thread (1-128 chars, e.g. a UUID): "
        "the idempotency key. Recording an id again writes nothing and answers its seq."
    )
    turnId: str | None = Field(None, description="The turn the item belongs to.")


class ContentPart(WireModel):
    """One part of a multi-part message (text, image, ...); images carry base64 `data`."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(description="The part's kind: `text`, `image`, ...")
    text: str | None = Field(None, description="The text of a `text` part.")


class MessageItem(ItemBase):
    type: Literal["message"] = Field("message", description="`message`.")
    role: Literal["user", "assistant", "system", "tool"] = Field(
        description="Who speaks: `user`, `assistant` (the agent), `system`, `tool` (a tool's "
        "output)."
    )
    content: str | list[ContentPart] = Field(description="Text, or a list of parts.")
    thought: bool | None = Field(
        None,
        description="The agent's reasoning as it went (ACP `agent_thought_chunk`, Gemini CLI's "
        "`thoughts`), not its answer: shown apart, folded, and never replayed to an agent as "
        "what it said.",
    )


class TurnItem(ItemBase):
    type: Literal["turn"] = Field("turn", description="`turn`.")
    turnId: str = Field(description="The turn's id, chosen by the client; items carry it too.")
    phase: Literal["started", "completed", "interrupted"] = Field(
        description="`started` when the user's request arrives; `completed` or `interrupted` "
        "when the agent's work on it ends."
    )
    continueReason: str | None = Field(None, description="Why the turn continues, in words.")
    agentContext: list[ContentPart] | None = Field(
        None,
        description="`sessiond acp`, on `started`: the content blocks sent to the agent ahead "
        "of the user's prompt (SessionStart hooks' additionalContext), exactly as sent. Not "
        "the user's words: never replayed as a user message.",
    )
    promptSections: list[str] | None = Field(
        None, description="The `prompt_section` names `agentContext` carried."
    )


class OperationItem(ItemBase):
    type: Literal["operation"] = Field("operation", description="`operation`.")
    operationId: str = Field(
        min_length=1,
        max_length=ITEM_ID_MAX,
        description="The tool call's id; every state of one call shares it.",
    )
    tool: str = Field(description="The tool's name, e.g. `edit_file`, `run_tests`.")
    argsDigest: str | None = Field(
        None, description="A digest of the call's arguments (e.g. sha256), to tell calls apart."
    )
    effect: Literal["read", "idempotent", "side_effect"] = Field(
        description="`read` (changes nothing), `idempotent` (safe to repeat), `side_effect` "
        "(never repeated automatically)."
    )
    state: Literal["planned", "started", "committed", "failed"] = Field(
        description="`planned`, then `started`, then `committed` or `failed`; a state may not "
        "move backwards (ConflictingOperation)."
    )
    resultPersisted: bool = Field(False, description="The result is recorded in this item.")
    result: Any = Field(None, description="The tool's result, any JSON.")
    command: str | None = Field(
        None, description="A shell tool's command line, as the agent ran it (on `started`)."
    )
    input: Any = Field(
        None,
        description="The call's arguments as the agent gave them, any JSON (on `started`; an "
        "import keeps their strings' first 2,000 characters): searched with the call, as "
        "`result` is with its output.",
    )
    exitCode: int | None = Field(None, description="A shell command's exit code, when known.")
    childThreadId: str | None = Field(
        None,
        description="A call that ran a sub-agent: the sub-agent's thread (started with "
        "`thread/start {parentThreadId}`). Its cost is counted in this thread's cost line.",
    )


class CostItem(ItemBase):
    type: Literal["cost"] = Field("cost", description="`cost`.")
    model: str = Field(description="The model that was called.")
    inputTokens: int = Field(ge=0, description="Tokens sent to the model.")
    outputTokens: int = Field(ge=0, description="Tokens the model produced.")
    usd: float = Field(ge=0, description="What the call cost, in US dollars.")
    priced: bool = Field(
        default=True,
        description="False when the model's price is unknown: `usd` is 0 and only the "
        "tokens count (imported sessions of unlisted models).",
    )


class TodoEntry(WireModel):
    model_config = ConfigDict(extra="allow")

    id: str = Field(description="The entry's id, stable across updates.")
    content: str = Field(description="What is to be done.")
    status: Literal["pending", "in_progress", "completed"] = Field(
        description="`pending`, `in_progress` or `completed`."
    )


class TodosItem(ItemBase):
    type: Literal["todos"] = Field("todos", description="`todos`.")
    items: list[TodoEntry] = Field(description="The whole list as it is now (not a change).")


class FileEditItem(ItemBase):
    type: Literal["file_edit"] = Field("file_edit", description="`file_edit`.")
    path: str = Field(description="The edited file.")
    beforeSha: str | None = Field(
        None, description="sha256 (hex) of the file before (null: it did not exist)."
    )
    afterSha: str | None = Field(
        None, description="sha256 (hex) of the file after (null: it was removed)."
    )
    author: Literal["agent", "user"] = Field("agent", description="Who made the edit.")
    operationId: str | None = Field(None, description="The operation that made it.")
    contentKnown: bool = Field(
        default=True,
        description="False when the edit was recorded without the file's contents (an "
        "imported diff): the shas are unknown and resume cannot say whether it diverged.",
    )


class ModelOverrideItem(ItemBase):
    type: Literal["model_override"] = Field("model_override", description="`model_override`.")
    model: str = Field(description="The model chosen for the thread from now on.")


class Permissions(WireModel):
    """What the agent may do; restored from the record, never guessed from prompt text."""

    model_config = ConfigDict(extra="allow")

    approvalMode: str = Field(
        description="When the agent asks before acting, e.g. `on-request`, `untrusted`; a "
        "mode that never asks (`never`, `bypassPermissions`, ...) is downgraded on resume."
    )
    sandbox: str | None = Field(None, description="The sandbox policy, e.g. `workspace-write`.")
    toolProfile: str | None = Field(None, description="The set of tools enabled.")


class PermissionsItem(ItemBase, Permissions):
    type: Literal["permissions"] = Field("permissions", description="`permissions`.")


class PromptSectionItem(ItemBase):
    type: Literal["prompt_section"] = Field("prompt_section", description="`prompt_section`.")
    name: str = Field(description="The section's name; a later item of the same name replaces it.")
    content: str = Field(description="The section's text.")
    path: str | None = Field(
        None, description="The file it was read from (AGENTS.md, ...); checked on resume."
    )
    sha: str | None = Field(None, description="sha256 (hex) of the file's content when read.")
    cacheable: bool = Field(False, description="The model provider may cache this section.")


class VerifierItem(ItemBase):
    type: Literal["verifier"] = Field("verifier", description="`verifier`.")
    name: str = Field(description="The check, e.g. `pytest`.")
    passed: int = Field(ge=0, description="Checks that passed.")
    total: int = Field(ge=0, description="Checks that ran.")
    headSha: str | None = Field(
        None, description="The git HEAD they ran at; a later HEAD invalidates the result."
    )


RecordableItem = Annotated[
    MessageItem
    | TurnItem
    | OperationItem
    | CostItem
    | TodosItem
    | FileEditItem
    | ModelOverrideItem
    | PermissionsItem
    | PromptSectionItem
    | VerifierItem,
    Field(discriminator="type"),
]


class SessionMetaItem(ItemBase):
    """First line of every session: where it ran and why it began."""

    type: Literal["session_meta"] = Field("session_meta", description="`session_meta`.")
    threadId: str = Field(description="The thread.")
    source: LifecycleSource = Field(
        description="Why the session began: `startup`, `resume`, `clear`, `compact`, or "
        "`reset` (the first session of a thread `thread/continue` started in place of its "
        "key's previous one)."
    )
    reason: str = Field(
        "user",
        description="Who or what asked: `user`, `process_recovery`, `acceptDrift`, `fork`; "
        "a `reset`'s `daily` or `idle`.",
    )
    resumedFrom: str | None = Field(None, description="The session this one continues.")
    forkedFrom: dict[str, Any] | None = Field(
        None, description="`{threadId, seq}` this thread was forked from."
    )
    origin: dict[str, Any] | None = Field(
        None,
        description="Set on the first session of a thread that mirrors another agent's "
        "session (see ThreadOrigin).",
    )
    cwd: str = Field(description="Working directory.")
    workspaceFolder: str | None = Field(None, description="The workspace folder it is filed under.")
    repoRoot: str | None = Field(None, description="Root of the git repository (null: none).")
    branch: str | None = Field(None, description="Git branch (null: detached or no repository).")
    headSha: str | None = Field(None, description="Git HEAD commit.")
    title: str | None = Field(None, description="The title given at start.")
    model: str | None = Field(None, description="The model in use.")
    permissions: Permissions | None = Field(None, description="What the agent may do.")
    client: dict[str, Any] | None = Field(None, description="The client's `clientInfo`.")
    sessionKey: str | None = Field(
        None,
        description="First session only: the thread's session key (`thread/start` or "
        "`thread/continue`), kept for the thread's whole life.",
    )
    previousThreadId: str | None = Field(
        None, description="A `reset`'s first session: the thread this one replaces."
    )
    resetReason: ResetReason | None = Field(
        None, description="A `reset`'s first session: why (`daily` or `idle`)."
    )


class ThreadSuccessorItem(ItemBase):
    """Server-written by `thread/continue`'s reset into the thread it replaced: which thread
    the key went on in. Bookkeeping: it neither counts as an item nor moves the thread in
    the list."""

    type: Literal["thread_successor"] = Field("thread_successor", description="`thread_successor`.")
    nextThreadId: str = Field(description="The thread that replaced this one for its key.")
    resetReason: ResetReason = Field(description="Why: `daily` or `idle`.")


class ClearBoundaryItem(ItemBase):
    """thread/clear: the conversation restarts empty after this point."""

    type: Literal["clear_boundary"] = Field("clear_boundary", description="`clear_boundary`.")
    endedSessionId: str = Field(description="The session the clear ended.")


class CompactBoundaryItem(ItemBase):
    """thread/compact: history before this point is replaced by `summary`."""

    type: Literal["compact_boundary"] = Field("compact_boundary", description="`compact_boundary`.")
    summary: str = Field(description="What replaces the history before this point.")


class RewindBoundaryItem(ItemBase):
    """thread/rewind: the conversation continues from the end of `toTurnId`."""

    type: Literal["rewind_boundary"] = Field("rewind_boundary", description="`rewind_boundary`.")
    toSeq: int = Field(description="Seq of the last item kept.")
    toTurnId: str = Field(description="The turn rewound to.")


class DriftAcceptedItem(ItemBase):
    """thread/resume with acceptDrift: the user chose to continue in a changed workspace."""

    type: Literal["drift_accepted"] = Field("drift_accepted", description="`drift_accepted`.")
    drift: list[dict[str, Any]] = Field(description="The drift accepted (DriftEntry objects).")


class ThreadTitleItem(ItemBase):
    type: Literal["thread_title"] = Field("thread_title", description="`thread_title`.")
    title: str = Field(description="The thread's new title.")


class ImportCheckpointItem(ItemBase):
    """Server-written at the end of each import of a source file into its thread."""

    type: Literal["import_checkpoint"] = Field(
        "import_checkpoint", description="`import_checkpoint`."
    )
    source: str = Field(description="The source transcript's path.")
    agent: str = Field(description="`claude-code` or `codex`.")
    sessionId: str = Field(description="The agent's session id (what its resume takes).")
    revision: int = Field(description="The import revision this thread holds.")
    threadId: str = Field(description="This thread.")
    offset: int = Field(description="Bytes of the source read so far.")
    lines: int = Field(description="Lines of the source read so far.")
    lineStart: int = Field(description="Where the last line read starts.")
    headSha: str = Field(description="sha256 of the source's first min(offset, 4096) bytes.")
    tailSha: str = Field(
        description="sha256 of the last line read (rewrites are detected by these two)."
    )
    size: int = Field(description="The source's size when it was read.")
    mtimeNs: int = Field(description="The source's modification time when it was read.")
    parser: dict[str, Any] = Field(description="The parser's state, to continue from here.")
    skipped: list[dict[str, Any]] = Field(
        default_factory=list, description="Source lines skipped in this import (first 100)."
    )
    skippedCount: int = Field(default=0, description="Source lines skipped in this import.")
    repairedLines: int = Field(
        default=0,
        description="Lines kept with invalid UTF-8 or a lone surrogate escape replaced by U+FFFD.",
    )


class CostReportedItem(ItemBase):
    """Server-written by an import: model calls an agent's own running totals count that no
    line of its transcript records (Claude Code's `cost-state`: its `/compact` calls, and
    its sub-agents' calls, which their own threads count), over one stretch of the
    session, for one model. The cost subsystem shows what is left of them once the
    sub-agents' costs are taken out as its `unrecorded` line."""

    type: Literal["cost_reported"] = Field("cost_reported", description="`cost_reported`.")
    model: str = Field(description="The model the calls went to.")
    inputTokens: int = Field(ge=0, description="Input tokens (cache reads and writes included).")
    outputTokens: int = Field(ge=0, description="Output tokens.")
    cacheReadTokens: int = Field(0, ge=0, description="Input tokens read from the cache.")
    cacheWriteTokens: int = Field(0, ge=0, description="Input tokens written to the cache.")
    usd: float = Field(ge=0, description="What they cost, priced as one call (genai-prices).")
    priced: bool = Field(True, description="False when the model's price is unknown.")


class AcpUpdateItem(ItemBase):
    """Server-written by `sessiond acp`: one ACP `session/update` exactly as the editor was
    shown it (the user's prompt too, which agents do not echo), so `session/load` replays
    the conversation verbatim. The merged `message`, `operation`, `todos`, ... items derived
    from it are written beside it; this one is what a replay sends."""

    type: Literal["acp_update"] = Field("acp_update", description="`acp_update`.")
    scope: str = Field(description="The turn (or idle span) the update belongs to.")
    ord: int = Field(ge=0, description="Its position in the scope; derived item ids use it.")
    update: dict[str, Any] = Field(description="The ACP `update` object, `_meta` included.")
    meta: dict[str, Any] | None = Field(
        default=None, description="The notification's own `_meta`, if it had one."
    )
    synthesized: bool = Field(
        default=False,
        description="True for a `user_message_chunk` made from the user's prompt: the "
        "editor showed the prompt itself, a replay must show it too.",
    )


class AcpSessionItem(ItemBase):
    """Server-written by `sessiond acp`: which session of the proxied agent (AGENT) this
    thread is talking to now, and how it got there. A new one after AGENT restarts."""

    type: Literal["acp_session"] = Field("acp_session", description="`acp_session`.")
    agentSessionId: str = Field(description="AGENT's own ACP session id.")
    via: Literal["new", "resume", "load"] = Field(
        description="How the proxy reached it: a new AGENT session (primed with the "
        "restored history when the thread had one), AGENT's session/resume, or its "
        "session/load with its own replay held back."
    )
    agentCommand: list[str] | None = Field(
        default=None, description="The AGENT command line (argv) that was spawned."
    )


class PermissionDecisionItem(ItemBase):
    """Server-written: the user's answer to an agent's permission request (ACP
    `session/request_permission`). The attribution subsystem counts approvals and
    rejections per file: a change the user approved is still the agent's change."""

    type: Literal["permission_decision"] = Field(
        "permission_decision", description="`permission_decision`."
    )
    toolCallId: str | None = Field(default=None, description="The tool call it was about.")
    operationId: str | None = Field(default=None, description="Its `operation` item's id.")
    title: str | None = Field(default=None, description="What the agent asked to do.")
    paths: list[str] = Field(default_factory=list, description="Files the tool call touches.")
    outcome: Literal["selected", "cancelled"] = Field(
        description="`cancelled`: the turn was cancelled before the user chose."
    )
    optionId: str | None = Field(default=None, description="The option the user chose.")
    optionKind: str | None = Field(
        default=None, description="allow_once, allow_always, reject_once or reject_always."
    )
    allowed: bool = Field(description="Whether the chosen option lets the tool call run.")


HookStatus = Literal["started", "completed", "failed", "timed_out"]


class LifecycleItem(ItemBase):
    """Server-written: a lifecycle hook run, or the end of a session.

    A session's start is recorded by its `session_meta` (source, reason, resumedFrom,
    forkedFrom); its end by `status: "ended"` with the `reason` (close, clear, shutdown).
    A hook run is two items sharing `runId`: `started`, then `completed`, `failed` or
    `timed_out`. The line's own `sessionId` is whichever session was writing; the session
    the event is about is `targetSessionId`.
    """

    type: Literal["lifecycle"] = Field("lifecycle", description="`lifecycle`.")
    event: Literal["SessionStart", "SessionEnd"] = Field(description="The lifecycle event.")
    targetSessionId: str = Field(description="The session the event is about.")
    status: Literal["ended"] | HookStatus = Field(
        description="`ended` (the session's end), or a hook run's `started`, `completed`, "
        "`failed`, `timed_out`."
    )
    source: LifecycleSource | None = Field(None, description="SessionStart: why it began.")
    reason: str | None = Field(
        None, description="Why the session ended: close, clear, shutdown, disconnect, reset."
    )
    resetReason: ResetReason | None = Field(
        None, description="A `reset` (SessionStart source, SessionEnd reason): daily or idle."
    )
    hook: str | None = Field(None, description="The hook's name.")
    hookType: Literal["command", "python"] | None = Field(None, description="How the hook runs.")
    origin: str | None = Field(None, description="Where the hook is configured.")
    command: str | None = Field(None, description="The command line that ran.")
    runId: str | None = Field(None, description="Shared by the items of one hook run.")
    exitCode: int | None = Field(None, description="The hook's exit code.")
    stderr: str | None = Field(
        default=None, max_length=8192, description="The end of the hook's stderr."
    )
    error: str | None = Field(None, description="Why the hook failed, in words.")
    durationMs: int | None = Field(
        default=None, ge=0, description="How long the hook ran, in milliseconds."
    )
    promptSection: str | None = Field(
        None, description="The `prompt_section` this run's additionalContext became."
    )


RECORDABLE_ITEM_ADAPTER: TypeAdapter[Any] = TypeAdapter(
    RecordableItem, config=ConfigDict(defer_build=True)
)
