"""The rules a secret is recognised by: gitleaks' published rule set (vendored as
`gitleaks.toml`, MIT, its licence beside it) plus the few shapes it does not carry
(`sessiond.toml`, the same format), compiled for Python's `re`.

gitleaks writes RE2 (Go) patterns. Two constructs differ in Python and are translated
here: a flag group in the middle of a pattern (`ab(?i)cd`, which Go scopes to the rest of
the enclosing group; Python only accepts flags at the start), and `\\z`. A rule bound to
file paths (`path`) is left out: an item has no path to match. docs/security.md says which
kinds there are and why this rule set (docs/benchmarks.md, the measurement).
"""

from __future__ import annotations

import functools
import re
import tomllib
import warnings
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import regex
from regex import Pattern as PartialPattern

HERE = Path(__file__).parent
GITLEAKS = HERE / "gitleaks.toml"
GITLEAKS_VERSION = "v8.30.0-27-gb58d3f10"
"""The commit of gitleaks' config/gitleaks.toml vendored here (`git describe`)."""
SESSIOND = HERE / "sessiond.toml"
GENERIC_KINDS = frozenset({"generic-api-key", "secret-assignment", "secret-json-field"})
"""Rules that recognise a secret by the name it is given, not by its own shape: any
specific rule's match wins over theirs where the two overlap."""


@dataclass(frozen=True)
class Allow:
    """One allowlist of a rule: a match is kept (not a secret) when its `target` (the
    secret, the whole match, or the line) matches any regex, or holds a stopword."""

    regexes: tuple[re.Pattern[str], ...] = ()
    target: str = "secret"
    stopwords: tuple[str, ...] = ()


@dataclass(frozen=True)
class Rule:
    kind: str
    regex: str
    """The pattern in Python's syntax (gitleaks' translated by `go_to_python`)."""
    keywords: tuple[str, ...]
    """Lower-case words one of which a text must hold before the pattern is tried."""
    entropy: float = 0.0
    """The secret's least Shannon entropy (bits per character); 0: none asked."""
    secret_group: int = 0
    """Which group is the secret (0: the first that matched, else the whole match)."""
    allows: tuple[Allow, ...] = ()
    generic: bool = False
    require_digit: bool = False
    """The secret has a digit (gitleaks asks it of its generic rules; sessiond's rules
    say `requireDigit`): what tells `hunter2-ish` values from words like `secret-token`."""

    @functools.cached_property
    def pattern(self) -> re.Pattern[str]:
        """Compiled on first use: most rules never run in a process (the whole-item pass
        rules them out), and compiling all of them took most of a redactor's start."""
        return _compile(self.regex)

    @functools.cached_property
    def partial(self) -> PartialPattern[str]:
        """The same pattern for the `regex` package, which tells a match that more text
        could still complete (`partial=True`): where a stream of text may not be cut yet
        (`Redactor.unsettled`). Python's `re` cannot say it; `regex` reads `re`'s syntax."""
        return regex.compile(self.regex)


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[Rule, ...]
    global_allow: Allow = field(default_factory=Allow)


def go_to_python(pattern: str) -> str:
    """An RE2 pattern as Python `re` reads it the same way: a flag group past the start
    (`(?i)`) becomes a scoped group up to the end of the group that holds it; `\\z` is `\\Z`."""
    out: list[str] = []
    closers: list[int] = [0]  # per open group: how many scoped flag groups to close there
    i = 0
    in_class = False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            pair = pattern[i : i + 2]
            out.append("\\Z" if pair == "\\z" else pair)
            i += 2
            continue
        if in_class:
            if char == "]":
                in_class = False
            out.append(char)
            i += 1
            continue
        if char == "[":
            in_class = True
            out.append(char)
            # a `]` right after `[` or `[^` is a literal, not the end of the class
            if pattern[i + 1 : i + 2] == "^":
                out.append("^")
                i += 1
            if pattern[i + 1 : i + 2] == "]":
                out.append("]")
                i += 1
            i += 1
            continue
        flags = re.match(r"\(\?([a-zA-Z]+)\)", pattern[i:])
        if flags and (i > 0 or len(closers) > 1):
            out.append(f"(?{flags.group(1)}:")
            closers[-1] += 1
            i += flags.end()
            continue
        if char == "(":
            closers.append(0)
        elif char == ")":
            out.append(")" * closers.pop())
        out.append(char)
        i += 1
    out.append(")" * closers[0])
    return "".join(out)


def _compile(pattern: str) -> re.Pattern[str]:
    """A pattern already in Python's syntax, compiled."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # RE2's `[[` is a plain `[` here too
        return re.compile(pattern)


def _allow(entry: dict[str, Any]) -> Allow | None:
    """One TOML allowlist; None for one bound to paths (an item has none to match)."""
    if entry.get("paths") or entry.get("commits"):
        return None
    return Allow(
        tuple(_compile(go_to_python(regex)) for regex in entry.get("regexes", ())),
        str(entry.get("regexTarget", "secret")),
        tuple(word.lower() for word in entry.get("stopwords", ())),
    )


def load(path: Path) -> RuleSet:
    """A gitleaks-format rule file, compiled; rules bound to a file path left out."""
    config = tomllib.loads(path.read_text())
    rules = []
    for entry in config.get("rules", ()):
        if "regex" not in entry or entry.get("path"):
            continue
        allows = tuple(a for e in entry.get("allowlists", ()) if (a := _allow(e)) is not None)
        rules.append(
            Rule(
                kind=str(entry["id"]),
                regex=go_to_python(entry["regex"]),
                keywords=tuple(word.lower() for word in entry.get("keywords", ())),
                entropy=float(entry.get("entropy", 0.0)),
                secret_group=int(entry.get("secretGroup", 0)),
                allows=allows,
                generic=entry["id"] in GENERIC_KINDS,
                require_digit=bool(entry.get("requireDigit", entry["id"].startswith("generic"))),
            )
        )
    top = config.get("allowlist")
    global_allow = (_allow(top) if top else None) or Allow()
    return RuleSet(tuple(rules), global_allow)


@cache
def builtin() -> tuple[RuleSet, RuleSet]:
    """gitleaks' rules and sessiond's, compiled once per process."""
    return load(GITLEAKS), load(SESSIOND)


def custom(kind: str, regex: str) -> Rule:
    """A user's extra pattern (`redaction.toml`): the first group is the secret, else the
    whole match; no keyword, so it is tried on every text."""
    return Rule(kind=kind, regex=regex, keywords=())
