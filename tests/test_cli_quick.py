"""The command lines read without argparse (server/cli/quick.py) mean what argparse makes of
them: whenever the quick reader answers, argparse accepts the same line and gives the same
arguments; the tables it reads agree with argparse's own parser; and the lines editors and
people type are the ones it answers."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from restore.home import layout
from server import config
from server.cli import main, quick

THREAD = "0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d"
OPTIONS = sorted(
    {name for table, _ in quick.SUBCOMMANDS.values() for name in table if name}
    | set(quick.COMMON)
    | {"--version", "-h", "--help", "--hom", "--jso", "-qj", "--", "--stdio=1", "--limit=7"}
)
VALUES = ["x", "/a b", "", "5", "-1", "0.5", "nan", "fsync", "strict", "off", "codex", "user",
          "list", "serve", THREAD, "--", "-", "a=b", "--home=/h", "--cwd=-x", "daily", "blocks",
          "model", "sunday", "UTC", "2026-11-30", "--by=agent", "-zUTC"]  # fmt: skip
TOKENS = st.sampled_from([*quick.SUBCOMMANDS, "import", "doctor", "client", *OPTIONS, *VALUES])


def _argparse(argv: list[str]) -> dict[str, Any] | None:
    """argparse's arguments for the line, or None where it refuses it (exit code 2)."""
    try:
        return vars(main.parse_with_argparse(argv))
    except SystemExit:
        return None


@settings(max_examples=600, deadline=None)
@given(st.lists(TOKENS, max_size=7))
def test_a_line_read_quickly_is_read_as_argparse_reads_it(argv: list[str]) -> None:
    read = quick.parse(argv)
    if read is not None:
        assert vars(read) == _argparse(argv), argv


HOT = [
    [],
    ["serve", "--stdio"],
    ["--home", "/h", "serve", "--stdio"],
    ["serve", "--stdio", "--home=/h", "--durability", "group", "--max-frame", "1024"],
    ["serve", "--ws", "0", "--linger", "30", "--shared", "--folder", "/a", "--folder", "/b"],
    ["serve", "--stdio", "--follow", "claude,codex"],
    ["list"],
    ["--home", "/h", "list", "--json", "--limit", "5", "--cwd", "/work"],
    ["list", "-q", "--archived", "--search", "fix", "--workspace-folder", "/w"],
    ["show", THREAD],
    ["show", THREAD, "--json", "--store", "postgresql://db/x"],
    ["search", "flaky test", "--json", "--since", "7d", "--agent", "codex", "--role", "user"],
    ["search", "flaky", "test", "--limit", "200"],
    ["show", "0b1c", "--all"],
    ["acp", "--", "claude-agent-acp"],
    ["--home", "/h", "acp", "--", "gemini", "--experimental-acp"],
    ["--redaction", "strict", "acp", "--", "codex-acp", "--home", "x"],
    ["usage"],
    ["usage", "daily", "--json"],
    ["--home", "/h", "usage", "session", "--by", "project", "--since", "2026-11-01"],
    ["usage", "weekly", "-z", "Europe/Berlin", "--start-of-week", "sunday", "--until", "20261130"],
    ["usage", "--by=model", "--timezone", "UTC", "--json"],
]


@pytest.mark.parametrize("argv", HOT, ids=" ".join)
def test_the_lines_editors_and_people_type_are_read_quickly(argv: list[str]) -> None:
    read = quick.parse(argv)
    assert read is not None
    assert vars(read) == _argparse(argv)


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["list", "--jso"], ["list", "--json", "-q"], ["show"], ["list", "--limit", "x"],
     ["serve", "--durability", "fast"], ["--hom", "/h", "list"], ["doctor"], ["--version"],
     ["list", "--limit", "201"], ["search", "flaky", "-slow"], ["show", "0b1c", "--all",
     "--json"], ["search", "--json", "flaky"], ["usage", "hourly"], ["usage", "daily", "weekly"],
     ["usage", "--json", "daily"], ["usage", "-zUTC"], ["usage", "--by", "day"]],
    ids=" ".join,
)  # fmt: skip
def test_anything_else_is_left_to_argparse(argv: list[str]) -> None:
    assert quick.parse(argv) is None


def _actions(command: str) -> dict[str, tuple[Any, ...]]:
    """argparse's parser for `command`: each option string (positional: "") with its dest,
    whether it takes a value, its default, choices and type."""
    parser = main._parser([command])
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found: dict[str, tuple[Any, ...]] = {}
    for action in commands.choices[command]._actions:
        if isinstance(action, argparse._HelpAction) or action.default == argparse.SUPPRESS:
            continue
        flag = isinstance(action, argparse._StoreTrueAction)
        for name in action.option_strings or [""]:
            found[name] = (action.dest, flag, action.default, action.choices, action.type)
    return found


@pytest.mark.parametrize("command", sorted(quick.SUBCOMMANDS))
def test_the_quick_tables_are_argparse_s_own(command: str) -> None:
    """An option added to argparse for a hot command and not here fails this test (the quick
    reader would leave its attribute unset)."""
    options, defaults = quick.SUBCOMMANDS[command]
    ours = {}
    for name, (dest, kind, convert) in options.items():
        choices = convert if isinstance(convert, tuple) else None
        kind_of = None if isinstance(convert, tuple) else convert
        ours[name] = (dest, kind == quick.FLAG, defaults[dest], choices, kind_of)
    theirs = {
        name: (dest, flag, default, tuple(choices) if choices else None, kind)
        for name, (dest, flag, default, choices, kind) in _actions(command).items()
    }
    if command in ("acp", "search"):  # REMAINDER, `*`: the default None, always a list set
        theirs[""] = (*theirs[""][:2], [], None, None)
    assert ours == theirs


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["SESSIOND_HOME", "XDG_STATE_HOME", "HOME"]),
    st.text(alphabet="/.a~ ", max_size=12),
)
def test_the_default_home_is_the_layout_s(name: str, value: str) -> None:
    """server.config works it out without pathlib; restore.home.layout's is the reference."""
    assume(not (name == "HOME" and value.startswith("~")))  # pathlib: no home directory
    with pytest.MonkeyPatch.context() as env:
        for variable in ("SESSIOND_HOME", "XDG_STATE_HOME"):
            env.delenv(variable, raising=False)
        env.setenv(name, value)
        assert _outcome(config.default_home) == _outcome(lambda: str(layout.default_home()))


def _outcome(function: Callable[[], str]) -> str:
    """Its value, or the message of the ValueError it raises (a blank SESSIOND_HOME)."""
    try:
        return function()
    except ValueError as exc:
        return f"ValueError: {exc}"
