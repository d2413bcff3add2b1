"""The docs name only what exists: every `sessiond` command and flag in README.md and
docs/*.md is one the command line has (its `--help`, from a real process), every test a
table cites is a test, and every link stays inside the repository.

Written for issue 35: the docs had drifted (a fault said `import --store` was refused
after it worked, a cited test had been renamed, five links led to a DESIGN.md that is not
in the repository); this keeps them from drifting again.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from functools import cache

from tests.support.rpc_client import REPO

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
INLINE = re.compile(r"`([^`\n]+)`")
SHELL_END = re.compile(r"\s(\||&&|;|#|>|2>|\)|\$\()")
VALUED = {"--home", "--store", "--redaction"}
"""The options every subcommand takes, before or after its name, with their value."""
TEST_CITE = re.compile(r"((?:[\w]+/)*test_\w+\.py)::(test_\w+)")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _commands(text: str) -> list[tuple[str, list[str]]]:
    """Each `sessiond …` a doc shows (in a code block or inline code): where it is, and
    its words up to the end of the command (a pipe, `&&`, a comment)."""
    spans: list[str] = []
    for language, body in FENCE.findall(text):
        if language in ("", "sh", "bash", "console", "shell"):
            spans += [line.lstrip("$ ") for line in body.splitlines()]
    outside = FENCE.sub("", text)
    spans += INLINE.findall(outside)
    found = []
    for span in spans:
        if span.endswith("\\n"):  # a message's bytes (`sessiond client proof\n`), not a command
            continue
        for match in re.finditer(r"(?:^|[\s(\"'])sessiond((?:\s+[^\s]+)*)", span):
            command = SHELL_END.split(" " + match.group(1) + " ")[0]
            try:
                words = shlex.split(command)
            except ValueError:
                words = command.split()
            found.append((span, words))
    return found


@cache
def _help(*names: str) -> str:
    run = subprocess.run(
        [sys.executable, "-m", "server.cli", *names, "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"},
    )
    assert run.returncode == 0, f"sessiond {' '.join(names)} --help: {run.stderr}"
    return run.stdout


def _subcommands() -> set[str]:
    from server.cli.main import SUBCOMMANDS

    return {sub.name for sub in SUBCOMMANDS}


def _client_actions() -> set[str]:
    usage = _help("client")
    return set(re.findall(r"^\s{4}(\w+)\s", usage, re.MULTILINE))


def _named(words: list[str]) -> tuple[list[str], list[tuple[tuple[str, ...], str]]]:
    """The subcommand's names (`client`, `resume`) of one command's words, and each flag
    with the names it follows (a flag before `client`'s action is `client`'s own)."""
    names: list[str] = []
    flags: list[tuple[tuple[str, ...], str]] = []
    skip = False
    for word in words:
        word = word.strip("[]").rstrip(",.")
        if skip:
            skip = False
            continue
        if word == "--":  # what follows is the agent's command (`sessiond acp -- AGENT`)
            break
        if names == ["search"] and re.fullmatch(r"-\w+\*?", word):
            continue  # an excluded word of the query (`sessiond search deploy -staging`)
        if word.startswith("-") and len(word) > 1 and not word[1:].isdigit():
            flag = word.split("=", 1)[0]
            flags.append((tuple(names), flag))
            skip = flag in VALUED and "=" not in word
            continue
        if (not names or names == ["client"]) and re.fullmatch(r"[a-z]+", word):
            names.append(word)
    return names, flags


def test_every_command_and_flag_the_docs_name_exists() -> None:
    subcommands = _subcommands()
    actions = _client_actions()
    assert {"serve", "list", "show", "resume", "delete", "search", "client"} <= subcommands
    wrong: list[str] = []
    checked = 0
    for doc in DOCS:
        for span, words in _commands(doc.read_text()):
            names, flags = _named(words)
            where = f"{doc.relative_to(REPO)}: `{span.strip()}`"
            if names and names[0] not in subcommands:
                wrong.append(f"{where}: no command `sessiond {names[0]}`")
                continue
            if names[:1] == ["client"] and len(names) > 1 and names[1] not in actions:
                wrong.append(f"{where}: no `sessiond client {names[1]}`")
                continue
            for before, flag in flags:
                checked += 1
                usage = _help(*before)
                if not re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", usage):
                    wrong.append(f"{where}: `sessiond {' '.join(before)}` has no {flag}")
    assert not wrong, "\n".join(wrong)
    assert checked > 50  # the docs were read: they name many flags


def test_every_test_the_docs_cite_exists() -> None:
    defined: dict[str, set[str]] = {}
    for path in (REPO / "tests").rglob("test_*.py"):
        tree = ast.parse(path.read_text())
        names = {
            node.name
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        defined[str(path.relative_to(REPO / "tests"))] = names
    missing = []
    cited = 0
    for doc in DOCS:
        for file, name in TEST_CITE.findall(doc.read_text()):
            cited += 1
            file = file.removeprefix("tests/")
            if name not in defined.get(file, set()):
                missing.append(f"{doc.relative_to(REPO)}: {file}::{name}")
    assert not missing, "cited tests that do not exist:\n" + "\n".join(missing)
    assert cited > 100


def test_the_docs_stand_alone() -> None:
    """No doc points outside the repository: every relative link is a file here, and no
    page relies on the design notes the project started from."""
    outside = []
    for doc in [*DOCS, REPO / "vscode-extension" / "README.md"]:
        text = doc.read_text()
        if "DESIGN.md" in text:
            outside.append(f"{doc.relative_to(REPO)}: names DESIGN.md")
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            resolved = (doc.parent / target).resolve()
            if not resolved.is_relative_to(REPO) or not resolved.exists():
                outside.append(f"{doc.relative_to(REPO)}: link to {target}")
    assert not outside, "\n".join(outside)
