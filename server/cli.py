"""The `sessiond` command: serve (default), list, show, doctor, acp."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

import orjson

from server.config import ServerConfig


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sessiond",
        description=("Durable, resumable AI-agent sessions for editors (JSON-RPC over stdio)."),
    )
    parser.add_argument(
        "--home",
        help="data directory (default: $SESSIOND_HOME, "
        "$XDG_STATE_HOME/sessiond or ~/.local/state/sessiond)",
    )
    commands = parser.add_subparsers(dest="command")

    serve = commands.add_parser("serve", help="serve JSON-RPC (the default)")
    serve.add_argument(
        "--stdio",
        action="store_true",
        help="serve one client on stdin/stdout (the default without --ws)",
    )
    serve.add_argument(
        "--ws",
        metavar="[HOST:]PORT",
        help="also serve WebSocket clients on a loopback address (port 0: any free port)",
    )
    serve.add_argument(
        "--durability",
        choices=("fsync", "group", "none"),
        help="when an append counts as durable (default: fsync)",
    )
    serve.add_argument("--max-frame", type=int, help="largest accepted message, in bytes")

    listing = commands.add_parser("list", help="list threads, newest first")
    listing.add_argument("--cwd", help="only threads started in this directory")
    listing.add_argument("--workspace-folder", help="only threads in or under this folder")
    listing.add_argument("--archived", action="store_true", help="list archived threads")
    listing.add_argument("--search", help="case-insensitive text in title or preview")
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--json", action="store_true", help="one JSON object per line")

    show = commands.add_parser("show", help="print a thread's items")
    show.add_argument("thread_id")
    show.add_argument("--json", action="store_true", help="one JSON object per line")

    doctor = commands.add_parser("doctor", help="check every thread file, repair the index")
    doctor.add_argument(
        "--repair",
        action="store_true",
        help="also cut torn tails left by a crash (copied to recovered/ first)",
    )

    acp = commands.add_parser(
        "acp",
        help="serve ACP (Agent Client Protocol) to an editor, proxying AGENT and recording "
        "its sessions: sessiond acp -- AGENT [ARGS...]",
    )
    acp.add_argument("--home", dest="acp_home", help="data directory (as --home above)")
    acp.add_argument("agent", nargs=argparse.REMAINDER, help="the agent command, after --")

    from server.client import add_arguments

    add_arguments(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=os.environ.get("SESSIOND_LOG", "WARNING").upper(),
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    config = ServerConfig()
    if args.home:
        config.home = args.home
    command = args.command or "serve"
    if command == "serve":
        from server.app import SessiondServer
        from server.stdio import run_stdio

        if getattr(args, "durability", None):
            config.durability = args.durability
        if getattr(args, "max_frame", None):
            config.max_frame = args.max_frame
        if getattr(args, "ws", None):
            from server import ws

            return ws.run(SessiondServer(config), args.ws, with_stdio=args.stdio)
        return run_stdio(SessiondServer(config))
    if command == "acp":
        from pathlib import Path

        from server import acp

        agent = args.agent[1:] if args.agent[:1] == ["--"] else args.agent
        return acp.main(Path(args.acp_home or config.home), agent)
    if command == "client":
        from pathlib import Path

        from server import client

        return client.main(Path(config.home), args)
    from server import commands as offline

    try:
        if command == "list":
            return offline.list_threads(config, args)
        if command == "show":
            return offline.show_thread(config, args)
        return offline.doctor(config, repair=args.repair)
    except Exception as exc:  # a CLI prints a typed error, never a traceback
        from protocol.errors import ProtocolError

        if isinstance(exc, ProtocolError):
            print(f"sessiond: {exc.kind}: {exc.message}", file=sys.stderr)
            return 2
        raise


def print_json(value: Any) -> None:
    sys.stdout.buffer.write(orjson.dumps(value) + b"\n")


if __name__ == "__main__":
    sys.exit(main())
