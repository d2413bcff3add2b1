"""`$/progress` reporters: begin, report, end, callable from the store thread."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

_tokens = iter(range(1, 1 << 62))


def reporter(
    loop: asyncio.AbstractEventLoop,
    notify: Callable[[str, Any], None],
    title: str,
    noun: str,
    verb: str,
) -> Callable[[int, int], None]:
    """A `(done, total)` callback that sends `$/progress` through `notify` on the loop:
    `begin` at the first call, `report` after, `end` ("3 threads indexed") once done reaches
    total. Nothing to do (total 0 at the first call) is nothing to report (nor imported:
    a first `thread/list` makes a reporter it seldom uses)."""
    token = f"sessiond/{next(_tokens)}"
    state = {"begun": False, "ended": False}

    def send(value: dict[str, Any]) -> None:
        loop.call_soon_threadsafe(notify, "$/progress", {"token": token, "value": value})

    def report(done: int, total: int) -> None:
        if state["ended"] or (total == 0 and not state["begun"]):
            return
        percentage = 100 if total == 0 else min(100, done * 100 // total)
        message = f"{done}/{total}"
        if not state["begun"]:
            state["begun"] = True
            send({"kind": "begin", "title": title, "percentage": percentage, "message": message})
        if done >= total:
            from restore.render.text import plural

            state["ended"] = True
            send({"kind": "end", "message": f"{plural(total, noun)} {verb}"})
        elif state["begun"]:
            send({"kind": "report", "percentage": percentage, "message": message})

    return report
