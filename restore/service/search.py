"""Search as a client asks it: the query parsed (InvalidParams naming what is wrong, before
any store is asked), the filters checked, the store's hits given their snippets.

What is found, and in which order, is the store's (`Store.search`, each backend's own
full-text machinery); what a hit shows is computed here (restore/search/snippets.py), so
a hit reads the same whichever store found it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime

from protocol.agents import AGENT_IDS
from protocol.errors import ErrorKind, ProtocolError
from restore.engine.environment import canonical
from restore.faults import pause_point
from restore.search import query as search_query
from restore.search.cancel import Cancel
from restore.search.snippets import snippets
from restore.search.text import ROLES
from restore.stores.api import Progress, SearchFilters, Store
from restore.stores.records import ts_at
from restore.summary import ThreadSummary

AGENTS = ("sessiond", *AGENT_IDS, "acp")
DEFAULT_BUDGET = 2.0
NO_FILTERS = SearchFilters()
"""A search of every unarchived thread."""
"""Seconds a search may spend indexing what is not indexed yet before it answers from
what is (`partial`): the client waits meanwhile, and so do the searches after it."""


@dataclass(frozen=True)
class Found:
    thread: ThreadSummary
    seq: int
    role: str
    ts: str
    snippet: str
    highlights: list[list[int]]


@dataclass(frozen=True)
class Results:
    hits: list[Found]
    next_cursor: str | None
    partial: bool


def _invalid(name: str, message: str) -> ProtocolError:
    return ProtocolError(ErrorKind.INVALID_PARAMS, f"{name}: {message}", field=name)


def timestamp(name: str, value: str | None) -> str | None:
    """An ISO 8601 instant as the stored timestamps are written (UTC, fixed width), so a
    text comparison is a time comparison; InvalidParams otherwise."""
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise _invalid(name, f"not an ISO 8601 time: {value[:40]!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return ts_at(moment.timestamp())


def asked_again(exc: ProtocolError) -> bool:
    """The search found its index file damaged and set it aside: asked again, the index
    is rebuilt from the thread files (`ask`) and the search answered from it."""
    return bool(exc.details.get("setAside"))


@dataclass(frozen=True)
class Asked:
    """A search as asked, checked: what `find` needs (`Searches.ask` makes it)."""

    query: search_query.Query
    filters: SearchFilters
    beside_store: bool
    """The store's search may run on a thread of its own, beside the store thread
    (`SearchIndex.beside_store`)."""


class Searches:
    """The search side of the thread service (restore/service/threads.py)."""

    store: Store

    def search(
        self,
        text: str,
        filters: SearchFilters = NO_FILTERS,
        *,
        cursor: str | None = None,
        limit: int = 20,
        progress: Progress | None = None,
        index_progress: Progress | None = None,
        budget: float | None = DEFAULT_BUDGET,
    ) -> Results:
        """A page of hits: `ask`, then `find`, on the calling thread (a command, a test);
        once more when the search set a damaged index aside (`asked_again`)."""
        for attempt in (1, 2):
            asked = self.ask(text, filters, index_progress=index_progress)
            try:
                return self.find(
                    asked, cursor=cursor, limit=limit, progress=progress, budget=budget
                )
            except ProtocolError as exc:
                if attempt == 2 or not asked_again(exc):
                    raise
        raise AssertionError("unreachable")

    def ask(
        self,
        text: str,
        filters: SearchFilters = NO_FILTERS,
        *,
        index_progress: Progress | None = None,
    ) -> Asked:
        """The query parsed and the filters as asked checked (InvalidParams naming what
        is wrong) and made canonical (the cwd resolved, the times in the stored format),
        the listing index open (`index_progress`) and this process's latest rows written,
        so its latest records are found. On the store thread: the rows are its state."""
        query = search_query.parse(text)
        cwd, folder, agent, role = (
            filters.cwd,
            filters.workspace_folder,
            filters.agent,
            filters.role,
        )
        for name, value in (("cwd", cwd), ("workspaceFolder", folder)):
            if value is not None and "\0" in value:
                raise _invalid(name, "must not contain NUL")
        if agent is not None and agent not in AGENTS:
            raise _invalid("agent", f"one of {', '.join(AGENTS)}")
        if role is not None and role not in ROLES:
            raise _invalid("role", f"one of {', '.join(ROLES)}")
        filters = replace(
            filters,
            cwd=canonical(cwd) if cwd is not None else None,
            since=timestamp("since", filters.since),
            until=timestamp("until", filters.until),
        )
        self.store.index.ensure_ready(index_progress)
        self.store.flush()  # this process's latest records are searchable at once
        return Asked(query, filters, self.store.search.beside_store)

    def find(
        self,
        asked: Asked,
        *,
        cursor: str | None = None,
        limit: int = 20,
        progress: Progress | None = None,
        budget: float | None = DEFAULT_BUDGET,
        cancel: Cancel | None = None,
    ) -> Results:
        """A page of hits for what `ask` checked. `progress`: of indexing what the search
        index lacks (within `budget` seconds, None: all of it). On the store thread, or,
        when `asked.beside_store`, on a thread of its own (one search at a time).
        `cancel`: its client left; it stops (`Cancelled`) wherever it is. The snippets have
        a budget of their own (restore/search/snippets.py): past it, `partial`."""
        page = self.store.search.search(
            asked.query,
            asked.filters,
            cursor=cursor,
            limit=limit,
            progress=progress,
            budget=budget,
            cancel=cancel,
        )
        if page.hits:
            pause_point("search-snippets")  # tests: a search with hits held under way
        missing = [hit.text for hit in page.hits if hit.shown is None]
        made, out_of_time = snippets(missing, asked.query, cancel=cancel)
        shown = iter(made)
        hits = []
        for hit in page.hits:
            text, highlights = hit.shown or next(shown)
            hits.append(Found(hit.thread, hit.seq, hit.role, hit.ts, text, highlights))
        return Results(hits, page.next_cursor, page.partial or out_of_time)
