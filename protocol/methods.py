"""Requests, results and notifications (DESIGN.md §6 and Appendix A).

`METHODS` maps each request name to its params and result models; the server validates
params with these, and `protocol.schema` exports them. Field names are camelCase and fixed.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from protocol.items import ITEM_ID_MAX, HookStatus, LifecycleSource, Permissions

MAX_ITEMS_PER_RECORD = 1000
MAX_PAGE = 200


class Params(BaseModel):
    """Request params: unknown fields are ignored so newer clients work with older servers."""

    model_config = ConfigDict(extra="ignore")


class Result(BaseModel):
    model_config = ConfigDict(extra="allow")


# --- handshake -------------------------------------------------------------------------


class ClientInfo(BaseModel):
    name: str
    version: str | None = None


class WorkspaceFolder(BaseModel):
    path: str
    name: str | None = None
    trusted: bool = False


class InitializeParams(Params):
    protocolVersion: int = 1
    clientInfo: ClientInfo | None = None
    workspaceFolders: list[WorkspaceFolder] = Field(default_factory=list)
    capabilities: dict[str, Any] = Field(default_factory=dict)


class ServerInfo(BaseModel):
    name: str
    version: str


class ServerCapabilities(BaseModel):
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


class ThreadOrigin(BaseModel):
    """A thread that mirrors a session kept elsewhere (an import, or the ACP front door)."""

    model_config = ConfigDict(extra="allow")

    agent: Literal["claude-code", "codex", "acp"]
    sessionId: str
    path: str | None = None
    agentCommand: list[str] | None = None
    revision: int | None = Field(
        default=None,
        description="Imports: 1 for a session's first import; a source file rewritten (not "
        "appended to) since is imported again as a new thread with the next revision.",
    )


class ThreadInfo(BaseModel):
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
    afterSeq: int = Field(default=0, ge=0)
    limit: int = Field(default=MAX_PAGE, ge=1, le=10_000)


class ThreadReadResult(Result):
    items: list[dict[str, Any]]
    nextAfterSeq: int | None
    skippedLines: list[dict[str, Any]] = Field(default_factory=list)


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


class RewoundFile(BaseModel):
    path: str
    sha: str | None


class ThreadRewindResult(Result):
    toSeq: int
    files: list[RewoundFile]
    conversation: bool


class SessionRef(BaseModel):
    sessionId: str | None
    resumedFrom: str | None = None


class DriftEntry(BaseModel):
    field: Literal["cwd", "repo", "branch", "head", "worktree"]
    recorded: Any = None
    current: Any = None
    severity: Literal["block", "warn"]


class Environment(BaseModel):
    model_config = ConfigDict(extra="allow")

    recorded: dict[str, Any] | None = None
    current: dict[str, Any] | None = None
    drift: list[DriftEntry] = Field(default_factory=list)


class SubsystemReport(BaseModel):
    name: str
    status: Literal["restored", "invalidated", "empty", "error"]
    reason: str | None = None
    state: Any = None


class PendingOperation(BaseModel):
    operationId: str
    tool: str
    state: str
    recovery: Literal["not_started", "safe_to_retry", "needs_review", "committed_result_missing"]


class Recovery(BaseModel):
    model_config = ConfigDict(extra="allow")

    sourceSkippedLines: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Imported threads: lines of the source transcript that could not be "
        "read (lineNo, byteOffset, reason, preview, source path).",
    )

    skippedLines: list[dict[str, Any]] = Field(default_factory=list)
    snapshotUsed: bool = False
    snapshotProblem: str | None = None
    """Why no snapshot was used (missing, corrupt, stale); the state came from full replay."""
    replayedItems: int = 0
    bomStripped: bool = False
    tornTailRecovered: bool = False


class MessagesPage(BaseModel):
    """Messages after the last clear/compact boundary; fetch more with thread/read."""

    items: list[dict[str, Any]]
    nextAfterSeq: int | None
    boundarySeq: int
    total: int = 0


class Handoff(BaseModel):
    """How to continue an imported thread in the agent that keeps the session."""

    agent: Literal["claude-code", "codex"] = Field(description="The agent to hand over to.")
    command: list[str] = Field(
        description="The agent's own resume, as an argument list: `claude --resume ID` or "
        "`codex resume ID`."
    )
    cwd: str | None = Field(
        description="Where to run it: the session's recorded working directory (the agent "
        "finds its sessions by it)."
    )


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
    handoff: Handoff | None = Field(
        default=None,
        description="Imported threads only: resume opens no sessiond session (the importer "
        "keeps appending the agent's lines); when the workspace matches, or the drift is "
        "accepted, this is the agent's own command to continue in. Null otherwise.",
    )


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


class ThreadStartedNotification(BaseModel):
    thread: ThreadInfo


class ThreadUpdatedNotification(BaseModel):
    thread: ThreadInfo
    deleted: bool = False


class ItemRecordedNotification(BaseModel):
    """Sent to subscribers of a thread: the stored lines of one append, in seq order."""

    threadId: str
    items: list[dict[str, Any]]


class LifecycleHookNotification(BaseModel):
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


class ProgressValue(BaseModel):
    kind: Literal["begin", "report", "end"]
    title: str | None = None
    message: str | None = None
    percentage: int | None = None


class ProgressNotification(BaseModel):
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
