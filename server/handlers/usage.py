"""`usage/report`: this process's pending index rows written on the store thread (the
calls recorded a moment ago count), then the report answered from the index on a reader
thread where the store can answer apart (its own connection), so a long report never
holds another client's record."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from server.handlers.context import Context

if TYPE_CHECKING:
    from protocol.methods import UsageReportParams


async def usage_report(ctx: Context, params: UsageReportParams) -> dict[str, Any]:
    from restore.usage.entries import UsageSource
    from restore.usage.request import usage_report

    progress = ctx.progress("Indexing threads")
    store = ctx.service.store

    def prepare() -> UsageSource | None:
        store.flush()
        store.index.ensure_ready(progress)
        return store.index.usage_apart()

    def answer(source: UsageSource) -> dict[str, Any]:
        return usage_report(
            source,
            params.report,
            by=params.by,
            since=params.since,
            until=params.until,
            timezone=params.timezone,
            start_of_week=params.startOfWeek,
        )

    apart = await ctx.server.run_in_worker(prepare)
    if apart is None:  # an index in memory: only the store's thread reaches it
        return await ctx.server.run_in_worker(lambda: answer(store.index))
    return await ctx.server.run_reader(lambda: answer(apart))
