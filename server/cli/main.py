"""The `sessiond` command line: every subcommand listed once, in `SUBCOMMANDS`.

Each entry names its arguments and the function that runs it; the function's module is
imported only when that subcommand runs, so `sessiond serve` loads nothing of `list`.
Options every subcommand takes (`--home`, `--store`) are accepted before or after its name. A known
failure is one line on stderr (`sessiond: StorageError: /path is not a directory`) and
exit code 2, never a traceback.

A spawn pays for every import before its first answer, so this module imports little at
the top: `--version` is answered first, the hot command lines are read without argparse
(server/cli/quick.py), and argparse is built only for the rest (tests/test_no_warmup.py).
"""

from __future__ import annotations

import os
import sys

from protocol import PROTOCOL_VERSION
from protocol.agents import AGENT_FLAGS
from server import __version__
from server.cli.options import THREAD_ID_HELP, CommandError, frame_size, limit

TYPE_CHECKING = False  # as typing's (mypy reads it so), without importing typing
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from server.cli.quick import Arguments
    from server.config import ServerConfig

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
USAGE_ERROR = 2
__all__ = ["CommandError", "main"]  # CommandError: where commands.py has always found it


class Subcommand:
    """`arguments` adds the subcommand's arguments (the second parser holds the common
    options, as a parent for any nested subcommands); `run` is `module:function`, called
    as `function(config, args) -> exit code`. (A plain class: a dataclass costs its
    import and an exec at every spawn.)"""

    def __init__(
        self,
        name: str,
        help: str,
        arguments: Callable[[argparse.ArgumentParser, argparse.ArgumentParser], None],
        run: str,
    ) -> None:
        self.name, self.help, self.arguments, self.run = name, help, arguments, run


def _serve_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--stdio",
        action="store_true",
        help="serve one client on stdin/stdout (the default without --ws; with --ws, both)",
    )
    parser.add_argument(
        "--ws",
        metavar="[HOST:]PORT",
        help="serve WebSocket clients on a loopback address (port 0: any free port); the "
        "port and token are written to $SESSIOND_HOME/servers/<port>.json",
    )
    parser.add_argument(
        "--folder",
        action="append",
        metavar="DIR",
        help="with --ws: a workspace folder this server is for, published in its discovery "
        "file so clients in it find it (repeatable; default: the current directory)",
    )
    parser.add_argument(
        "--linger",
        type=float,
        metavar="SECONDS",
        help="with --ws: exit once no client has been connected for SECONDS (how a server "
        "spawned by `sessiond client --spawn` or the editor ends; its folders come from its "
        "clients)",
    )
    parser.add_argument(
        "--shared",
        action="store_true",
        help="with --ws: the data dir's shared server, started by a window: under the spawn "
        "lock, exit at once if one already answers",
    )
    parser.add_argument(
        "--durability",
        choices=("fsync", "group", "none"),
        help="when an append counts as durable (default: fsync, or $SESSIOND_DURABILITY)",
    )
    parser.add_argument(
        "--max-frame",
        type=frame_size,
        metavar="BYTES",
        help="largest accepted message, at least 1024 (default 16 MiB)",
    )
    parser.add_argument(
        "--follow",
        metavar="AGENTS",
        help=f"{','.join(AGENT_FLAGS)}: import these agents' sessions and follow them live, "
        "from the first thread/list or thread/subscribe on (each from its own store: "
        "`sessiond import --help` says where)",
    )


def _list_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("--cwd", help="only threads started in this directory")
    parser.add_argument("--workspace-folder", help="only threads in or under this folder")
    parser.add_argument("--archived", action="store_true", help="list archived threads")
    parser.add_argument("--search", help="case-insensitive text in title or preview")
    parser.add_argument(
        "--key", metavar="PREFIX", help="only threads whose session key starts with PREFIX"
    )
    parser.add_argument(
        "--limit", type=limit, default=50, help="at most this many, 1 to 200 (default 50)"
    )
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="one JSON object (ThreadInfo) a line")
    output.add_argument("-q", "--quiet", action="store_true", help="thread ids only, one a line")


def _search_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    from server.cli.search import arguments

    arguments(parser, common)


def _import_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    from restore.agents.registry import all_agents

    agents = all_agents()
    parser.add_argument(
        "agent",
        choices=[agent.flag for agent in agents] + ["sessiond"],
        help="an agent whose sessions to import, or `sessiond FILE`: a JSON export "
        "(`sessiond export --format json`) taken back",
    )
    parser.add_argument("file", metavar="FILE", nargs="?", help="with `sessiond`: the export")
    parser.add_argument(
        "--from",
        dest="source",
        metavar="DIR",
        help="the agent's session store (default: "
        + "; ".join(f"{agent.flag}: {agent.store.ROOT_HELP}" for agent in agents)
        + ")",
    )
    parser.add_argument(
        "--watch", action="store_true", help="then keep importing new and growing sessions"
    )
    parser.add_argument("--json", action="store_true", help="print results as JSON lines")


def _export_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    from server.cli.export import arguments

    arguments(parser, common)


def _show_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("thread_id", metavar="ID", help=THREAD_ID_HELP)
    output = parser.add_mutually_exclusive_group()
    output.add_argument(
        "--all",
        action="store_true",
        help="also the server's bookkeeping records (imports' checkpoints, ACP updates, ...)",
    )
    output.add_argument("--json", action="store_true", help="every stored record, one JSON a line")


def _resume_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("thread_id", metavar="ID", help=THREAD_ID_HELP)
    parser.add_argument(
        "--cwd", help="judge the workspace in this directory (default: where it was recorded)"
    )
    parser.add_argument(
        "--accept-drift",
        action="store_true",
        help="say ready though the workspace drifted (an imported thread: offer its agent's "
        "resume command anyway)",
    )
    parser.add_argument("--json", action="store_true", help="the RestoreReport itself")


def _ids_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("thread_ids", metavar="ID", nargs="+", help=THREAD_ID_HELP)


def _delete_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    _ids_arguments(parser, common)
    parser.add_argument(
        "--yes", action="store_true", help="do not ask (needed when not on a terminal)"
    )


def _rename_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("thread_id", metavar="ID", help=THREAD_ID_HELP)
    parser.add_argument("title", metavar="TITLE", nargs="+", help="the new title")


def _doctor_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--repair",
        action="store_true",
        help="also cut torn tails left by a crash (copied to recovered/ first)",
    )
    parser.add_argument(
        "--rebuild-index",
        action="store_true",
        help="build the thread index (listing and search) again from the thread files, "
        "whatever its state: it is a cache, and nothing is lost",
    )
    parser.add_argument(
        "--redact",
        action="store_true",
        help="find the secrets stored threads and blobs hold (stored before redaction, or "
        "under a weaker --redaction) and report them by kind; nothing changes without --yes",
    )
    parser.add_argument(
        "--yes",
        action="store_true",
        help="with --redact: rewrite them (new file revisions, rows updated in place; the "
        "original bytes are gone, there is no undo)",
    )


def _migrate_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--to",
        required=True,
        metavar="URL|DIR",
        help="a postgresql:// URL (copies the threads of --home into it) or a data directory "
        "(exports the threads of --store, or of --home, into it as JSONL files)",
    )


def _acp_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    import argparse

    parser.add_argument("agent", nargs=argparse.REMAINDER, help="the agent command, after --")


def _mcp_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--folder",
        action="append",
        metavar="DIR",
        help="a folder whose threads the agent sees (repeatable; default: the directory it "
        "starts the server in)",
    )
    parser.add_argument(
        "--all-folders",
        action="store_true",
        help="every thread of the store, whichever folder it was recorded in",
    )


def _usage_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    from server.cli.usage import arguments

    arguments(parser, common)


def _client_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    from server.cli.client import add_arguments

    add_arguments(parser, common)


SUBCOMMANDS: tuple[Subcommand, ...] = (
    Subcommand(
        "serve",
        "serve JSON-RPC on stdio or WebSocket (what `sessiond` alone does)",
        _serve_arguments,
        "server.cli.main:serve",
    ),
    Subcommand(
        "list", "list threads, newest first", _list_arguments, "server.cli.commands:list_threads"
    ),
    Subcommand(
        "show", "print a thread as a transcript", _show_arguments, "server.cli.commands:show_thread"
    ),
    Subcommand(
        "export",
        "write a thread as Markdown, JSON or one self-contained (optionally encrypted) HTML "
        "page; --all: every thread, with an index",
        _export_arguments,
        "server.cli.export:export",
    ),
    Subcommand(
        "resume",
        "what resuming a thread gives back: drift, open operations, todos, cost, and how to "
        "continue it",
        _resume_arguments,
        "server.cli.resume:resume",
    ),
    Subcommand(
        "rename", "give a thread a new title", _rename_arguments, "server.cli.manage:rename"
    ),
    Subcommand(
        "archive",
        "move threads off the list (kept whole)",
        _ids_arguments,
        "server.cli.manage:archive",
    ),
    Subcommand(
        "unarchive", "bring archived threads back", _ids_arguments, "server.cli.manage:unarchive"
    ),
    Subcommand(
        "delete",
        "delete threads for good (asks first on a terminal)",
        _delete_arguments,
        "server.cli.manage:delete",
    ),
    Subcommand(
        "search",
        'search every thread: words, "a phrase", prefix*, -word',
        _search_arguments,
        "server.cli.search:search",
    ),
    Subcommand(
        "usage",
        "tokens and cost per day, week, month, session or 5-hour block, for every agent",
        _usage_arguments,
        "server.cli.usage:usage",
    ),
    Subcommand(
        "import",
        "import agents' sessions as threads (again: only what is new), or a sessiond JSON export",
        _import_arguments,
        "server.cli.commands:import_sessions",
    ),
    Subcommand(
        "doctor",
        "check every thread file, repair the index",
        _doctor_arguments,
        "server.cli.commands:doctor",
    ),
    Subcommand(
        "migrate",
        "copy threads to a shared database or back to files (idempotent both ways)",
        _migrate_arguments,
        "server.cli.commands:migrate",
    ),
    Subcommand(
        "client",
        "talk to a running server over WebSocket",
        _client_arguments,
        "server.cli.client:run",
    ),
    Subcommand(
        "mcp",
        "serve MCP on stdio: tools an agent calls to search and read its past sessions "
        "(read-only, the folders it starts in)",
        _mcp_arguments,
        "server.mcp.server:main",
    ),
    Subcommand(
        "acp",
        "serve ACP (Agent Client Protocol) to an editor, proxying AGENT and recording its "
        "sessions: sessiond acp [--home DIR] [--store URL] -- AGENT [ARGS...]",
        _acp_arguments,
        "server.cli.main:acp",
    ),
)
DEFAULT_SUBCOMMAND = "serve"


def _common_options() -> argparse.ArgumentParser:
    """Options of every subcommand. SUPPRESS: a subcommand's parser adds no default, so
    `sessiond --home X list` keeps X, as `sessiond list --home X` does."""
    import argparse

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--home",
        metavar="DIR",
        default=argparse.SUPPRESS,
        help="data directory (default: $SESSIOND_HOME, $XDG_STATE_HOME/sessiond or "
        "~/.local/state/sessiond)",
    )
    common.add_argument(
        "--store",
        metavar="URL",
        default=argparse.SUPPRESS,
        help="a postgresql:// URL: threads in a database shared by every machine "
        "(default: $SESSIOND_STORE, else the embedded store under --home)",
    )
    common.add_argument(
        "--redaction",
        choices=("off", "default", "strict"),
        default=argparse.SUPPRESS,
        help="secrets redacted before anything is stored (default: $SESSIOND_REDACT, else "
        "the home's redaction.toml, else default)",
    )
    return common


def _parser(argv: list[str]) -> argparse.ArgumentParser:
    """Only the subcommands named in argv get their arguments: building `client`'s imports
    server/cli/client.py (~20 ms), which `sessiond serve` (every editor window's spawn) never
    needs. A subparser left bare still lists in `sessiond --help`."""
    import argparse

    common = _common_options()
    parser = argparse.ArgumentParser(
        prog="sessiond",
        description="Durable, resumable AI-agent sessions for editors, over JSON-RPC "
        "(stdio and WebSocket). Without a subcommand: serve on stdio.",
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=VERSION)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    named = set(argv) | {DEFAULT_SUBCOMMAND}
    for sub in SUBCOMMANDS:
        subparser = commands.add_parser(
            sub.name, help=sub.help, description=sub.help, parents=[common]
        )
        if sub.name in named:
            sub.arguments(subparser, common)
    return parser


def _configure_logging() -> None:
    """`SESSIOND_LOG=INFO` is about sessiond: dependencies (websockets, asyncio, ...)
    stay at WARNING unless `SESSIOND_LOG_ALL=1` asks for theirs too."""
    import logging

    level = os.environ.get("SESSIOND_LOG", "WARNING").upper()
    if level not in LOG_LEVELS:
        raise CommandError(f"SESSIOND_LOG must be one of {', '.join(LOG_LEVELS)}, not {level!r}")
    everything = os.environ.get("SESSIOND_LOG_ALL", "") not in ("", "0")
    logging.basicConfig(
        level=level if everything else "WARNING",
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    logging.getLogger("sessiond").setLevel(level)


def _known_failure(exc: BaseException) -> str | None:
    """The one line for a failure a user can act on; None for a bug (a traceback)."""
    from protocol.errors import ProtocolError, storage_error
    from server.transport.ws import BindRefused

    if isinstance(exc, CommandError | BindRefused):
        return str(exc)
    if isinstance(exc, OSError):
        exc = storage_error(exc)
    if isinstance(exc, ProtocolError):
        return f"{exc.kind}: {exc.message}"
    return None


def _password_on_the_command_line(args: argparse.Namespace) -> str | None:
    """A store URL given with its password in argv (`--store`, `migrate --to`) is refused
    before anything starts: every local user reads argv in `ps`, a child in
    `/proc/$PPID/cmdline`. SESSIOND_STORE (the environment) stays allowed."""
    for option in ("store", "to"):
        url = getattr(args, option, None)
        if url:  # imported only then: `sessiond serve` loads no store code at startup
            from restore.child_env import argv_password_refusal, has_password
            from restore.stores import is_shared

            if is_shared(url) and has_password(str(url)):
                return argv_password_refusal(f"--{option}")
    return None


VERSION = f"sessiond {__version__} (protocol {PROTOCOL_VERSION})"


def parse_arguments(argv: list[str]) -> argparse.Namespace | Arguments:
    """The command line: the hot ones read quickly (server/cli/quick.py), the rest and
    every mistake by argparse (its messages, its exit code 2)."""
    from server.cli.quick import parse

    quick = parse(argv, DEFAULT_SUBCOMMAND)
    return quick if quick is not None else parse_with_argparse(argv)


def parse_with_argparse(argv: list[str]) -> argparse.Namespace:
    args = _parse(argv)
    if args.command is None:  # `sessiond` alone serves on stdio, with serve's defaults
        args = _parse([*argv, DEFAULT_SUBCOMMAND])
    return args


def _parse(argv: list[str]) -> argparse.Namespace:
    """argv parsed; `search`'s documented `-word` (an excluded term) is a word of its
    query, not an unknown option (argparse would refuse it, or take `-dx` for `-d x`)."""
    parser = _parser(argv)
    args, unknown = parser.parse_known_args(argv)
    if unknown and args.command == "search":
        words = [arg for arg in unknown if arg.startswith("-") and not arg.startswith("--")]
        if len(words) == len(unknown):
            args.query = [*args.query, *words]
            return args
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--version"]:  # before anything is imported: a version check costs a spawn
        print(VERSION)
        return 0
    from server.config import ServerConfig

    args: argparse.Namespace = parse_arguments(argv)  # type: ignore[assignment]
    try:  # the environment's settings, checked as they are read
        config = ServerConfig(**({"home": args.home} if getattr(args, "home", None) else {}))
    except ValueError as exc:
        print(f"sessiond: {exc}", file=sys.stderr)
        return USAGE_ERROR
    if getattr(args, "home", None):
        config.home = args.home
    if getattr(args, "store", None):
        config.store = args.store
    if getattr(args, "redaction", None):
        config.redact = args.redaction
    if refusal := _password_on_the_command_line(args):
        print(f"sessiond: {refusal}", file=sys.stderr)
        return USAGE_ERROR
    if config.store:
        from restore.stores import is_shared

        if not is_shared(config.store):  # said before anything starts (never the URL: secrets)
            print("sessiond: --store takes a postgresql:// URL", file=sys.stderr)
            return USAGE_ERROR
    subcommand = next(sub for sub in SUBCOMMANDS if sub.name == args.command)
    module, _, function = subcommand.run.partition(":")
    try:
        _configure_logging()
        code: int = getattr(__import__(module, fromlist=[function]), function)(config, args)
        sys.stdout.flush()  # here, so a reader that left is seen below, not at exit
        return code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `sessiond list | head -n 3`: the reader has what it wanted
        import signal

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except Exception as exc:
        if (line := _known_failure(exc)) is None:
            raise
        from server.cli.terminal import safe

        print(f"sessiond: {safe(line, one_line=True)}", file=sys.stderr)  # it may quote a title
        return USAGE_ERROR


def serve(config: ServerConfig, args: argparse.Namespace) -> int:
    """`sessiond serve`: stdio (the default), WebSocket (`--ws`), or both."""
    if args.durability:
        config.durability = args.durability
    if args.max_frame:
        config.max_frame = args.max_frame
    if args.follow:
        from server.config import parse_follow

        try:
            config.follow = parse_follow(args.follow)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
    if args.folder and not args.ws:
        raise CommandError("--folder names the folders of a WebSocket server: add --ws PORT")
    if args.linger is not None and (not args.ws or args.stdio):
        raise CommandError("--linger ends a WebSocket-only server: use it with --ws, not --stdio")
    if args.shared and (not args.ws or args.stdio):
        raise CommandError("--shared is a WebSocket-only server: use it with --ws, not --stdio")
    if args.linger is not None and not args.linger >= 0:
        raise CommandError("--linger takes a number of seconds, 0 or more")
    if args.ws:
        from pathlib import Path

        from server.app import SessiondServer
        from server.transport import ws

        # Standalone, a server is for the directory it was started in (else no discovery
        # file's folders would ever contain a client's buffer); beside stdio, the editor on
        # stdio names its folders itself.
        # A lingering server is shared by windows that each name their folders.
        default = [] if args.stdio or args.linger is not None or args.shared else [os.getcwd()]
        folders = [str(Path(folder).resolve()) for folder in args.folder or default]
        claim = None
        if args.shared:
            from server.cli import spawn
            from server.cli.client import answering_server

            home = Path(config.home)
            claim = lambda: spawn.claim(home, answering_server)  # noqa: E731
        if args.stdio:
            _greet_a_terminal()
        return ws.run(
            SessiondServer(config),
            args.ws,
            with_stdio=args.stdio,
            folders=folders,
            linger=args.linger,
            claim=claim,
        )
    opening = None
    if sys.stdin.isatty():
        _greet_a_terminal()
    elif not config.follow:  # a watcher starts with the server, not after a first message
        from server.transport.early import answer_initialize

        opening = answer_initialize(config)  # before the server's modules: a window waits
    from server.app import SessiondServer
    from server.transport.stdio import run_stdio

    return run_stdio(SessiondServer(config), opening)


GREETING = (
    "sessiond: serving JSON-RPC 2.0 on stdin/stdout: one JSON request a line (or "
    'Content-Length framed), the first {"jsonrpc":"2.0","id":1,"method":"initialize",'
    '"params":{}}; Ctrl-D ends it; every method: docs/protocol.md in the sessiond repository'
)


def _greet_a_terminal() -> None:
    """On a terminal, stdio serving would otherwise wait in silence for JSON: one line on
    stderr says what it expects, how to leave and where the methods are. A client (a pipe)
    never sees it."""
    if sys.stdin.isatty():
        print(GREETING, file=sys.stderr, flush=True)


def acp(config: ServerConfig, args: argparse.Namespace) -> int:
    """`sessiond acp -- AGENT [ARGS...]`: the ACP front door (server/acp/)."""
    from pathlib import Path

    from server.acp import process as front_door

    agent = args.agent[1:] if args.agent[:1] == ["--"] else args.agent
    return front_door.main(Path(config.home), agent, config.store, config.redact)
