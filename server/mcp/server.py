"""The MCP server over stdio (the official SDK's `MCPServer`): the tools of tools.py, their
arguments described for a model, every call run on one thread of its own.

One thread, because the thread service is used as the server's store thread uses it (one
caller at a time: its SQLite connections belong to the thread that opened them); the
event loop stays free to read the next request meanwhile. A `Refused` or a ProtocolError
(a malformed query, an unknown thread) is returned as an MCP tool error (`isError`) whose
text names the mend, as the SDK's own argument validation is.
"""

from __future__ import annotations

import asyncio
import os
import shlex
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Annotated, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from protocol.errors import ProtocolError
from restore.service.search import AGENTS
from server import __version__
from server.cli.options import CommandError
from server.mcp.tools import MAX_LIST, MAX_READ, MAX_SEARCH, Refused, Scope, Tools

if TYPE_CHECKING:
    import argparse

    from server.config import ServerConfig

INSTRUCTIONS = (
    "sessiond keeps every session of the coding agents on this machine (Claude Code, Codex, "
    "Gemini CLI and more), secrets redacted. search_sessions finds what was said or done in "
    "past sessions of this workspace; read_session reads one; list_sessions lists them; "
    "resume_command says how to continue one. Answers are paged: when there are more, the "
    "answer gives the cursor for the next page."
)
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False, idempotent_hint=True)
Cursor = Annotated[
    str | None, Field(description="the cursor the previous answer gave, for the next page")
]
Thread = Annotated[str, Field(description="a thread id, or its first characters (8 will do)")]
Folder = Annotated[
    str | None,
    Field(description="only this folder (absolute; inside the folders this server sees)"),
]


def build(tools: Tools) -> MCPServer:
    """The server with its five tools, each a call on the one service thread."""
    worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sessiond-mcp")
    server = MCPServer(
        "sessiond", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )

    async def call(answer: Callable[[], str]) -> str:
        try:
            tools.answerable()
            return await asyncio.get_running_loop().run_in_executor(worker, answer)
        except Refused as exc:
            raise ToolError(str(exc)) from None
        except ProtocolError as exc:
            raise ToolError(f"{exc.kind.value}: {exc}") from None

    async def search_sessions(
        query: Annotated[
            str,
            Field(
                description='words (all of them), "a phrase", prefix*, -word (leaves out '
                "what has it)"
            ),
        ],
        agent: Annotated[
            str | None,
            Field(description=f"only sessions of this agent: {', '.join(AGENTS)}"),
        ] = None,
        role: Annotated[
            Literal["user", "assistant", "tool", "output", "edit", "todo", "title"] | None,
            Field(description="only records of this kind"),
        ] = None,
        since: Annotated[
            str | None,
            Field(description="only this recent: 30m, 12h, 7d, 2w, or an ISO 8601 date/time"),
        ] = None,
        until: Annotated[str | None, Field(description="only older than this (same forms)")] = None,
        folder: Folder = None,
        archived: Annotated[bool, Field(description="search archived sessions instead")] = False,
        cursor: Cursor = None,
        limit: Annotated[int, Field(ge=1, le=MAX_SEARCH, description="hits per page")] = 10,
    ) -> str:
        """Search past agent sessions of this workspace: each hit names the session (its
        id, agent, when, title), the matching text, and the command that resumes it."""
        return await call(
            lambda: tools.search_sessions(
                query,
                agent=agent,
                role=role,
                since=since,
                until=until,
                folder=folder,
                archived=archived,
                cursor=cursor,
                limit=limit,
            )
        )

    async def read_session(
        thread: Thread,
        order: Annotated[
            Literal["newest", "oldest"],
            Field(description="newest: the last items first, each next page older"),
        ] = "newest",
        cursor: Cursor = None,
        limit: Annotated[int, Field(ge=1, le=MAX_READ, description="items per page")] = 40,
    ) -> str:
        """Read a past session as a compact transcript (messages, tool calls and their
        outcome, edits, todos, cost), a page at a time."""
        return await call(
            lambda: tools.read_session(thread, order=order, cursor=cursor, limit=limit)
        )

    async def list_sessions(
        text: Annotated[
            str | None, Field(description="only sessions whose title or first message has it")
        ] = None,
        folder: Folder = None,
        archived: Annotated[bool, Field(description="list archived sessions instead")] = False,
        cursor: Cursor = None,
        limit: Annotated[int, Field(ge=1, le=MAX_LIST, description="sessions per page")] = 20,
    ) -> str:
        """List the past agent sessions of this workspace, most recently active first."""
        return await call(
            lambda: tools.list_sessions(
                text=text, folder=folder, archived=archived, cursor=cursor, limit=limit
            )
        )

    async def resume_command(thread: Thread) -> str:
        """The shell command that continues a past session (its agent's own resume for an
        imported one), and whether its workspace changed since."""
        return await call(lambda: tools.resume_command(thread))

    async def usage(
        report: Annotated[
            Literal["daily", "weekly", "monthly", "session", "blocks"],
            Field(description="per day, week, month, session, or 5-hour billing block"),
        ] = "daily",
        by: Annotated[
            Literal["model", "agent", "project"] | None,
            Field(description="each row broken down by this"),
        ] = None,
        since: Annotated[
            str | None, Field(description="from this day on: YYYY-MM-DD (or YYYYMMDD)")
        ] = None,
        until: Annotated[str | None, Field(description="up to this day: YYYY-MM-DD")] = None,
        timezone: Annotated[
            str | None, Field(description="the days' time zone (IANA); default the machine's")
        ] = None,
    ) -> str:
        """Tokens (input, output, cache read and write) and cost in USD of the past agent
        sessions of this workspace, per day, week, month, session or 5-hour block."""
        return await call(
            lambda: tools.usage(report, by=by, since=since, until=until, timezone=timezone)
        )

    for tool in (search_sessions, read_session, list_sessions, resume_command, usage):
        # the docstring on one line: a model reads it, not a person in an editor
        server.add_tool(
            tool,
            description=" ".join((tool.__doc__ or "").split()),
            annotations=READ_ONLY,
            structured_output=False,
        )
    return server


def run(tools: Tools) -> int:
    """Serve on stdin/stdout until the client closes them."""
    try:
        build(tools).run("stdio")
    finally:
        tools.service.close_all()
    return 0


def main(config: ServerConfig, args: argparse.Namespace) -> int:
    """`sessiond mcp` (server/cli/main.py lists it): the scope from `--folder`,
    `--all-folders` or the working directory, on the configured store."""
    from restore.service import open_service

    if args.folder and args.all_folders:
        raise CommandError("--folder narrows what --all-folders widens: give one of them")
    scope = Scope.of(args.folder or [os.getcwd()], args.all_folders, told=bool(args.folder))
    where = "".join(
        f" --{option} {shlex.quote(str(getattr(args, option)))}"
        for option in ("home", "store")
        if getattr(args, option, None)
    )
    service = open_service(config.store_settings())
    return run(Tools(service, scope, where))
