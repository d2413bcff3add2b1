"""Requests, results and notifications (docs/protocol.md is generated from them).

`METHODS` maps each request name to its params and result models; the server validates
params with these, and `protocol.schema` exports them. Field names are camelCase and fixed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from protocol.agents import AGENT_IDS, SEARCH_AGENTS, THREAD_AGENTS
from protocol.base import WireModel
from protocol.items import ITEM_ID_MAX, HookStatus, LifecycleSource, Permissions, ResetReason
from protocol.names import CLIENT_NAME_MAX, PRINTABLE, SESSION_KEY_MAX
from protocol.quick_params import DEFAULT_PAGE, MAX_CURSOR, MAX_PAGE, MAX_READ, MAX_SEARCH

if TYPE_CHECKING:  # a Literal cannot be built from a tuple where the type checker sees it
    ImportedAgent = str
    ThreadAgent = str
    SearchAgent = str
else:  # ... where pydantic does, it can: the schema enumerates the names (protocol/agents.py)
    ImportedAgent = Literal[AGENT_IDS]
    ThreadAgent = Literal[THREAD_AGENTS]
    SearchAgent = Literal[SEARCH_AGENTS]

MAX_ITEMS_PER_RECORD = 1000


class Params(WireModel):
    """Request params: unknown fields are ignored so newer clients work with older servers."""

    model_config = ConfigDict(extra="ignore")


class Result(WireModel):
    model_config = ConfigDict(extra="allow")


# --- handshake -------------------------------------------------------------------------


class ClientInfo(WireModel):
    name: str = Field(
        max_length=CLIENT_NAME_MAX,
        pattern=PRINTABLE,
        description="The client's name, e.g. `vscode-sessiond`; names it in ThreadBusy errors.",
    )
    version: str | None = Field(None, description="The client's version, free text.")


class WorkspaceFolder(WireModel):
    path: str = Field(description="Absolute path of a folder the editor has open.")
    name: str | None = Field(None, description="Display name of the folder.")
    trusted: bool = Field(
        False, description="The user trusts this folder: its workspace-level hooks may run."
    )


class InitializeParams(Params):
    protocolVersion: int = Field(1, description="The protocol version the client speaks: 1.")
    clientInfo: ClientInfo | None = Field(None, description="Who the client is.")
    workspaceFolders: list[WorkspaceFolder] = Field(
        default_factory=list,
        description="Folders the editor has open; threads are filed under the innermost one "
        "that contains their cwd.",
    )
    capabilities: dict[str, Any] = Field(
        default_factory=dict, description="Client capabilities; none are defined yet."
    )


class ServerInfo(WireModel):
    name: str = Field(description='Always "sessiond".')
    version: str = Field(description="The server's version, e.g. `0.1.0`.")


class ServerCapabilities(WireModel):
    model_config = ConfigDict(extra="allow")

    subsystems: list[str] = Field(
        description="The restorable subsystems, in the fixed order a RestoreReport lists them."
    )
    lifecycleSources: list[str] = Field(
        description="Why a session may begin: `startup`, `resume`, `clear`, `compact`, "
        "`reset` (a new thread for a session key, `thread/continue`)."
    )
    framing: list[str] = Field(
        description="stdio framings understood: `content-length` (LSP) and `newline` (NDJSON)."
    )
    durability: str = Field(
        description="When a record is acknowledged: `fsync` (after fsync), `group` (after a "
        "shared fdatasync), `none` (written to the OS only)."
    )
    maxFrameBytes: int = Field(description="Largest accepted message, in bytes.")
    maxItemsPerRecord: int = Field(description="Most items one `thread/record` may carry.")


class InitializeResult(Result):
    protocolVersion: int = Field(description="The protocol version the server speaks: 1.")
    serverInfo: ServerInfo = Field(description="Which server answered.")
    capabilities: ServerCapabilities = Field(description="What this server supports.")


class DidChangeWorkspaceFoldersParams(Params):
    added: list[WorkspaceFolder] = Field(
        default_factory=list, description="Folders the editor opened."
    )
    removed: list[WorkspaceFolder] = Field(
        default_factory=list, description="Folders the editor closed (matched by path)."
    )


# --- threads ---------------------------------------------------------------------------


class ThreadOrigin(WireModel):
    """A thread that mirrors a session kept elsewhere (an import, or the ACP front door)."""

    model_config = ConfigDict(extra="allow")

    agent: ThreadAgent = Field(
        description="The agent whose session this thread mirrors: an imported agent's id "
        "(`claude-code`, `codex`, `gemini`, …: the schema's `agents`), or `acp` (recorded "
        "through `sessiond acp`)."
    )
    sessionId: str = Field(description="The session's id in that agent's own store.")
    path: str | None = Field(None, description="The agent's own session file, when it has one.")
    agentCommand: list[str] | None = Field(
        None, description="The command (argv) that runs the agent, for handing the thread back."
    )
    revision: int | None = Field(
        default=None,
        description="Imports: 1 for a session's first import; a source file rewritten (not "
        "appended to) since is imported again as a new thread with the next revision.",
    )
    parentSessionId: str | None = Field(
        None,
        description="A sub-agent's session: the session (in that agent's store) whose tool "
        "call started it; the thread's `parentThreadId` is that session's thread.",
    )
    parentToolCallId: str | None = Field(
        None,
        description="A sub-agent's session: the parent's tool call that started it (its "
        "`operationId` in the parent thread), when the agent recorded it.",
    )
    forkedFromSessionId: str | None = Field(
        None,
        description="Imports: the session (in that agent's store) this one was forked from "
        "(`pi --fork`); the thread's `forkedFrom` names that session's thread.",
    )


class ThreadInfo(WireModel):
    """One thread as listed: enough to show a row and decide whether to resume it."""

    model_config = ConfigDict(extra="allow")

    threadId: str = Field(description="The thread's id (a UUID); stable for its whole life.")
    title: str | None = Field(None, description="Title given at start or by thread/setTitle.")
    preview: str = Field(
        "", description="The first user message as one short line (images and data dropped)."
    )
    cwd: str | None = Field(None, description="Working directory of the latest session.")
    workspaceFolder: str | None = Field(
        None, description="The workspace folder the thread is filed under (null: none)."
    )
    branch: str | None = Field(None, description="Git branch of the latest session.")
    headSha: str | None = Field(None, description="Git HEAD commit of the latest session.")
    createdAt: str | None = Field(
        None, description="When the thread began: ISO 8601 UTC, e.g. `2026-03-10T12:00:00Z`."
    )
    updatedAt: str | None = Field(
        None, description="When an item was last recorded (ISO 8601 UTC); the list's order."
    )
    itemCount: int = Field(
        0,
        description="The conversation's items: every record but the server's bookkeeping "
        "(sessions, lifecycle, titles, boundaries, import checkpoints, ACP updates). What "
        "`sessiond list` and `sessiond show` print.",
    )
    archived: bool = Field(False, description="The thread is archived (listed only on request).")
    forkedFrom: dict[str, Any] | None = Field(
        None, description="`{threadId, seq}` of the thread and position it was forked from."
    )
    costUsd: float = Field(
        0.0, description="Money spent on the thread so far, across all its sessions, in USD."
    )
    origin: ThreadOrigin | None = Field(
        None, description="Where the thread came from: null when recorded over this protocol."
    )
    parentThreadId: str | None = Field(
        None,
        description="The thread whose tool call started this one (a sub-agent), else null. "
        "A child is listed under its parent (`thread/list {parentThreadId}`), not at the top "
        "(unless its parent is not stored).",
    )
    parentOperationId: str | None = Field(
        None, description="That tool call: its `operationId` in the parent thread, when known."
    )
    childCount: int | None = Field(
        None,
        description="How many (unarchived) sub-agent threads `thread/list {parentThreadId}` "
        "lists under this one. Counted by `thread/list`, and in `thread/started` / "
        "`thread/updated` once this server has a listing open (a new thread says 0); null "
        "where not counted (before any listing, other answers): keep the count you have. "
        "A sub-agent's start, archive or delete is followed by its parent's `thread/updated` "
        "with the new count.",
    )
    sessionKey: str | None = Field(
        None,
        description="The session key the thread belongs to (`thread/start`, "
        "`thread/continue`), e.g. `workspace:/src/app#main`, `direct:<peer>`; null: none.",
    )
    previousThreadId: str | None = Field(
        None, description="The thread this one replaced for its key (a `thread/continue` reset)."
    )
    nextThreadId: str | None = Field(
        None,
        description="The thread that replaced this one for its key, once recorded here "
        "(null: none, or not recorded yet: it is written just after the reset's answer, or "
        "later while another process held this thread; the successor's `previousThreadId` "
        "says it all the same).",
    )
    resetReason: ResetReason | None = Field(
        None, description="Why this thread replaced `previousThreadId`: `daily` or `idle`."
    )


SessionKey = Field(
    min_length=1,
    max_length=SESSION_KEY_MAX,
    pattern=PRINTABLE,
    description="A session key: which conversation a message belongs to (any printable "
    "string of 1-512 characters; shapes such as `workspace:<path>#<branch>`, "
    "`direct:<peer>`, `group:<channel>:<peer>`, `thread:<parentKey>:<id>`, "
    "`agent:<id>:subagent:<uuid>` are conventions, not a closed list).",
)


class ThreadIdParams(Params):
    threadId: str = Field(description="The thread's id (a UUID).")


class SessionParams(ThreadIdParams):
    sessionId: str = Field(
        description="The open session this request writes through (from start, resume, fork "
        "or clear); StaleSession when it is no longer the thread's current one."
    )


class ThreadStartParams(Params):
    cwd: str = Field(
        min_length=1, description="Absolute path of an existing directory the agent works in."
    )
    title: str | None = Field(default=None, max_length=500, description="A title for the list.")
    model: str | None = Field(None, description="The model the thread starts with.")
    permissions: Permissions | None = Field(
        None, description="What the agent may do; restored on every resume."
    )
    parentThreadId: str | None = Field(
        None,
        description="Start a sub-agent's thread under this one (it must exist: "
        "ThreadNotFound otherwise); listed under it, not at the top.",
    )
    parentOperationId: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        description="With `parentThreadId`: the parent's operation (tool call) that started "
        "the sub-agent.",
    )
    sessionKey: str | None = Field(
        default=None,
        min_length=1,
        max_length=SESSION_KEY_MAX,
        pattern=PRINTABLE,
        description="The session key the thread belongs to (see `thread/continue`); kept "
        "for the thread's whole life. A key has at most one current thread: the newest "
        "unarchived one with that key that no other thread replaced.",
    )
    items: list[dict[str, Any]] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_ITEMS_PER_RECORD,
        description="Items to record in the new thread's first session at once, as a "
        "`thread/record` right after would (each a RecordableItem, checked the same way: "
        "nothing is started if one is refused): a thread with its first turn in one request.",
    )


class ThreadStartResult(Result):
    thread: ThreadInfo = Field(description="The new thread, already durable and listed.")
    sessionId: str = Field(description="Its first session: record through it.")


class ThreadRecordParams(SessionParams):
    items: list[dict[str, Any]] = Field(
        min_length=1,
        max_length=MAX_ITEMS_PER_RECORD,
        description="Items to append, in order; each is a RecordableItem. An item whose `id` "
        "was recorded before is not written again (a retry is safe).",
    )


class ThreadRecordResult(Result):
    firstSeq: int | None = Field(
        description="Seq of the first item of the request (its earlier seq if a duplicate)."
    )
    lastSeq: int | None = Field(description="Seq of the last item of the request.")
    duplicates: int = Field(
        description="Items not written because their id (or operation state) was recorded already."
    )


class ThreadListParams(Params):
    cwd: str | None = Field(None, description="Only threads whose cwd is exactly this path.")
    workspaceFolder: str | None = Field(
        None, description="Only threads filed under this folder or with a cwd inside it."
    )
    archived: bool = Field(False, description="List archived threads instead of live ones.")
    search: str | None = Field(
        default=None,
        max_length=MAX_SEARCH,
        description="Case-insensitive text to find in the title or preview.",
    )
    cursor: str | None = Field(
        default=None, max_length=MAX_CURSOR, description="`nextCursor` of the previous page."
    )
    limit: int = Field(
        default=DEFAULT_PAGE, ge=1, le=MAX_PAGE, description="Threads per page (1-200)."
    )
    parentThreadId: str | None = Field(
        None,
        description="List this thread's sub-agent threads. Without it only top-level threads "
        "are listed: children are reached through their parent (`childCount`); a child whose "
        "parent is not stored (its transcript gone, or not imported) is top-level.",
    )
    sessionKey: str | None = Field(
        default=None,
        max_length=SESSION_KEY_MAX,
        description="Only threads whose session key starts with this (exact, case-sensitive; "
        '`""`: every thread with a key). With it, sub-agents\' threads are listed too.',
    )


class ThreadListResult(Result):
    threads: list[ThreadInfo] = Field(description="One page, most recently updated first.")
    nextCursor: str | None = Field(
        description="Pass as `cursor` for the next page; null when this is the last."
    )


class ThreadSearchParams(Params):
    """Full-text search over every thread's records (docs/search.md)."""

    query: str = Field(
        description='Words (all must match), `"a phrase"`, `prefix*` (2 letters at '
        "least), `-word` to exclude; case-insensitive; at most 1024 bytes and 16 terms. "
        "Malformed syntax is InvalidParams naming the problem (`data.field`: `query`)."
    )
    cwd: str | None = Field(None, description="Only threads whose cwd is exactly this path.")
    workspaceFolder: str | None = Field(
        None, description="Only threads filed under this folder or with a cwd inside it."
    )
    agent: SearchAgent | None = Field(
        None,
        description="Only threads from this agent (`origin.agent`); `sessiond` for threads "
        "recorded over this protocol.",
    )
    role: Literal["user", "assistant", "tool", "output", "edit", "todo", "title"] | None = Field(
        None, description="Only hits of this kind (see SearchHit.role)."
    )
    since: str | None = Field(
        default=None, max_length=64, description="Only records at or after this ISO 8601 time."
    )
    until: str | None = Field(
        default=None, max_length=64, description="Only records before this ISO 8601 time."
    )
    archived: bool = Field(False, description="Search archived threads instead of live ones.")
    limit: int = Field(default=20, ge=1, le=MAX_PAGE, description="Hits per page (1-200).")
    cursor: str | None = Field(
        default=None, max_length=MAX_CURSOR, description="`nextCursor` of the previous page."
    )


class SearchHit(WireModel):
    threadId: str = Field(description="The thread the record is in.")
    seq: int = Field(description="The record's seq: `thread/read {afterSeq: seq - 1}` shows it.")
    role: Literal["user", "assistant", "tool", "output", "edit", "todo", "title"] = Field(
        description="What matched: a `user` or `assistant` message, a `tool` call (title, "
        "command, arguments), a tool's `output` (a message of role `tool`, an operation "
        "with its result, its call's text searched with it), an `edit`ed file's path, the "
        "`todo` list, the thread's `title`."
    )
    ts: str = Field(description="When the record was stored (ISO 8601 UTC).")
    snippet: str = Field(
        description="One line of the record's text around the first match (control "
        "characters as spaces; `…` where it was cut)."
    )
    highlights: list[list[int]] = Field(
        description="`[start, end)` of each match in `snippet`, in characters (Unicode "
        "code points), in order."
    )
    thread: ThreadInfo = Field(description="The thread's row, as `thread/list` gives it.")


class ThreadSearchResult(Result):
    hits: list[SearchHit] = Field(
        description="Best first (the store's full-text rank), ties most recent first."
    )
    nextCursor: str | None = Field(
        description="Pass as `cursor` for the next page; null when this is the last. Hits "
        "are neither lost nor repeated across pages while the matching records stay as "
        "they are; records stored after the first page wait for a new search."
    )
    partial: bool = Field(
        False,
        description="The search index was still being built (the first search after an "
        "upgrade or a rebuild indexes a budget of threads per request, with `$/progress`): "
        "hits from threads not indexed yet are missing. Search again to continue. Or the "
        "page's snippets ran out of their time budget (a quarter of a second): the hits "
        "after it show the start of their text, without highlights.",
    )


class UsageReportParams(Params):
    """Tokens and cost of every thread, as ccusage reports them (docs/usage.md)."""

    report: Literal["daily", "weekly", "monthly", "session", "blocks"] = Field(
        "daily",
        description="What a row is: a day, a week, a month (in `timezone`), a session (a "
        "top-level thread with its sub-agents' calls) or a 5-hour billing block.",
    )
    by: Literal["model", "agent", "project"] | None = Field(
        None, description="Break each row down by model, agent or project (`breakdown`)."
    )
    since: str | None = Field(
        None, max_length=10, description="From this day on (YYYY-MM-DD or YYYYMMDD, in `timezone`)."
    )
    until: str | None = Field(
        None, max_length=10, description="Up to this day, inclusive (same forms)."
    )
    timezone: str | None = Field(
        None,
        max_length=64,
        description="The IANA zone days are counted in; the server's own when omitted.",
    )
    startOfWeek: Literal[
        "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"
    ] = Field("monday", description="`weekly`: the day a week starts on.")


class UsageTotals(WireModel):
    inputTokens: int = Field(description="Input tokens neither read from nor written to a cache.")
    outputTokens: int = Field(description="Output tokens.")
    cacheReadTokens: int = Field(description="Input tokens read from the cache.")
    cacheWriteTokens: int = Field(description="Input tokens written to the cache.")
    totalTokens: int = Field(description="The four added up.")
    usd: float | None = Field(
        description="What the priced calls cost (genai-prices); null when no call was "
        "priced: unpriced, never $0."
    )
    calls: int = Field(description="Model calls counted.")
    unpricedCalls: int = Field(
        description="Calls whose model the price list does not know: their tokens count, "
        "their cost is not in `usd`."
    )


class UsagePart(UsageTotals):
    name: str = Field(description="The model, agent or project.")


class UsageRow(UsageTotals):
    key: str = Field(
        description="The day (YYYY-MM-DD), the week's first day, the month (YYYY-MM), the "
        "session's thread id, or the block's start (ISO 8601 UTC)."
    )
    models: list[str] = Field(description="The models called.")
    firstAt: str = Field(description="The first call counted (ISO 8601 UTC).")
    lastAt: str = Field(description="The last call counted (ISO 8601 UTC).")
    breakdown: list[UsagePart] | None = Field(None, description="With `by`: each part's totals.")
    threadId: str | None = Field(None, description="`session`: the top-level thread.")
    title: str | None = Field(None, description="`session`: its title.")
    project: str | None = Field(None, description="`session`: its workspace folder or cwd.")
    agent: str | None = Field(None, description="`session`: the agent it is from.")
    startAt: str | None = Field(None, description="`blocks`: the block's start (a UTC hour).")
    endAt: str | None = Field(None, description="`blocks`: its start plus five hours.")
    active: bool | None = Field(
        None, description="`blocks`: its last call is under five hours old and it has not ended."
    )


class UsageReportResult(Result):
    report: str = Field(description="The report asked for.")
    timezone: str = Field(description="The zone days were counted in.")
    by: str | None = Field(description="The breakdown asked for.")
    since: str | None = Field(description="The first day counted (YYYY-MM-DD), if bounded.")
    until: str | None = Field(description="The last day counted, if bounded.")
    rows: list[UsageRow] = Field(description="Oldest first (sessions: by their last call).")
    totals: UsageTotals = Field(description="Every row added up.")


class ThreadReadParams(ThreadIdParams):
    """One page: forward with `afterSeq` (the default, from the start), back with `beforeSeq`
    (the `limit` items just before it); items come in ascending seq either way. A page costs
    O(limit), whatever its depth or the thread's length."""

    afterSeq: int | None = Field(
        default=None,
        ge=0,
        description="Page forward: items with a seq greater than this (0 or absent: from the "
        "start).",
    )
    beforeSeq: int | None = Field(
        default=None,
        ge=1,
        description="Page back: the `limit` items just before this seq (any seq past the end: "
        "the newest). Not with `afterSeq`.",
    )
    limit: int = Field(
        default=MAX_PAGE, ge=1, le=MAX_READ, description="Most items to return (1-10000)."
    )

    @model_validator(mode="after")
    def _one_direction(self) -> ThreadReadParams:
        if self.afterSeq is not None and self.beforeSeq is not None:
            raise ValueError("give afterSeq or beforeSeq, not both")
        return self


class ThreadReadResult(Result):
    """A page is also cut by bytes, to stay under the frame limit; its cursor goes on. An
    item too large for any answer is a PayloadTooLarge naming its `seq`."""

    items: list[dict[str, Any]] = Field(
        description="Stored items in ascending seq, each with `v`, `seq`, `ts`, `sessionId`."
    )
    nextAfterSeq: int | None = Field(
        None,
        description="Going forward: pass as `afterSeq` for the next page; null at the end.",
    )
    nextBeforeSeq: int | None = Field(
        None,
        description="Going back: pass as `beforeSeq` for the previous page; null at the start.",
    )
    skippedLines: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Lines in the bytes this page covered that could not be read: `{lineNo, "
        "byteOffset, reason, preview}`; kept in the file, never hidden, each reported by one "
        "page only.",
    )


class ThreadReadBlobParams(ThreadIdParams):
    """The content of a file as an edit recorded it: the `beforeSha` or `afterSha` of the
    `file_edit` item at `seq`. Only blobs the thread's own edits name can be read."""

    seq: int = Field(ge=1, description="Seq of the thread's `file_edit` item naming the blob.")
    sha: str = Field(
        pattern="^[0-9a-f]{64}$",
        description="sha256 (hex) of the content: that item's `beforeSha` or `afterSha`.",
    )


class ThreadReadBlobResult(Result):
    recorded: bool = Field(
        description="The content is stored. False when the edit was recorded with its hashes "
        "only (a client's own `file_edit`, an imported diff): nothing to show."
    )
    content: str | None = Field(
        None, description="The content, in `encoding`; null when not recorded."
    )
    encoding: Literal["utf-8", "base64"] | None = Field(
        None, description="`utf-8` (text, as is) or `base64` (bytes that are not UTF-8)."
    )
    size: int | None = Field(None, description="The content's length in bytes.")


class ThreadExportParams(ThreadIdParams):
    """The first call names the thread and the format; each later call passes the previous
    answer's `nextCursor` (with the same `threadId`) for the next part, until it is null."""

    format: Literal["md", "json", "html"] = Field(
        "html",
        description="`md` (Markdown), `json` (the protocol's items as stored, lossless: "
        "`sessiond import sessiond FILE` takes it back) or `html` (one self-contained page).",
    )
    passphrase: str | None = Field(
        None,
        min_length=8,
        max_length=1024,
        description="`html` only: encrypt the page (AES-256-GCM, the key from PBKDF2-HMAC-"
        "SHA256); it asks for the passphrase and decrypts in the browser.",
    )
    cursor: str | None = Field(
        None, max_length=MAX_CURSOR, description="The previous answer's `nextCursor`."
    )


class ThreadExportResult(Result):
    """One part of the document; the parts in order, concatenated, are the file."""

    data: str = Field(description="The next part of the document (UTF-8 text).")
    nextCursor: str | None = Field(
        None, description="Pass as `cursor` for the next part; null: this was the last."
    )
    fileName: str = Field(description="A file name for the document, e.g. `Fix-login.html`.")
    mediaType: str = Field(description="`text/markdown`, `application/json` or `text/html`.")
    size: int = Field(ge=0, description="The whole document's length in bytes.")


class ThreadResumeParams(ThreadIdParams):
    cwd: str | None = Field(
        None, description="Where the client would continue (default: the recorded cwd)."
    )
    acceptDrift: bool = Field(
        False, description="Continue even though the workspace drifted (recorded as an item)."
    )
    messageLimit: int = Field(
        default=MAX_PAGE,
        ge=1,
        le=MAX_PAGE,
        description="Most messages to return in `messages.items` (1-200).",
    )
    availableModels: list[str] | None = Field(
        None,
        description="Models the client can run; a recorded model outside this list is invalidated.",
    )


class ThreadClearParams(SessionParams):
    pass


class ThreadClearResult(Result):
    sessionId: str = Field(description="The new session, with an empty conversation.")
    previousSessionId: str = Field(description="The session that was cleared (now closed).")


class ThreadCompactParams(SessionParams):
    summary: str = Field(
        min_length=1, description="Replaces the history before this point in later resumes."
    )


class ThreadCompactResult(Result):
    boundarySeq: int = Field(description="Seq of the compact boundary item.")


class ApplyEditParams(SessionParams):
    operationId: str = Field(
        min_length=1,
        max_length=ITEM_ID_MAX,
        description="The edit's operation id: applying it again is `already_applied`.",
    )
    path: str = Field(
        min_length=1, max_length=4096, description="The file to write, inside the workspace."
    )
    content: str = Field(description="The file's whole new content (UTF-8 text).")
    expectedSha: str | None = Field(
        default=None,
        pattern="^[0-9a-f]{64}$",
        description="sha256 (hex) the file must have now; a mismatch is a `conflict`.",
    )


class ApplyEditResult(Result):
    outcome: Literal["applied", "already_applied", "conflict"] = Field(
        description="`applied` (written now), `already_applied` (this operation wrote it "
        "before), `conflict` (the file is neither the before nor the after; nothing written)."
    )
    beforeSha: str | None = Field(description="sha256 of the file before (null: it did not exist).")
    afterSha: str | None = Field(description="sha256 of the file after.")


class ThreadRewindParams(SessionParams):
    toTurnId: str = Field(
        min_length=1, max_length=ITEM_ID_MAX, description="Rewind to the end of this turn."
    )
    files: bool = Field(True, description="Restore the files the agent edited after that turn.")
    conversation: bool = Field(True, description="Drop the conversation after that turn.")
    force: bool = Field(False, description="Restore files even where the user changed them since.")


class RewoundFile(WireModel):
    path: str = Field(description="A file put back as it was at the end of the turn.")
    sha: str | None = Field(description="Its sha256 now (null: it was removed).")


class ThreadRewindResult(Result):
    toSeq: int = Field(description="Seq of the last item kept.")
    files: list[RewoundFile] = Field(description="Files restored.")
    conversation: bool = Field(description="The conversation was rewound too.")


class SessionRef(WireModel):
    sessionId: str | None = Field(
        description="The new writable session; null when none was opened (needs_review)."
    )
    resumedFrom: str | None = Field(None, description="The thread's previous session.")


class DriftEntry(WireModel):
    field: Literal["cwd", "repo", "branch", "head", "worktree"] = Field(
        description="What differs: `cwd`, `repo` (another repository), `branch`, `head` "
        "(commit), `worktree`."
    )
    recorded: Any = Field(None, description="The recorded value.")
    current: Any = Field(None, description="The value now.")
    severity: Literal["block", "warn"] = Field(
        description="`block`: no session without acceptDrift; `warn`: shown, not blocking."
    )
    reason: str | None = Field(
        None,
        description='Why, when the field alone does not say: "same repository, other '
        'checkout" (a warn drift: the thread moved to another clone of its repository).',
    )


class Environment(WireModel):
    model_config = ConfigDict(extra="allow")

    recorded: dict[str, Any] | None = Field(
        None,
        description="Where the thread last ran: `cwd, repoRoot, repoId, branch, headSha, "
        "worktree`.",
    )
    current: dict[str, Any] | None = Field(
        None, description="The same fields, probed now (plus `cwdExists`, `dirty` files)."
    )
    drift: list[DriftEntry] = Field(default_factory=list, description="Every difference.")


class SubsystemReport(WireModel):
    name: str = Field(description="The subsystem, e.g. `todos`; see capabilities.subsystems.")
    status: Literal["restored", "invalidated", "empty", "error"] = Field(
        description="`restored`: valid as recorded; `invalidated`: recorded but no longer true "
        "(see reason); `empty`: nothing recorded; `error`: could not be restored."
    )
    reason: str | None = Field(None, description="Why it is invalidated or in error.")
    state: Any = Field(None, description="The restored state; its shape depends on the name.")


class PendingOperation(WireModel):
    operationId: str = Field(description="The operation's id.")
    tool: str = Field(description="The tool it called.")
    state: str = Field(description="Its last recorded state: `planned`, `started`, `committed`.")
    recovery: Literal[
        "not_started", "safe_to_retry", "needs_review", "committed_result_missing"
    ] = Field(
        description="What to do: `not_started` (safe to run), `safe_to_retry` (read-only or "
        "idempotent), `needs_review` (a side effect may have happened: never re-run "
        "automatically), `committed_result_missing` (done; recover the result, do not re-run)."
    )
    effect: Literal["read", "idempotent", "side_effect"] | None = Field(
        default=None,
        description="What the call does to the world, as recorded (it decides `safe_to_retry`).",
    )
    argsDigest: str | None = Field(
        default=None,
        description="The digest of its arguments, as recorded: a retry with "
        "other arguments is another call.",
    )
    seq: int | None = Field(default=None, description="The seq of its last recorded state.")
    decidedBy: str | None = Field(
        default=None,
        description="How `recovery` was decided when not by the state alone "
        "(an edit: by the file's hash against the edit's two sides).",
    )
    path: str | None = Field(default=None, description="The file an edit call writes.")


class Recovery(WireModel):
    model_config = ConfigDict(extra="allow")

    skippedLines: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Unreadable lines skipped: `{lineNo, byteOffset, reason, preview}`.",
    )
    snapshotUsed: bool = Field(
        False, description="State came from a snapshot plus the items after it."
    )
    snapshotProblem: str | None = Field(
        None,
        description="Why no snapshot was used (missing, corrupt, stale); the state came from "
        "full replay.",
    )
    replayedItems: int = Field(0, description="Items read from the file for this resume.")
    bomStripped: bool = Field(False, description="The file began with a UTF-8 BOM (ignored).")
    tornTailRecovered: bool = Field(
        False, description="A line torn by a crash was copied to recovered/ and cut off."
    )
    sourceSkippedLines: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Imported threads: lines of the source transcript that could not be "
        "read (lineNo, byteOffset, reason, preview, source path).",
    )


class MessagesPage(WireModel):
    """The newest messages after the last clear/compact boundary, ascending; page further
    back with thread/read `beforeSeq: nextBeforeSeq` (down to `boundarySeq`)."""

    items: list[dict[str, Any]] = Field(
        description="The newest `messageLimit` message items, ascending seq."
    )
    nextBeforeSeq: int | None = Field(
        description="Pass as `beforeSeq` to thread/read for earlier ones; null when all are here."
    )
    boundarySeq: int = Field(description="Seq of the last clear/compact boundary (0: none).")
    total: int = Field(0, description="Messages after the boundary, in all.")


class ReadOnlyHome(WireModel):
    path: str = Field(description="The data directory.")
    reason: str = Field(description='Why it cannot be written, e.g. "mounted read-only".')


class Handoff(WireModel):
    """How to continue an imported thread in the agent that keeps the session."""

    agent: ImportedAgent = Field(description="The agent to hand over to (the schema's `agents`).")
    command: list[str] = Field(
        description="The agent's own resume, as an argument list: `claude --resume ID`, "
        "`codex resume ID`, `gemini --resume ID`, …"
    )
    cwd: str | None = Field(
        description="Where to run it: the session's recorded working directory (the agent "
        "finds its sessions by it)."
    )


class RestoreReport(Result):
    status: Literal["ready", "needs_review"] = Field(
        description="`ready`: a writable session is open (an imported thread opens none: "
        "see `handoff`); `needs_review`: none was opened (drift that blocks, or a read-only "
        "data directory); the client decides what next."
    )
    thread: ThreadInfo = Field(description="The thread as it stands now.")
    session: SessionRef = Field(description="The session this resume opened, if any.")
    environment: Environment = Field(description="Recorded versus current workspace.")
    subsystems: list[SubsystemReport] = Field(
        description="Every subsystem, in the fixed restore order."
    )
    pendingOperations: list[PendingOperation] = Field(
        default_factory=list, description="Operations without a persisted outcome."
    )
    lastDurableSeq: int = Field(description="Seq of the last item on disk.")
    recovery: Recovery = Field(description="How the state was read, and what was skipped.")
    continueReason: str | None = Field(
        None,
        description="Why the thread continues: `user` (closed cleanly before) or "
        "`process_recovery` (its last session never ended).",
    )
    messages: MessagesPage = Field(description="The conversation to show and continue from.")
    readOnly: ReadOnlyHome | None = Field(
        None,
        description="Set when the data directory cannot be written: the report is complete, "
        "but no session was opened and nothing may be recorded.",
    )
    handoff: Handoff | None = Field(
        default=None,
        description="Imported threads only: resume opens no sessiond session (the importer "
        "keeps appending the agent's lines); when the workspace matches, or the drift is "
        "accepted, this is the agent's own command to continue in. Null otherwise.",
    )


class ThreadForkParams(ThreadIdParams):
    atTurnId: str | None = Field(
        default=None, max_length=ITEM_ID_MAX, description="Fork after the end of this turn."
    )
    atSeq: int | None = Field(
        default=None, ge=1, description="Fork after this seq (default: the whole thread)."
    )


class ThreadForkResult(Result):
    thread: ThreadInfo = Field(description="The new thread, with `forkedFrom` set.")
    sessionId: str = Field(description="Its first session.")


class ThreadSetTitleParams(ThreadIdParams):
    title: str = Field(max_length=500, description="The new title.")


class ThreadSetTitleResult(Result):
    thread: ThreadInfo = Field(description="The thread with its new title.")


class CarryParams(WireModel):
    """What a reset carries from the thread it replaces to the new one (never the
    conversation)."""

    model: bool | None = Field(None, description="The model override (default true).")
    permissions: bool | None = Field(None, description="The permissions (default true).")
    todos: bool | None = Field(None, description="The todo list (default false).")


class FreshnessPolicy(WireModel):
    """When a key's current thread is stale: any field left out comes from the settings
    (`sessions.toml` in the data directory: the default, then the client's, then the
    longest matching key prefix's)."""

    reset: Literal["none", "daily", "idle", "both"] | None = Field(
        None,
        description="`none` (never: the person decides), `daily` (the first message after "
        "`atHour` local time starts a new thread), `idle` (after `idleMinutes` without "
        "activity), `both` (whichever comes first).",
    )
    atHour: int | None = Field(
        default=None, ge=0, le=23, description="`daily`: the local hour a day begins (4)."
    )
    idleMinutes: float | None = Field(
        default=None,
        ge=0,
        description="`idle`: minutes without activity after which the next message starts a "
        "new thread (0: never). At exactly the limit the thread continues.",
    )
    carry: CarryParams | None = Field(None, description="What a reset carries over.")


class ThreadContinueParams(Params):
    """A message arrived for `sessionKey`: continue its current thread, or start the one
    that replaces it when the policy says it is stale."""

    sessionKey: str = SessionKey
    cwd: str = Field(
        min_length=1,
        description="Absolute path of an existing directory the agent works in: where a new "
        "thread starts, and where a resumed one is judged (as `thread/resume {cwd}`).",
    )
    policy: FreshnessPolicy | None = Field(
        None, description="This call's policy, over the settings' (field by field)."
    )
    title: str | None = Field(
        default=None, max_length=500, description="A new thread's title (startup, reset)."
    )
    model: str | None = Field(
        None, description="A new thread's model (startup, reset: over the one carried)."
    )
    permissions: Permissions | None = Field(
        None, description="A new thread's permissions (startup, reset: over those carried)."
    )
    acceptDrift: bool = Field(False, description="As `thread/resume`'s, for a resume.")
    messageLimit: int = Field(
        default=MAX_PAGE, ge=1, le=MAX_PAGE, description="As `thread/resume`'s (1-200)."
    )
    availableModels: list[str] | None = Field(None, description="As `thread/resume`'s.")


class EffectivePolicy(WireModel):
    reset: Literal["none", "daily", "idle", "both"] = Field(description="The mode judged by.")
    atHour: int = Field(description="`daily`'s local hour.")
    idleMinutes: float = Field(description="`idle`'s limit in minutes (0: never).")
    timezone: str = Field(description="The zone `atHour` is local to (an IANA name).")
    carry: dict[str, bool] = Field(description="`{model, permissions, todos}`.")


class ThreadContinueResult(Result):
    reason: Literal["startup", "resume", "reset"] = Field(
        description="`startup`: the key had no current thread, a new one started; `resume`: "
        "its current thread continues; `reset`: the policy found it stale and a new thread, "
        "linked to it, starts instead (`resetReason`)."
    )
    resetReason: ResetReason | None = Field(
        None,
        description="`reset` only: `daily` (a day began, at `atHour` local time, since its "
        "last activity) or `idle` (longer than `idleMinutes` without activity); both "
        "stale: the one that came first.",
    )
    thread: ThreadInfo = Field(description="The thread to continue in.")
    sessionId: str | None = Field(
        description="The session to record through; null when a resume needs review "
        "(`restore.status`): resume it with `acceptDrift`, or not."
    )
    sessionOpened: bool = Field(
        description="A session was opened now (SessionStart hooks run: source `startup`, "
        "`resume` or `reset`); false when this client held the thread's session already "
        "and it simply goes on (nothing written)."
    )
    previousThreadId: str | None = Field(
        None, description="`reset`: the thread replaced (its `nextThreadId` names this one)."
    )
    lastActivity: str | None = Field(
        None, description="When the key's thread was last active (its `updatedAt`), judged."
    )
    policy: EffectivePolicy = Field(description="The policy the key was judged by.")
    restore: RestoreReport | None = Field(
        None,
        description="`resume` that opened a session (or needs review): `thread/resume`'s "
        "whole answer. Null otherwise.",
    )
    carried: list[str] = Field(
        default_factory=list,
        description="`reset`: what came over from the replaced thread (`model`, "
        "`permissions`, `todos`), as the policy's `carry` says.",
    )


class ThreadResolveParams(Params):
    prefix: str = Field(
        min_length=4,
        max_length=36,
        description="A thread id or its first 4 or more hex digits, as a person typed it "
        "(any case; hyphens where the id has them, or none); InvalidId otherwise.",
    )


class ThreadResolveResult(Result):
    threads: list[ThreadInfo] = Field(
        description="The threads whose id starts with it, archived and sub-agent threads "
        "too, in id order, at most 10: one names the thread; none or several, that the "
        "person must type (more of) another id."
    )
    more: bool = Field(description="More than these 10 threads start with it.")


class EmptyResult(Result):
    pass


# --- notifications ---------------------------------------------------------------------


class ThreadStartedNotification(WireModel):
    thread: ThreadInfo = Field(description="A thread started or forked by any client.")


class ThreadUpdatedNotification(WireModel):
    thread: ThreadInfo = Field(
        description="The thread's new row (only `threadId` when it was deleted)."
    )
    deleted: bool = Field(False, description="The thread was deleted.")


class ItemRecordedNotification(WireModel):
    """Sent to subscribers of a thread: its newly stored lines, in seq order, each once.

    One append per notification when this server wrote it; with a shared store, other
    machines' appends come as the rows after the last seq sent (several appends at once,
    or a long run split into pages under the frame limit)."""

    threadId: str = Field(description="The thread written to.")
    items: list[dict[str, Any]] = Field(description="The stored items, with their seq.")


class LifecycleHookNotification(WireModel):
    """A lifecycle hook's run: `started`, then `completed`, `failed` or `timed_out`.

    Sent after the answer of the request that started or ended the session; hooks never
    change or delay an answer. The same fields are recorded as `lifecycle` items."""

    threadId: str = Field(description="The thread the session belongs to.")
    sessionId: str = Field(description="The session that started or ended.")
    event: Literal["SessionStart", "SessionEnd"] = Field(description="Which hook event ran.")
    status: HookStatus = Field(
        description="`started`, then `completed`, `failed` (non-zero exit, bad output) or "
        "`timed_out`."
    )
    hook: str = Field(description="The hook's `name`, else its command shortened.")
    hookType: Literal["command", "python"] = Field(description="How the hook runs.")
    runId: str = Field(description="Shared by the `started` and final notification of a run.")
    source: LifecycleSource | None = Field(None, description="SessionStart: why the session began.")
    reason: str | None = Field(
        None, description="SessionEnd: why it ended (close, clear, shutdown, disconnect, reset)."
    )
    resetReason: ResetReason | None = Field(
        None, description="SessionStart `reset` and SessionEnd `reset`: `daily` or `idle`."
    )
    origin: str | None = Field(
        None,
        description="Where the hook is configured: `user`, `workspace:<folder>` or "
        "`entry_point:<distribution>`.",
    )
    command: str | None = Field(None, description="The command line that ran.")
    exitCode: int | None = Field(None, description="Its exit code, once it finished.")
    stderr: str | None = Field(None, description="The end of its stderr (at most 4 KiB).")
    error: str | None = Field(None, description="Why it failed, in words.")
    durationMs: int | None = Field(None, description="How long it ran, in milliseconds.")
    promptSection: str | None = Field(
        None, description="The prompt section its `additionalContext` became."
    )


class ConnectionDroppedNotification(WireModel):
    """The last message of a WebSocket connection the server dropped because the client did
    not read what was sent to it fast enough (its queue, or every client's together, was
    full); what was queued for it was freed, and the connection closes after this."""

    reason: str = Field(description="Why this client was dropped, in words.")
    queuedBytes: int = Field(ge=0, description="Bytes that were waiting for it when dropped.")


class ProgressValue(WireModel):
    kind: Literal["begin", "report", "end"] = Field(
        description="`begin` (with a title), `report` (progress), `end`."
    )
    title: str | None = Field(None, description="What is in progress, e.g. Indexing threads.")
    message: str | None = Field(None, description="Progress in words, e.g. `40/100`.")
    percentage: int | None = Field(None, description="Progress in percent (0-100).")


class ProgressNotification(WireModel):
    token: str = Field(description="Identifies one task from begin to end.")
    value: ProgressValue = Field(description="Its progress.")


METHODS: dict[str, tuple[type[BaseModel] | None, type[BaseModel] | None]] = {
    "initialize": (InitializeParams, InitializeResult),
    "shutdown": (None, None),
    "thread/start": (ThreadStartParams, ThreadStartResult),
    "thread/record": (ThreadRecordParams, ThreadRecordResult),
    "thread/list": (ThreadListParams, ThreadListResult),
    "thread/read": (ThreadReadParams, ThreadReadResult),
    "thread/search": (ThreadSearchParams, ThreadSearchResult),
    "usage/report": (UsageReportParams, UsageReportResult),
    "thread/readBlob": (ThreadReadBlobParams, ThreadReadBlobResult),
    "thread/export": (ThreadExportParams, ThreadExportResult),
    "thread/resume": (ThreadResumeParams, RestoreReport),
    "thread/continue": (ThreadContinueParams, ThreadContinueResult),
    "thread/fork": (ThreadForkParams, ThreadForkResult),
    "thread/archive": (ThreadIdParams, EmptyResult),
    "thread/unarchive": (ThreadIdParams, EmptyResult),
    "thread/delete": (ThreadIdParams, EmptyResult),
    "thread/setTitle": (ThreadSetTitleParams, ThreadSetTitleResult),
    "thread/resolve": (ThreadResolveParams, ThreadResolveResult),
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
    "connection/dropped": ConnectionDroppedNotification,
}

SUMMARIES: dict[str, str] = {
    "initialize": "The first request: who the client is and which folders it has open. Reads "
    "nothing from disk.",
    "shutdown": "The client is leaving: its sessions end (SessionEnd hooks run); then `exit`.",
    "thread/start": "A new thread, durable at once, with its first session; with "
    "`parentThreadId`, a sub-agent's thread under an existing one.",
    "thread/record": "Append items to the thread through an open session; acknowledged once "
    "durable. Safe to retry: known item ids are not written again.",
    "thread/list": "Threads, most recently updated first, filtered before paging. By default "
    "only top-level threads: a sub-agent's thread (`parentThreadId` set) is listed under its "
    "parent, with `thread/list {parentThreadId}`, and counted in the parent's `childCount`; "
    "one whose parent is not stored is listed at the top, never hidden.",
    "thread/read": "A thread's stored items, a page at a time, in ascending seq.",
    "thread/search": "Full-text search over every thread's messages, tool calls, edited "
    "paths, todos and titles (its own, ACP and imported threads): hits best first with a "
    "snippet and highlights, filtered before paging.",
    "usage/report": "Tokens and cost per day, week, month, session or 5-hour billing block "
    "over every thread (imported agents' too), optionally by model, agent or project, as "
    "ccusage counts them; answered from the index (no record read again).",
    "thread/readBlob": "A file's content before or after one of the thread's recorded edits "
    "(for a diff), read through the `file_edit` item that names it: a seq that is not such "
    "an item of this thread, or a sha it does not name, is Unauthorized; content larger than "
    "one answer (`--max-frame`) is PayloadTooLarge.",
    "thread/export": "A thread as a document — Markdown, JSON (the protocol's items, "
    "lossless) or one self-contained HTML page, optionally encrypted — with its sub-agents, "
    "edits as diffs, failed calls marked and the restore's drift; answered in parts of at "
    "most an eighth of the frame limit, written page by page in a process of its own.",
    "thread/resume": "Restore every subsystem and open a new session, or say why not "
    "(`needs_review`): the RestoreReport.",
    "thread/continue": "A message arrived for a session key: its current thread continues "
    "(a session opened on it, as `thread/resume`), or, when the key's freshness policy "
    "finds it stale (`daily`, `idle`), a new thread replaces it, linked both ways and "
    "carrying what the policy says but never the conversation; a key without one starts "
    "its first. One thread per key and reset, whichever processes (or machines) ask at once.",
    "thread/fork": "A new thread holding the items up to a turn or seq, with its own session.",
    "thread/archive": "Move a thread to the archive (listed with `archived: true`).",
    "thread/unarchive": "Bring an archived thread back.",
    "thread/delete": "Delete a thread's file for good.",
    "thread/setTitle": "Rename a thread (recorded as an item, so it survives a lost index).",
    "thread/resolve": "The threads whose id starts with what a person typed (git-style: 4 or "
    "more hex digits, as `sessiond list` and `search` print them), so a typed prefix names "
    "one thread or says which it could be.",
    "thread/close": "End a session: the writer is released and a snapshot taken.",
    "thread/clear": "A new session with an empty conversation; cost, todos, model and "
    "permissions carry over.",
    "thread/compact": "Replace the history before this point with a summary.",
    "fs/applyEdit": "Write a file for the agent, ledgered: applied once, decided by content hash.",
    "thread/rewind": "Go back to the end of a turn: files and/or conversation.",
    "thread/subscribe": "Receive `item/recorded` for every append to a thread.",
    "thread/unsubscribe": "Stop receiving `item/recorded` for a thread.",
    "initialized": "Sent once after the answer to `initialize`.",
    "exit": "Close the connection (after `shutdown`).",
    "workspace/didChangeWorkspaceFolders": "The editor opened or closed folders.",
    "$/cancelRequest": "Cancel a request in flight (`{id}`); it is answered with -32800.",
    "thread/started": "A thread was started or forked, by any client (or imported).",
    "thread/updated": "A thread's row changed (records coalesced: at most one per thread "
    "every 50 ms; a parent's count of sub-agents), or it was deleted.",
    "item/recorded": "Items stored in a thread you subscribed to, in seq order.",
    "lifecycle/hook": "A lifecycle hook started, completed, failed or timed out.",
    "$/progress": "Progress of long work, such as rebuilding the thread index.",
    "connection/dropped": "WebSocket only: this client was dropped for not reading; why.",
}
"""One line per method and notification, for docs/protocol.md."""
