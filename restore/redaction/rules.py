"""The rules a secret is recognised by: gitleaks' published rule set (vendored as
`gitleaks.toml`, MIT, its licence beside it) plus the few shapes it does not carry
(`sessiond.toml`, the same format).

gitleaks writes RE2 (Go) patterns, and RE2 runs them (`google-re2`): in time linear in the
text, whatever the text (Python's backtracking `re` took 28 µs a character on
`aws_secret_access_key=` repeated: docs/benchmarks.md). The same pattern is also read in
Python's syntax, for the Hyperscan pass (prefilter.py derives its superset from Python's
parse) and for the partial matches of a stream (`regex`). Three constructs differ there and
are translated: a flag group in the middle of a pattern (`ab(?i)cd`, which Go scopes to the
rest of the enclosing group; Python only accepts flags at the start), `\\z`, and a POSIX
class (`[[:alnum:]]`). A rule bound to file paths (`path`) is left out: an item has no path
to match. docs/security.md says which
kinds there are and why this rule set (docs/benchmarks.md, the measurement).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import re
import tomllib
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import re2

from restore.redaction import cache as kept_files

if TYPE_CHECKING:
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

    patterns: tuple[str, ...] = ()
    """The regexes in Python's syntax (`go_to_python`)."""
    target: str = "secret"
    stopwords: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    """The regexes as written (RE2's syntax)."""

    @functools.cached_property
    def regexes(self) -> tuple[re.Pattern[str], ...]:
        """Compiled for Python's `re` only where RE2 cannot take them (`matches`): compiling
        every allowlist's took a process's first record ~17 ms."""
        return tuple(_compile(pattern) for pattern in self.patterns)

    @functools.cached_property
    def matches(self) -> Callable[[bytes], bool]:
        """Whether any regex finds a match in a text (UTF-8): one RE2 search of them all
        (as one alternation), not one Python search each (gitleaks' allowlist of names
        took 30 µs a match in `re`, and an .env template has thousands of matches)."""
        if self.sources:
            combined = linear("|".join(f"(?:{source})" for source in self.sources))
            if combined is not None:
                return lambda text: combined.search(text) is not None
        regexes = self.regexes
        return lambda text: any(p.search(text.decode("utf-8", "replace")) for p in regexes)


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a pattern RE2 refuses is reported by the caller, once
_RE2_OPTIONS.max_mem = 4 << 20
"""RE2's memory per pattern (its DFA's cache; past it RE2 starts the cache again, still in
linear time): 221 rules x 4 MiB at most."""


def linear(pattern: str) -> re2._Regexp | None:
    """`pattern` compiled by RE2 (None: RE2 cannot run it: a back-reference, a lookaround)."""
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except re2.error:
        return None


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
    source: str = ""
    """The pattern as written (RE2's syntax for gitleaks' and sessiond's rules; a user's
    own in Python's, which RE2 mostly shares); empty: `regex`."""

    @functools.cached_property
    def engine(self) -> re2._Regexp | re.Pattern[bytes]:
        """What finds the rule's matches, over a text's UTF-8 bytes: RE2, linear in the
        text. A user's own pattern RE2 cannot run (a back-reference, a lookaround) runs
        in Python's `re` instead (its cost is its own; docs/security.md)."""
        found = linear(self.source or self.regex)
        if found is not None:
            return found
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            return re.compile((self.source or self.regex).encode("utf-8", "surrogatepass"))

    @functools.cached_property
    def in_progress(self) -> re2._Regexp | None:
        """Where a match may still be in progress at a text's end: the leftmost match of
        this (prefixes.py) in RE2, linear; None: the pattern has what RE2 cannot run (a
        user's lookaround), and `partial` answers instead."""
        from restore.redaction.prefixes import NoPrefix, in_progress

        if not isinstance(self.engine, re2._Regexp):
            return None
        try:
            return linear(in_progress(self.regex))
        except (NoPrefix, re.error, RecursionError):
            return None

    @functools.cached_property
    def groups(self) -> int:
        return int(self.engine.groups)

    def matches(self, data: bytes) -> Iterator[list[tuple[int, int]]]:
        """Each match in `data` (UTF-8), leftmost first, not overlapping: the span of the
        whole match and of each group ((-1, -1): the group took no part)."""
        count = range(self.groups + 1)
        for match in self.engine.finditer(data):
            yield [match.span(group) for group in count]

    @functools.cached_property
    def width(self) -> int | None:
        """The most characters a match spans (None: no bound): where in a stream a match
        still in progress may start (`Redactor.unsettled`)."""
        most = int(_parse(self.regex).getwidth()[1])
        return None if most >= 1 << 16 else most

    @functools.cached_property
    def pattern(self) -> re.Pattern[str]:
        """Compiled on first use: most rules never run in a process (the whole-item pass
        rules them out), and compiling all of them took most of a redactor's start."""
        return _compile(self.regex)

    @functools.cached_property
    def partial(self) -> PartialPattern[str]:
        """The same pattern for the `regex` package, which tells a match that more text
        could still complete (`partial=True`): where a stream of text may not be cut yet
        (`Redactor.unsettled`). Python's `re` cannot say it; `regex` reads `re`'s syntax.
        Imported here: only a stream (ACP's chunks) asks it, and the package costs a
        process's first record ~24 ms."""
        import regex

        return regex.compile(self.regex)


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[Rule, ...]
    global_allow: Allow = field(default_factory=Allow)


POSIX_CLASSES = {
    "alnum": "a-zA-Z0-9", "alpha": "a-zA-Z", "ascii": "\\x00-\\x7f", "blank": " \\t",
    "cntrl": "\\x00-\\x1f\\x7f", "digit": "0-9", "graph": "!-~", "lower": "a-z",
    "print": " -~", "punct": "!-/:-@[-`{-~", "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z", "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f",
}  # fmt: skip
"""RE2's `[[:name:]]` classes, as the ranges Python reads inside `[...]`."""


def go_to_python(pattern: str) -> str:
    """An RE2 pattern as Python `re` reads it the same way: a flag group past the start
    (`(?i)`) becomes a scoped group up to the end of the group that holds it; `\\z` is `\\Z`;
    a POSIX class inside `[...]` (`[:alnum:]`) its ranges."""
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
            posix = re.match(r"\[:(\^?)([a-z]+):\]", pattern[i:])
            if posix and posix.group(2) in POSIX_CLASSES and not posix.group(1):
                out.append(POSIX_CLASSES[posix.group(2)])
                i += posix.end()
                continue
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


def _parse(pattern: str) -> Any:
    """Python's parse of a pattern (its width: `Rule.width`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return _sre_parse(pattern, 0)


_sre_parse: Any = importlib.import_module("re._parser").parse


def _compile(pattern: str) -> re.Pattern[str]:
    """A pattern already in Python's syntax, compiled."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # RE2's `[[` is a plain `[` here too
        return re.compile(pattern)


def _allow(entry: dict[str, Any]) -> dict[str, Any] | None:
    """One TOML allowlist, translated; None for one bound to paths (an item has none to
    match)."""
    if entry.get("paths") or entry.get("commits"):
        return None
    sources = [str(regex) for regex in entry.get("regexes", ())]
    return {
        "regexes": [go_to_python(regex) for regex in sources],
        "target": str(entry.get("regexTarget", "secret")),
        "stopwords": [word.lower() for word in entry.get("stopwords", ())],
        "sources": sources,
    }


def _translated(config: dict[str, Any]) -> dict[str, Any]:
    """A gitleaks-format rule file's rules as data, their patterns in Python's syntax;
    rules bound to a file path left out."""
    rules = []
    for entry in config.get("rules", ()):
        if "regex" not in entry or entry.get("path"):
            continue
        rules.append(
            {
                "kind": str(entry["id"]),
                "regex": go_to_python(entry["regex"]),
                "source": str(entry["regex"]),
                "keywords": [word.lower() for word in entry.get("keywords", ())],
                "entropy": float(entry.get("entropy", 0.0)),
                "secret_group": int(entry.get("secretGroup", 0)),
                "allows": [a for e in entry.get("allowlists", ()) if (a := _allow(e)) is not None],
                "generic": entry["id"] in GENERIC_KINDS,
                "require_digit": bool(entry.get("requireDigit", entry["id"].startswith("generic"))),
            }
        )
    top = config.get("allowlist")
    return {"rules": rules, "allow": _allow(top) if top else None}


def _allow_of(data: dict[str, Any]) -> Allow:
    return Allow(
        tuple(data["regexes"]),
        data["target"],
        tuple(data["stopwords"]),
        tuple(data["sources"]),
    )


def _rule_set(data: dict[str, Any]) -> RuleSet:
    rules = tuple(
        Rule(
            **{
                **rule,
                "keywords": tuple(rule["keywords"]),
                "allows": tuple(_allow_of(a) for a in rule["allows"]),
            }
        )
        for rule in data["rules"]
    )
    return RuleSet(rules, _allow_of(data["allow"]) if data["allow"] else Allow())


_SOURCE = hashlib.sha256(Path(__file__).read_bytes()).digest()
"""This module's digest: its translation made the cached rules."""


def load(path: Path) -> RuleSet:
    """A gitleaks-format rule file, compiled. Translating gitleaks' ~200 patterns from Go's
    syntax cost ~70 ms, paid by every process's first record (a window's first resume, each
    import, each ACP session): the translation is kept in the user's cache (cache.py),
    named by the digest of the file and this module."""
    text = path.read_bytes()
    digest = hashlib.sha256(_SOURCE + b"\0" + text).hexdigest()
    name = f"rules-{digest[:32]}.json"
    if (kept := kept_files.read(name)) is not None:
        try:
            return _rule_set(orjson.loads(kept))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, re.error):
            pass  # damaged: translated again, and kept again
    data = _translated(tomllib.loads(text.decode()))
    kept_files.write(name, orjson.dumps(data), "rules-*.json")
    return _rule_set(data)


@cache
def builtin() -> tuple[RuleSet, RuleSet]:
    """gitleaks' rules and sessiond's, compiled once per process."""
    return load(GITLEAKS), load(SESSIOND)


def custom(kind: str, regex: str) -> Rule:
    """A user's extra pattern (`redaction.toml`): the first group is the secret, else the
    whole match; no keyword, so it is tried on every text."""
    return Rule(kind=kind, regex=regex, keywords=(), source=regex)
