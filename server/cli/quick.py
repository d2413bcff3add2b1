"""The command lines people and editors type most, read without argparse.

`sessiond serve --stdio` is every editor window's spawn and `sessiond acp -- AGENT` every
ACP editor's; `list`, `show`, `search` and `usage` are what a person types. Building argparse's
parser tree and importing what it needs (argparse, gettext, shutil and the compressors
shutil loads for its help formatter) cost more than the rest of `sessiond --version`
(docs/benchmarks.md, "Opening a window from spawn"). Here those command lines are read
from the same option tables argparse is given (`server/cli/main.py`); anything else —
`--help`, an abbreviated option, a value that looks like an option, a mistake — returns
None and argparse reads it, so every message and every exit code stays argparse's.
tests/test_cli_quick.py holds the two readers to the same answers.
"""

from __future__ import annotations

from protocol.agents import SEARCH_AGENTS
from server.cli.options import frame_size, limit

TYPE_CHECKING = False  # as typing's (mypy reads it so), without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeAlias

    Convert: TypeAlias = Callable[[str], Any] | tuple[str, ...] | None
    """A value's type (int, float), its choices, or None: the string as given."""
    Option: TypeAlias = tuple[str, str, Convert]
    """(dest, kind, convert)."""

FLAG, VALUE, APPEND = "flag", "value", "append"
POSITIONAL, OPTIONAL, WORDS, REMAINDER = "positional", "optional", "words", "rest"
"""One argument; one or none, right after the subcommand's name (argparse's `?`); any
number of them, right after the subcommand's name (argparse's `*`); everything from there
on (argparse's REMAINDER)."""

COMMON: dict[str, Option] = {
    "--home": ("home", VALUE, None),
    "--store": ("store", VALUE, None),
    "--redaction": ("redaction", VALUE, ("off", "default", "strict")),
}
"""Options of every subcommand, before or after its name (argparse.SUPPRESS: an option not
given is not set)."""

SUBCOMMANDS: dict[str, tuple[dict[str, Option], dict[str, Any]]] = {
    "serve": (
        {
            "--stdio": ("stdio", FLAG, None),
            "--ws": ("ws", VALUE, None),
            "--folder": ("folder", APPEND, None),
            "--linger": ("linger", VALUE, float),
            "--shared": ("shared", FLAG, None),
            "--durability": ("durability", VALUE, ("fsync", "group", "none")),
            "--max-frame": ("max_frame", VALUE, frame_size),
            "--follow": ("follow", VALUE, None),
        },
        {
            "stdio": False,
            "ws": None,
            "folder": None,
            "linger": None,
            "shared": False,
            "durability": None,
            "max_frame": None,
            "follow": None,
        },
    ),
    "list": (
        {
            "--cwd": ("cwd", VALUE, None),
            "--workspace-folder": ("workspace_folder", VALUE, None),
            "--archived": ("archived", FLAG, None),
            "--search": ("search", VALUE, None),
            "--key": ("key", VALUE, None),
            "--limit": ("limit", VALUE, limit),
            "--json": ("json", FLAG, None),
            "-q": ("quiet", FLAG, None),
            "--quiet": ("quiet", FLAG, None),
        },
        {
            "cwd": None,
            "workspace_folder": None,
            "archived": False,
            "search": None,
            "key": None,
            "limit": 50,
            "json": False,
            "quiet": False,
        },
    ),
    "show": (
        {
            "": ("thread_id", POSITIONAL, None),
            "--all": ("all", FLAG, None),
            "--json": ("json", FLAG, None),
        },
        {"thread_id": None, "all": False, "json": False},
    ),
    "search": (
        {
            "": ("query", WORDS, None),
            "--cwd": ("cwd", VALUE, None),
            "--workspace-folder": ("workspace_folder", VALUE, None),
            "--agent": ("agent", VALUE, SEARCH_AGENTS),
            "--role": (
                "role",
                VALUE,
                ("user", "assistant", "tool", "output", "edit", "todo", "title"),
            ),
            "--since": ("since", VALUE, None),
            "--until": ("until", VALUE, None),
            "--archived": ("archived", FLAG, None),
            "--limit": ("limit", VALUE, limit),
            "--json": ("json", FLAG, None),
        },
        {
            "query": [],
            "cwd": None,
            "workspace_folder": None,
            "agent": None,
            "role": None,
            "since": None,
            "until": None,
            "archived": False,
            "limit": 20,
            "json": False,
        },
    ),
    "acp": ({"": ("agent", REMAINDER, None)}, {"agent": []}),
    "usage": (  # restore/usage/report.py's REPORTS, BYS and WEEKDAYS (not imported: datetime)
        {
            "": ("report", OPTIONAL, ("daily", "weekly", "monthly", "session", "blocks")),
            "--by": ("by", VALUE, ("model", "agent", "project")),
            "--since": ("since", VALUE, None),
            "--until": ("until", VALUE, None),
            "--timezone": ("timezone", VALUE, None),
            "-z": ("timezone", VALUE, None),
            "--start-of-week": (
                "start_of_week",
                VALUE,
                ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"),
            ),
            "--json": ("json", FLAG, None),
        },
        {
            "report": "daily",
            "by": None,
            "since": None,
            "until": None,
            "timezone": None,
            "start_of_week": "monday",
            "json": False,
        },
    ),
}
"""The hot subcommands: their options (the positional under ""), and every dest's value
when the line does not give it."""
EXCLUSIVE = {"list": ("json", "quiet"), "show": ("all", "json")}
"""Options argparse refuses together."""


class Arguments:
    """What argparse's Namespace holds for the same command line."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)


def parse(argv: list[str], default: str = "serve") -> Arguments | None:
    """The arguments of a hot command line, or None: argparse reads it."""
    values: dict[str, Any] = {}
    command: str | None = None
    options = COMMON
    given: set[str] = set()
    words_open = False  # argparse takes `*` words only before the subcommand's first option
    at = 0
    while at < len(argv):
        token = argv[at]
        at += 1
        if command is None and token in SUBCOMMANDS:
            command, words_open = token, True
            options = {**COMMON, **SUBCOMMANDS[token][0]}
            values.update(SUBCOMMANDS[token][1])
            continue
        name, equals, inline = token.partition("=") if token.startswith("--") else (token, "", "")
        option = options.get(name) if token.startswith("-") else None
        if option is None:
            if (token.startswith("-") and token != "--") or command is None:
                return None  # an option argparse may abbreviate, or one it refuses
            rest = options.get("")
            if rest is None:
                return None
            dest, kind, _ = rest
            if kind == REMAINDER:  # everything from here on, `--` included (as argparse)
                values[dest] = argv[at - 1 :]
                break
            if token == "--" or (kind == POSITIONAL and dest in given):
                return None
            if kind == WORDS:
                if not words_open:
                    return None
                values[dest] = [*values[dest], token]
            elif kind == OPTIONAL:  # argparse's `?`: only first, and only one of its choices
                if not words_open or dest in given or _converted(token, rest[2]) is None:
                    return None
                values[dest] = token
                words_open = False
            else:
                values[dest] = token
            given.add(dest)
            continue
        words_open = False
        dest, kind, convert = option
        given.add(dest)
        if kind == FLAG:
            if equals:
                return None
            values[dest] = True
            continue
        if equals:
            raw = inline
        elif at < len(argv) and not argv[at].startswith("-"):
            raw, at = argv[at], at + 1
        else:
            return None  # no value, or one argparse would take for an option
        value = _converted(raw, convert)
        if value is None:
            return None
        if kind == APPEND:
            values[dest] = [*(values.get(dest) or []), value]
        else:
            values[dest] = value
    if command is None:
        command = default
        values = {**SUBCOMMANDS[default][1], **values}
    positional = SUBCOMMANDS[command][0].get("")
    if positional is not None and positional[1] == POSITIONAL and positional[0] not in given:
        return None  # a required argument missing: argparse says so
    exclusive = EXCLUSIVE.get(command)
    if exclusive and all(values.get(dest) for dest in exclusive):
        return None
    return Arguments({**values, "command": command})


def _converted(raw: str, convert: Convert) -> Any:
    """The value as argparse stores it; None when argparse would refuse it."""
    if convert is None:
        return raw
    if isinstance(convert, tuple):
        return raw if raw in convert else None
    try:
        return convert(raw)
    except Exception:  # argparse's refusal, in its words
        return None
