"""What a store hands a usage report: model calls summed per model and stretch of time
(`UsageEntry`), the threads they are of (`UsageThread`), and the SQL both stores filter
them by. Apart from restore/stores/api.py (which re-exports them) so that a `sessiond
usage` spawn answered from the index file alone (restore/stores/embedded/usage_file.py)
imports none of the store interface."""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol


class UsageEntry(NamedTuple):
    """Model calls of one thread and model, summed over a stretch of time (`sessiond
    usage`, restore/usage): the tokens as restore/summary.py `usage_row` counts them."""

    threadId: str
    firstMs: int
    """The first call's time, epoch milliseconds; `lastMs` the last's."""
    lastMs: int
    model: str
    inputTokens: int
    outputTokens: int
    cacheReadTokens: int
    cacheWriteTokens: int
    usd: float
    unpriced: int
    """Calls whose model the price list does not know (their USD is not in `usd`)."""
    calls: int


class UsageThread(NamedTuple):
    """What a usage report says of a thread: its project, agent and parent."""

    threadId: str
    title: str | None
    project: str | None
    """The workspace folder, else the cwd."""
    agent: str
    """The agent whose session it was imported from (`origin.agent`), else `sessiond`."""
    parentThreadId: str | None
    workspaceFolder: str | None = None
    cwd: str | None = None
    """Where it ran: what scopes a report as a listing is scoped (server/mcp/tools.py)."""


Usage = tuple[list[UsageEntry], dict[str, UsageThread]]


class UsageSource(Protocol):
    """What a usage report asks: `Index.usage`, or what answers it apart."""

    def usage(
        self, since_ms: int | None, until_ms: int | None, grain_ms: int, *, threads: bool
    ) -> Usage: ...


def usage_thread(
    thread_id: str,
    title: str | None,
    cwd: str | None,
    workspace_folder: str | None,
    origin: Any,
    parent: str | None,
) -> UsageThread:
    """A thread's row as a usage report names it (both stores)."""
    agent = origin.get("agent") if isinstance(origin, dict) else None
    return UsageThread(
        thread_id,
        title,
        workspace_folder or cwd,
        agent if isinstance(agent, str) else "sessiond",
        parent,
        workspace_folder,
        cwd,
    )


def usage_window(
    column: str, since_ms: int | None, until_ms: int | None, mark: str = "?"
) -> tuple[list[str], list[Any]]:
    """The conditions of a usage query on the call's time in `column`, and their parameters
    (`mark`: the driver's placeholder)."""
    where, params = [], []
    if since_ms is not None:
        where.append(f"{column} >= {mark}")
        params.append(since_ms)
    if until_ms is not None:
        where.append(f"{column} < {mark}")
        params.append(until_ms)
    return where, params
