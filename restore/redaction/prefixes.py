"""A rule's pattern turned into one that matches every prefix of its matches, for RE2: where
in a stream's text a match may still be in progress (`Redactor.unsettled`, the ACP chunk
hold), in time linear in the text.

The `regex` package answers the same question (partial matching) by backtracking: a
chunk of `api_key_token_` repeated with no break took 100 ms of it, each chunk, while
held. Here the question is one RE2 search: the leftmost place from which the text to its
end is a prefix of some match, `(?:P)\\z` where P is built from Python's parse of the rule
(`re._parser`, as the Hyperscan pass is) and emitted in the syntax both RE2 and Python
read:

- a sequence `a b c`: `(?:P(a)|a(?:P(b)|b(?:P(c)|c)))` — a part of the first node, or all
  of it and a prefix of the rest;
- an alternation: the alternatives' prefixes; a group: its content's, under its flags;
- a repeat `x{m,n}`: `(?:x){0,n-1}(?:P(x))` (fewer repeats than asked are prefixes too);
- one character, an assertion: the empty string (an assertion at the very end may hold
  once more text comes: taken as true, more is held, never less).

A pattern with what RE2 cannot run (a back-reference, a lookaround: a user's own) has
none, and the caller falls back to partial matching.
"""

from __future__ import annotations

import importlib
import re
import warnings
from typing import Any

sre: Any = importlib.import_module("re._parser")
C: Any = importlib.import_module("re._constants")


class NoPrefix(ValueError):
    """A construct RE2 cannot run."""


_FLAGS = ((re.IGNORECASE, "i"), (re.MULTILINE, "m"), (re.DOTALL, "s"))
_AT = {
    C.AT_BEGINNING: "^", C.AT_BEGINNING_STRING: r"\A", C.AT_END: "$", C.AT_END_STRING: r"\z",
    C.AT_BOUNDARY: r"\b", C.AT_NON_BOUNDARY: r"\B", C.AT_BEGINNING_LINE: "(?m:^)",
    C.AT_END_LINE: "(?m:$)",
}  # fmt: skip
_CATEGORY = {
    C.CATEGORY_DIGIT: r"\d", C.CATEGORY_NOT_DIGIT: r"\D", C.CATEGORY_SPACE: r"\s",
    C.CATEGORY_NOT_SPACE: r"\S", C.CATEGORY_WORD: r"\w", C.CATEGORY_NOT_WORD: r"\W",
}  # fmt: skip
_REPEATS = (C.MAX_REPEAT, C.MIN_REPEAT)


def _char(code: int) -> str:
    char = chr(code)
    return char if char.isascii() and char.isalnum() else f"\\x{{{code:x}}}"


def _flags(add: int, remove: int) -> str:
    on = "".join(letter for flag, letter in _FLAGS if add & flag)
    off = "".join(letter for flag, letter in _FLAGS if remove & flag)
    return on + (f"-{off}" if off else "")


def _class(items: list[tuple[Any, Any]]) -> str:
    out: list[str] = []
    for op, arg in items:
        if op is C.NEGATE:
            out.insert(0, "^")
        elif op is C.LITERAL:
            out.append(_char(arg))
        elif op is C.RANGE:
            out.append(f"{_char(arg[0])}-{_char(arg[1])}")
        elif op is C.CATEGORY:
            out.append(_CATEGORY[arg])
        else:
            raise NoPrefix(f"class item {op}")
    return "[" + "".join(out) + "]"


def _count(low: int, high: int) -> str:
    return f"{{{low},}}" if high == C.MAXREPEAT else f"{{{low},{high}}}"


def whole(nodes: Any) -> str:
    """The nodes as a pattern again."""
    return "".join(_node(op, arg) for op, arg in nodes)


def _node(op: Any, arg: Any) -> str:
    if op is C.LITERAL:
        return _char(arg)
    if op is C.NOT_LITERAL:
        return f"[^{_char(arg)}]"
    if op is C.ANY:
        return "."
    if op is C.IN:
        return _class(arg)
    if op is C.AT:
        return _AT[arg]
    if op is C.BRANCH:
        return "(?:" + "|".join(whole(branch) for branch in arg[1]) + ")"
    if op is C.SUBPATTERN:
        _, add, remove, sub = arg
        flags = _flags(add, remove)
        return f"(?{flags}:" + whole(sub) + ")"
    if op in _REPEATS:
        low, high, sub = arg
        return "(?:" + whole(sub) + ")" + _count(low, high)
    raise NoPrefix(f"construct {op}")


def prefix(nodes: Any) -> str:
    """A pattern of every prefix of the nodes' matches (the empty one too)."""
    nodes = list(nodes)
    out = ""
    for op, arg in reversed(nodes):  # built from the end: P(n) | n (rest)
        part = _prefix(op, arg)
        node = _node(op, arg)
        out = f"(?:{part}|{node}{out})" if out else f"(?:{part}|{node})"
    return out


def _prefix(op: Any, arg: Any) -> str:
    if op in (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN, C.AT):
        return ""
    if op is C.BRANCH:
        return "(?:" + "|".join(prefix(branch) for branch in arg[1]) + ")"
    if op is C.SUBPATTERN:
        _, add, remove, sub = arg
        return f"(?{_flags(add, remove)}:" + prefix(sub) + ")"
    if op in _REPEATS:
        _, high, sub = arg
        if high == 0:
            return ""
        fewer = "*" if high == C.MAXREPEAT else f"{{0,{high - 1}}}"
        return "(?:" + whole(sub) + ")" + fewer + prefix(sub)
    raise NoPrefix(f"construct {op}")


def in_progress(pattern: str) -> str:
    """`pattern` (Python's syntax) as the pattern whose leftmost match in a text is where
    a match of it may still be in progress at the text's end."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        parsed = sre.parse(pattern, 0)
    flags = _flags(parsed.state.flags, 0)
    return (f"(?{flags})" if flags else "") + "(?:" + prefix(parsed) + r")\z"
