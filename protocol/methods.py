"""Requests, results and notifications (DESIGN.md §6 and Appendix A).

`METHODS` maps each request name to its params and result models; the server validates
params with these, and `protocol.schema` exports them. Field names are camelCase and fixed.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from protocol.base import WireModel
from protocol.items import ITEM_ID_MAX, HookStatus, LifecycleSource, Permissions

MAX_ITEMS_PER_RECORD = 1000
MAX_PAGE = 200


class Params(WireModel):
    """Request params: unknown fields are ignored so newer clients work with older servers."""

    model_config = ConfigDict(extra="ignore")


class Result(WireModel):
    model_config = ConfigDict(extra="allow")


# --- handshake -------------------------------------------------------------------------


class ClientInfo(WireModel):
    name: str
    version: str | None = None


class WorkspaceFolder(WireModel):
    path: str
    name: str | None = None
    trusted: bool = False


class InitializeParams(Params):
    protocolVersion: int = 1
    clientInfo: ClientInfo | None = None
    workspaceFolders: list[WorkspaceFolder] = Field(default_factory=list)
    capabilities: dict[str, Any] = Field(default_factory=dict)


class ServerInfo(WireModel):
    name: str
    version: str


class ServerCapabilities(WireModel):
    model_config = ConfigDict(extra="allow")

    subsystems: list[str]
    lifecycleSources: list[str]
    framing: list[str]
    durability: str
    maxFrameBytes: int
    maxItemsPerRecord: int


class InitializeResult(Result):
    protocolVersion: int
    serverInfo: ServerInfo
    capabilities: ServerCapabilities


class DidChangeWorkspaceFoldersParams(Params):
    added: list[WorkspaceFolder] = Field(default_factory=list)
    removed: list[WorkspaceFolder] = Field(default_factory=list)


# --- threads ---------------------------------------------------------------------------


class ThreadOrigin(WireModel):
    """A thread that mirrors a session kept elsewhere (an import, or the ACP front door)."""

    model_config = ConfigDict(extra="allow")

    agent: Literal["claude-code", "codex", "acp"]
    sessionId: str
    path: str | None = None
    agentCommand: list[str] | None = None


class ThreadInfo(WireModel):
    model_config = ConfigDict(extra="allow")

    threadId: str
    title: str | None = None
    preview: str = ""
    cwd: str | None = None
    workspaceFolder: str | None = None
    branch: str | None = None
    headSha: str | None = None
    createdAt: str | None = None
    updatedAt: str | None = None
    itemCount: int = 0
    archived: bool = False
    forkedFrom: dict[str, Any] | None = None
    costUsd: float = 0.0
    """Money spent on the thread so far, across all its sessions."""
    origin: ThreadOrigin | None = None
    """Where the thread came from: null when recorded over this protocol."""


class ThreadIdParams(Params):
    threadId: str


class SessionParams(ThreadIdParams):
    sessionId: str


class ThreadStartParams(Params):
    cwd: str = Field(min_length=1)
    title: str | None = Field(default=None, max_length=500)
    model: str | None = None
    permissions: Permissions | None = None


class ThreadStartResult(Result):
    thread: ThreadInfo
    sessionId: str


class ThreadRecordParams(SessionParams):
    items: list[dict[str, Any]] = Field(min_length=1, max_length=MAX_ITEMS_PER_RECORD)
    """Each entry is validated against `RecordableItem` (see protocol.items)."""


class ThreadRecordResult(Result):
    firstSeq: int | None
    lastSeq: int | None
    duplicates: int


class ThreadListParams(Params):
    cwd: str | None = None
    workspaceFolder: str | None = None
    archived: bool = False
    search: str | None = Field(default=None, max_length=500)
    cursor: str | None = Field(default=None, max_length=1000)
    limit: int = Field(default=50, ge=1, le=MAX_PAGE)


class ThreadListResult(Result):
    threads: list[ThreadInfo]
    nextCursor: str | None


class ThreadReadParams(ThreadIdParams):
    """One page: forward with `afterSeq` (the default, from the start), back with `beforeSeq`
    (the `limit` items just before it); items come in ascending seq either way."""

    afterSeq: int | None = Field(default=None, ge=0)
    beforeSeq: int | None = Field(default=None, ge=1)
    limit: int = Field(default=MAX_PAGE, ge=1, le=10_000)

    @model_validator(mode="after")
    def _one_direction(self) -> ThreadReadParams:
        if self.afterSeq is not None and self.beforeSeq is not None:
            raise ValueError("give afterSeq or beforeSeq, not both")
        return self


class ThreadReadResult(Result):
    """A page is also cut by bytes, to stay under the frame limit; its cursor goes on."""

    items: list[dict[str, Any]]
    nextAfterSeq: int | None = None
    """Going forward: pass as `afterSeq` for the next page; null at the end."""
    nextBeforeSeq: int | None = None
    """Going back: pass as `beforeSeq` for the previous page; null at the start."""
    skippedLines: list[dict[str, Any]] = Field(default_factory=list)
    """Unreadable lines in the bytes this page covered (each reported by one page only)."""


class ThreadResumeParams(ThreadIdParams):
    cwd: str | None = None
    acceptDrift: bool = False
    messageLimit: int = Field(default=MAX_PAGE, ge=1, le=MAX_PAGE)
    availableModels: list[str] | None = None
    """Models the client can run; a recorded model outside this list is invalidated."""


class ThreadClearParams(SessionParams):
    pass


class ThreadClearResult(Result):
    sessionId: str
    previousSessionId: str


class ThreadCompactParams(SessionParams):
    summary: str = Field(min_length=1)


class ThreadCompactResult(Result):
    boundarySeq: int


class ApplyEditParams(SessionParams):
    operationId: str = Field(min_length=1, max_length=ITEM_ID_MAX)
    path: str = Field(min_length=1, max_length=4096)
    content: str
    expectedSha: str | None = Field(default=None, pattern="^[0-9a-f]{64}$")


class ApplyEditResult(Result):
    outcome: Literal["applied", "already_applied", "conflict"]
    beforeSha: str | None
    afterSha: str | None


class ThreadRewindParams(SessionParams):
    toTurnId: str = Field(min_length=1, max_length=ITEM_ID_MAX)
    files: bool = True
    conversation: bool = True
    force: bool = False


class RewoundFile(WireModel):
    path: str
    sha: str | None


class ThreadRewindResult(Result):
    toSeq: int
    files: list[RewoundFile]
    conversation: bool


class SessionRef(WireModel):
    sessionId: str | None
    resumedFrom: str | None = None


class DriftEntry(WireModel):
    field: Literal["cwd", "repo", "branch", "head", "worktree"]
    recorded: Any = None
    current: Any = None
    severity: Literal["block", "warn"]


class Environment(WireModel):
    model_config = ConfigDict(extra="allow")

    recorded: dict[str, Any] | None = None
    current: dict[str, Any] | None = None
    drift: list[DriftEntry] = Field(default_factory=list)


class SubsystemReport(WireModel):
    name: str
    status: Literal["restored", "invalidated", "empty", "error"]
    reason: str | None = None
    state: Any = None


class PendingOperation(WireModel):
    operationId: str
    tool: str
    state: str
    recovery: Literal["not_started", "safe_to_retry", "needs_review", "committed_result_missing"]


class Recovery(WireModel):
    model_config = ConfigDict(extra="allow")

    skippedLines: list[dict[str, Any]] = Field(default_factory=list)
    snapshotUsed: bool = False
    snapshotProblem: str | None = None
    """Why no snapshot was used (missing, corrupt, stale); the state came from full replay."""
    replayedItems: int = 0
    bomStripped: bool = False
    tornTailRecovered: bool = False


class MessagesPage(WireModel):
    """The newest messages after the last clear/compact boundary, ascending; page further
    back with thread/read `beforeSeq: nextBeforeSeq` (down to `boundarySeq`)."""

    items: list[dict[str, Any]]
    nextBeforeSeq: int | None
    """null when `items` hold every message since the boundary."""
    boundarySeq: int
    total: int = 0


class RestoreReport(Result):
    status: Literal["ready", "needs_review"]
    thread: ThreadInfo
    session: SessionRef
    environment: Environment
    subsystems: list[SubsystemReport]
    pendingOperations: list[PendingOperation] = Field(default_factory=list)
    lastDurableSeq: int
    recovery: Recovery
    continueReason: str | None = None
    messages: MessagesPage


class ThreadForkParams(ThreadIdParams):
    atTurnId: str | None = Field(default=None, max_length=ITEM_ID_MAX)
    atSeq: int | None = Field(default=None, ge=1)


class ThreadForkResult(Result):
    thread: ThreadInfo
    sessionId: str


class ThreadSetTitleParams(ThreadIdParams):
    title: str = Field(max_length=500)


class ThreadSetTitleResult(Result):
    thread: ThreadInfo


class EmptyResult(Result):
    pass


# --- notifications ---------------------------------------------------------------------


class ThreadStartedNotification(WireModel):
    thread: ThreadInfo


class ThreadUpdatedNotification(WireModel):
    thread: ThreadInfo
    deleted: bool = False


class ItemRecordedNotification(WireModel):
    """Sent to subscribers of a thread: the stored lines of one append, in seq order."""

    threadId: str
    items: list[dict[str, Any]]


class LifecycleHookNotification(WireModel):
    """A lifecycle hook's run: `started`, then `completed`, `failed` or `timed_out`.

    Sent after the answer of the request that started or ended the session; hooks never
    change or delay an answer. The same fields are recorded as `lifecycle` items."""

    threadId: str
    sessionId: str
    event: Literal["SessionStart", "SessionEnd"]
    status: HookStatus
    hook: str
    hookType: Literal["command", "python"]
    runId: str
    source: LifecycleSource | None = None
    reason: str | None = None
    origin: str | None = None
    command: str | None = None
    exitCode: int | None = None
    stderr: str | None = None
    error: str | None = None
    durationMs: int | None = None
    promptSection: str | None = None


class ProgressValue(WireModel):
    kind: Literal["begin", "report", "end"]
    title: str | None = None
    message: str | None = None
    percentage: int | None = None


class ProgressNotification(WireModel):
    token: str
    value: ProgressValue


METHODS: dict[str, tuple[type[BaseModel] | None, type[BaseModel] | None]] = {
    "initialize": (InitializeParams, InitializeResult),
    "shutdown": (None, None),
    "thread/start": (ThreadStartParams, ThreadStartResult),
    "thread/record": (ThreadRecordParams, ThreadRecordResult),
    "thread/list": (ThreadListParams, ThreadListResult),
    "thread/read": (ThreadReadParams, ThreadReadResult),
    "thread/resume": (ThreadResumeParams, RestoreReport),
    "thread/fork": (ThreadForkParams, ThreadForkResult),
    "thread/archive": (ThreadIdParams, EmptyResult),
    "thread/unarchive": (ThreadIdParams, EmptyResult),
    "thread/delete": (ThreadIdParams, EmptyResult),
    "thread/setTitle": (ThreadSetTitleParams, ThreadSetTitleResult),
    "thread/close": (SessionParams, EmptyResult),
    "thread/clear": (ThreadClearParams, ThreadClearResult),
    "thread/compact": (ThreadCompactParams, ThreadCompactResult),
    "fs/applyEdit": (ApplyEditParams, ApplyEditResult),
    "thread/rewind": (ThreadRewindParams, ThreadRewindResult),
    "thread/subscribe": (ThreadIdParams, EmptyResult),
    "thread/unsubscribe": (ThreadIdParams, EmptyResult),
}

NOTIFICATIONS_IN: dict[str, type[BaseModel] | None] = {
    "initialized": None,
    "exit": None,
    "workspace/didChangeWorkspaceFolders": DidChangeWorkspaceFoldersParams,
    "$/cancelRequest": None,
}

NOTIFICATIONS_OUT: dict[str, type[BaseModel]] = {
    "thread/started": ThreadStartedNotification,
    "thread/updated": ThreadUpdatedNotification,
    "item/recorded": ItemRecordedNotification,
    "lifecycle/hook": LifecycleHookNotification,
    "$/progress": ProgressNotification,
}
