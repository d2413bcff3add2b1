"""`sessiond search QUERY`: every thread's records searched offline (no server), one line
per hit: the thread, when, the snippet with the match highlighted, and the command that
continues it.

Everything printed that was recorded (snippets, titles, an imported session's cwd) goes
through `terminal.safe` (server/cli/terminal.py) first: a recorded escape sequence is
shown, never sent. Exit code 0 with hits, 1 with none (as grep), 2 for a malformed query
(the one-line InvalidParams)."""

from __future__ import annotations

import os
import re
import shlex
import sys
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

from protocol.agents import SEARCH_AGENTS
from restore.service import open_service
from restore.stores.api import SearchFilters
from restore.stores.records import ts_at
from server.cli.options import CommandError, limit
from server.cli.terminal import clip, print_json, relative_time, safe
from server.config import ServerConfig

if TYPE_CHECKING:  # `search` is read without argparse (server/cli/quick.py)
    import argparse

TITLE_COLUMNS = 28
_AGO = re.compile(r"(\d+)([mhdw])")
_UNIT = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
BOLD, PLAIN = "\x1b[1;4m", "\x1b[22;24m"


def arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "query",
        metavar="QUERY",
        nargs="*",
        help='words, "a phrase", prefix*, -word (leaves out what has it): all of them, '
        "one argument or several",
    )
    parser.add_argument("--cwd", help="only threads started in this directory")
    parser.add_argument("--workspace-folder", help="only threads in or under this folder")
    parser.add_argument("--agent", choices=SEARCH_AGENTS)
    parser.add_argument(
        "--role", choices=("user", "assistant", "tool", "output", "edit", "todo", "title")
    )
    parser.add_argument(
        "--since",
        help="only records this recent: 30m, 12h, 7d, 2w (that long ago), or an ISO 8601 "
        "date or time (2026-03-10, 2026-03-10T12:00:00Z)",
    )
    parser.add_argument("--until", help="only records older than this (same forms)")
    parser.add_argument("--archived", action="store_true", help="search archived threads")
    parser.add_argument(
        "--limit", type=limit, default=20, help="at most this many, 1 to 200 (default 20)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object (SearchHit) a line")


def when(value: str | None, option: str = "--since", now: float | None = None) -> str | None:
    """`7d` (and m, h, w) as the ISO instant that long ago; an ISO date or time as given;
    anything else a one-line error naming the forms `option` takes."""
    if value is None:
        return None
    if (ago := _AGO.fullmatch(value.strip())) is None:
        try:
            datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise CommandError(
                f"{option} takes 30m, 12h, 7d, 2w (that long ago) or an ISO 8601 date or "
                f"time (2026-03-10, 2026-03-10T12:00:00Z), not {value[:40]!r}"
            ) from None
        return value.strip()
    seconds = int(ago.group(1)) * _UNIT[ago.group(2)]
    return ts_at((time.time() if now is None else now) - seconds)


def resume_command(thread: dict[str, Any], where_flags: str = "") -> str:
    """What continues the thread from a shell: its agent's own resume for an imported
    one (restore/agents/registry.py); for the others `sessiond resume` with the id's first
    8 digits (what this line shows), which says what a resume gives back and how to go
    on. `where_flags`: the `--home` / `--store` this search was given, so the command
    reads the same threads as printed."""
    from restore.agents.registry import handoff_command, imported

    origin = thread.get("origin") or {}
    agent, session = origin.get("agent"), origin.get("parentSessionId") or origin.get("sessionId")
    if imported(agent) and isinstance(agent, str) and isinstance(session, str):
        command = handoff_command(agent, session)
        cwd = thread.get("cwd")
        if command:
            where = f"cd {shlex.quote(cwd)} && " if isinstance(cwd, str) and cwd else ""
            return where + shlex.join(command)
    return f"sessiond{where_flags} resume {thread['threadId'][:8]}"


def highlighted(snippet: str, highlights: list[list[int]], color: bool) -> str:
    """The snippet made safe for a terminal, its matches bold and underlined (or, not on a
    terminal, between `[` and `]`)."""
    start, end = (BOLD, PLAIN) if color else ("[", "]")
    out, at = [], 0
    for a, b in highlights:
        out += [safe(snippet[at:a], one_line=True), start, safe(snippet[a:b], one_line=True), end]
        at = b
    out.append(safe(snippet[at:], one_line=True))
    return "".join(out)


def search(config: ServerConfig, args: argparse.Namespace) -> int:
    query = " ".join(args.query)
    if not query.strip():
        raise CommandError('a search needs QUERY: words, "a phrase", prefix*, -word')
    since, until = when(args.since), when(args.until, "--until")
    flags = "".join(
        f" --{option} {shlex.quote(str(getattr(args, option)))}"
        for option in ("home", "store")
        if getattr(args, option, None)
    )
    service = open_service(config.store_settings())
    interactive = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        if interactive and total:
            sys.stderr.write(f"\rindexing threads for search {done}/{total}")
            sys.stderr.write("\n" if done >= total else "")

    try:
        asked = SearchFilters(
            cwd=args.cwd,
            workspace_folder=args.workspace_folder,
            agent=args.agent,
            role=args.role,
            since=since,
            until=until,
            archived=args.archived,
        )
        found = service.search(
            query,
            asked,
            limit=args.limit,
            progress=progress,
            budget=None,  # a command has the index to itself: build what is missing
        )
    finally:
        service.close_all()
    color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    for hit in found.hits:
        info = hit.thread.thread_info()
        if args.json:
            print_json(
                {
                    "threadId": info["threadId"],
                    "seq": hit.seq,
                    "role": hit.role,
                    "ts": hit.ts,
                    "snippet": hit.snippet,
                    "highlights": hit.highlights,
                    "thread": info,
                    "resume": resume_command(info, flags),
                }
            )
            continue
        label = str(info["title"] or info["preview"] or "(untitled)")
        print(
            f"{info['threadId'][:8]}  {relative_time(hit.ts):>9}  "
            f"{clip(safe(label, one_line=True), TITLE_COLUMNS):{TITLE_COLUMNS}}  "
            f"{hit.role:9}  {highlighted(hit.snippet, hit.highlights, color)}  "
            f"» {safe(resume_command(info, flags), one_line=True)}"
        )
    if not found.hits and not args.json:
        print("no hits", file=sys.stderr)
    return 0 if found.hits else 1
