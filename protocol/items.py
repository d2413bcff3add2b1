"""Item types: the durable records of a thread (DESIGN.md Appendix A).

Clients record the types in `RecordableItem`; the server writes `session_meta`,
`lifecycle` and `thread_title` itself. Every stored line also carries `v`, `seq`, `ts` and
`sessionId`, stamped by the store. Unknown fields are kept (a newer client may add some).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

ITEM_ID_MAX = 128
"""Client-chosen ids are bounded so one bad client cannot bloat the idempotency set."""

ItemId = Annotated[str, Field(min_length=1, max_length=ITEM_ID_MAX)]

LifecycleSource = Literal["startup", "resume", "clear", "compact"]


class ItemBase(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: ItemId
    turnId: str | None = None


class ContentPart(BaseModel):
    """One part of a multi-part message (text, image, ...); images carry base64 `data`."""

    model_config = ConfigDict(extra="allow")

    type: str
    text: str | None = None


class MessageItem(ItemBase):
    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "tool"]
    content: str | list[ContentPart]


class TurnItem(ItemBase):
    type: Literal["turn"] = "turn"
    turnId: str
    phase: Literal["started", "completed", "interrupted"]
    continueReason: str | None = None


class OperationItem(ItemBase):
    type: Literal["operation"] = "operation"
    operationId: str = Field(min_length=1, max_length=ITEM_ID_MAX)
    tool: str
    argsDigest: str | None = None
    effect: Literal["read", "idempotent", "side_effect"]
    state: Literal["planned", "started", "committed", "failed"]
    resultPersisted: bool = False
    result: Any = None


class CostItem(ItemBase):
    type: Literal["cost"] = "cost"
    model: str
    inputTokens: int = Field(ge=0)
    outputTokens: int = Field(ge=0)
    usd: float = Field(ge=0)


class TodoEntry(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str
    content: str
    status: Literal["pending", "in_progress", "completed"]


class TodosItem(ItemBase):
    type: Literal["todos"] = "todos"
    items: list[TodoEntry]


class FileEditItem(ItemBase):
    type: Literal["file_edit"] = "file_edit"
    path: str
    beforeSha: str | None = None
    afterSha: str | None = None
    author: Literal["agent", "user"] = "agent"
    operationId: str | None = None


class ModelOverrideItem(ItemBase):
    type: Literal["model_override"] = "model_override"
    model: str


class Permissions(BaseModel):
    """What the agent may do; restored from the record, never guessed from prompt text."""

    model_config = ConfigDict(extra="allow")

    approvalMode: str
    sandbox: str | None = None
    toolProfile: str | None = None


class PermissionsItem(ItemBase, Permissions):
    type: Literal["permissions"] = "permissions"


class PromptSectionItem(ItemBase):
    type: Literal["prompt_section"] = "prompt_section"
    name: str
    content: str
    path: str | None = None
    sha: str | None = None
    cacheable: bool = False


class VerifierItem(ItemBase):
    type: Literal["verifier"] = "verifier"
    name: str
    passed: int = Field(ge=0)
    total: int = Field(ge=0)
    headSha: str | None = None


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

    type: Literal["session_meta"] = "session_meta"
    threadId: str
    source: LifecycleSource
    reason: str = "user"
    resumedFrom: str | None = None
    forkedFrom: dict[str, Any] | None = None
    origin: dict[str, Any] | None = None
    """Set on the first session of a thread that mirrors another agent's session."""
    cwd: str
    workspaceFolder: str | None = None
    repoRoot: str | None = None
    branch: str | None = None
    headSha: str | None = None
    title: str | None = None
    model: str | None = None
    permissions: Permissions | None = None
    client: dict[str, Any] | None = None


class ClearBoundaryItem(ItemBase):
    """thread/clear: the conversation restarts empty after this point."""

    type: Literal["clear_boundary"] = "clear_boundary"
    endedSessionId: str


class CompactBoundaryItem(ItemBase):
    """thread/compact: history before this point is replaced by `summary`."""

    type: Literal["compact_boundary"] = "compact_boundary"
    summary: str


class RewindBoundaryItem(ItemBase):
    """thread/rewind: the conversation continues from the end of `toTurnId`."""

    type: Literal["rewind_boundary"] = "rewind_boundary"
    toSeq: int
    toTurnId: str


class DriftAcceptedItem(ItemBase):
    """thread/resume with acceptDrift: the user chose to continue in a changed workspace."""

    type: Literal["drift_accepted"] = "drift_accepted"
    drift: list[dict[str, Any]]


class ThreadTitleItem(ItemBase):
    type: Literal["thread_title"] = "thread_title"
    title: str


class AcpUpdateItem(ItemBase):
    """Server-written by `sessiond acp`: one ACP `session/update` exactly as the editor was
    shown it (the user's prompt too, which agents do not echo), so `session/load` replays
    the conversation verbatim. The merged `message`, `operation`, `todos`, ... items derived
    from it are written beside it; this one is what a replay sends."""

    type: Literal["acp_update"] = "acp_update"
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

    type: Literal["acp_session"] = "acp_session"
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

    type: Literal["permission_decision"] = "permission_decision"
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

    type: Literal["lifecycle"] = "lifecycle"
    event: Literal["SessionStart", "SessionEnd"]
    targetSessionId: str
    status: Literal["ended"] | HookStatus
    source: LifecycleSource | None = None
    reason: str | None = None
    hook: str | None = None
    hookType: Literal["command", "python"] | None = None
    origin: str | None = None
    command: str | None = None
    runId: str | None = None
    exitCode: int | None = None
    stderr: str | None = Field(default=None, max_length=8192)
    error: str | None = None
    durationMs: int | None = Field(default=None, ge=0)
    promptSection: str | None = None
    """The `prompt_section` this run's additionalContext became."""


RECORDABLE_ITEM_ADAPTER: TypeAdapter[Any] = TypeAdapter(RecordableItem)
