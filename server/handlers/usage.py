"""`usage/report`: on the store thread, after this process's pending index rows are
written (the calls recorded a moment ago count), answered from the index."""

from __future__ import annotations

from typing import Any

from server.handlers.context import Context


async def usage_report(ctx: Context, params: Any) -> dict[str, Any]:
    progress = ctx.progress("Indexing threads")

    def answer() -> dict[str, Any]:
        from restore.usage.request import usage_report

        store = ctx.service.store
        store.flush()
        store.index.ensure_ready(progress)
        return usage_report(store.index, params.report, by=params.by, since=params.since,
                            until=params.until, timezone=params.timezone,
                            start_of_week=params.startOfWeek)  # fmt: skip

    return await ctx.server.run_in_worker(answer)
