"""`thread/subscribe` and `thread/unsubscribe`: follow a thread's items as they are
recorded, by this process or any other (server/live/subscriptions.py has the fan-out)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from server.handlers.context import Context

if TYPE_CHECKING:
    from protocol.methods import ThreadIdParams


async def thread_subscribe(ctx: Context, params: ThreadIdParams) -> dict[str, Any]:
    """Followers get what comes after the thread's last item as read now: the relay
    publishes from that seq on, whichever process or machine writes."""
    from restore.ids import validate_thread_id

    thread_id = validate_thread_id(params.threadId)
    ctx.server.ensure_watching()  # appends by other processes reach followers too
    subscriptions = ctx.server.subscriptions
    relay = subscriptions.follow_with_relay()
    relay.subscribing(thread_id)
    last: int | None = None
    try:
        # The service first (on the worker, where it is made): with a shared store, its
        # listener (other machines' appends) starts with it.
        await ctx.server.run_in_worker(lambda: ctx.service)
        last = await ctx.server.run_reader(partial(ctx.server.pages.last_seq, thread_id))
        subscriptions.add(thread_id, ctx.connection)
    finally:
        relay.subscribed(thread_id, last, bool(subscriptions.followers(thread_id)))
    return {}


async def thread_unsubscribe(ctx: Context, params: ThreadIdParams) -> dict[str, Any]:
    from restore.ids import validate_thread_id

    ctx.server.subscriptions.remove(validate_thread_id(params.threadId), ctx.connection)
    return {}
