"""Which rules could match anywhere in a JSON text: every rule's pattern at once, in one
pass of Hyperscan (Intel's multi-pattern regex engine, the `hyperscan` package) over the
raw bytes of a source line or an item's encoding, so that the Python walk of a record runs
only for the rules a line really holds a match of, not for every rule whose keyword occurs
(`token` in `token_count`, `s.` in any sentence).

Sound by construction. The pattern handed to Hyperscan is derived from Python's own parse
of each rule's `re` pattern (`re._parser`: what `re` will run, flags and all) so that it
matches a superset of the raw JSON spellings of anything the Python pattern matches in any
string decoded from that JSON:

- a character is spelled in JSON as itself (a non-ASCII one as 1-4 bytes >= 0x80, which
  also covers the invalid bytes a repairing decode replaced with U+FFFD), as a short escape
  (`\\"`, `\\\\`, `\\/`, `\\n`, ...) or as `\\uXXXX` (a surrogate pair: 12 bytes). A literal
  becomes each spelling it has; a class (`[...]`, `\\w`, `.`) becomes the bytes its
  members' spellings are made of, from 1 to the longest spelling's length per character
  (`[a-z]{1,5}` stays `[a-z]{1,5}`; `\\s{0,3}` takes `\\n`'s bytes, up to 36 of them).
  Python's classes are Unicode (`\\d` takes Arabic-Indic digits, `\\s` takes \\x1c and
  U+3000): what they may take beyond ASCII is taken as any non-ASCII character;
- every assertion (`^`, `$`, `\\b`, `\\B`, `\\A`, `\\Z`, lookarounds) is dropped, true
  everywhere: the context a string has inside the line (quotes, neighbours) cannot hide a
  match it has on its own;
- a back-reference becomes a copy of its group's pattern (what the group matched, that);
- the rules run in RE2 (rules.py), whose `\\s` leaves out what Python's takes beyond
  `[\\t\\n\\f\\r ]` (so its `\\S` and `[^\\s]` take more): each class is given the more of
  the two readings (`CATEGORY_ASCII`, `CATEGORY_NARROW`), a superset of both.

One more family of patterns says where a rule's keyword names a value (`keyed`: inside an
object's key followed by a string, an array or object holding one, or a long number; or
in the name of a name/value pair): the engine then looks at that value with its name.

Two spellings are left out of the patterns, to keep them small, and caught instead by one
more pattern of the database, `GUARD`: a printable ASCII character written `\\u00XX` (no
agent's encoder writes `\\u0067` for `g`; Go's writes `\\u003c` for `<`), and the four
non-ASCII characters Python's `(?i)` folds onto ASCII letters (U+0130, U+0131, U+017F,
U+212A; checked against
all of Unicode by tests/test_redaction_prefilter.py). A line holding either is reported
as possible for every rule, as is every text for a rule Hyperscan cannot take or a user's
pattern that does not translate. So "no match in the raw line" implies "no match in any
string decoded from it"; tests/test_redaction_prefilter.py checks it against `re` on
hostile spellings, and the findings against the engine without the prefilter.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import hyperscan

from restore.redaction import cache

sre: Any = importlib.import_module("re._parser")  # Python's own parse: what `re` will run
C: Any = importlib.import_module("re._constants")  # its opcodes

SHORT_ESCAPES = {
    0x22: ord('"'),
    0x5C: ord("\\"),
    0x2F: ord("/"),
    0x08: ord("b"),
    0x0C: ord("f"),
    0x0A: ord("n"),
    0x0D: ord("r"),
    0x09: ord("t"),
}
"""The characters JSON may write as a backslash and one letter (which letter)."""
ASCII = frozenset(range(128))
CONTROLS = frozenset(range(0x20))
"""ASCII characters JSON writes as `\\u00XX` (besides the short escapes): the controls."""
HIGH = frozenset(range(0x80, 0x100))
HEX = frozenset(b"0123456789abcdefABCDEF")
LETTERS = frozenset(range(ord("A"), ord("Z") + 1)) | frozenset(range(ord("a"), ord("z") + 1))
_CATEGORIES = {
    C.CATEGORY_DIGIT: r"\d", C.CATEGORY_NOT_DIGIT: r"\D", C.CATEGORY_SPACE: r"\s",
    C.CATEGORY_NOT_SPACE: r"\S", C.CATEGORY_WORD: r"\w", C.CATEGORY_NOT_WORD: r"\W",
}  # fmt: skip
_PYTHON = {
    category: frozenset(c for c in range(128) if re.fullmatch(regex, chr(c)))
    for category, regex in _CATEGORIES.items()
}
_RE2_SPACE = frozenset(b"\t\n\f\r ")
"""RE2's `\\s` (what runs the rules: rules.py): without Python's \\v and \\x1c-\\x1f."""
_NARROW_SPACE = _PYTHON[C.CATEGORY_SPACE] & _RE2_SPACE
CATEGORY_ASCII = {
    **_PYTHON,
    C.CATEGORY_NOT_SPACE: frozenset(ASCII - _NARROW_SPACE),
}
"""Which ASCII characters each class may take, in Python's reading or RE2's, whichever
takes more: Python's `\\s` takes \\v and \\x1c-\\x1f, RE2's does not (so RE2's `\\S` does)."""
CATEGORY_NARROW = {
    **_PYTHON,
    C.CATEGORY_SPACE: _NARROW_SPACE,
    C.CATEGORY_NOT_SPACE: _PYTHON[C.CATEGORY_NOT_SPACE],
}
"""... and whichever takes fewer: inside a negated class (`[^\\s]`), so that its complement
takes the more."""
FOLDS = {ord("i"): (0x130, 0x131), ord("s"): (0x17F,), ord("k"): (0x212A,)}
"""The non-ASCII characters Python's `(?i)` matches an ASCII letter with (dotted and
dotless I, long S, the Kelvin sign)."""
FOLDED_FROM = {cp: letter for letter, cps in FOLDS.items() for cp in cps}
GUARD = (
    rb"\x5cu00[2-7][0-9a-fA-F]"  # a printable ASCII character (or DEL) as \u00XX
    rb"|\x5cu(?:013[01]|017[fF]|212[aA])"  # those four escaped
    rb"|\xc4[\xb0\xb1]|\xc5\xbf|\xe2\x84\xaa"  # ... and in UTF-8
)
"""The spellings the patterns leave out: a line holding one may match any rule."""
GUARD_ID = 0x7FFFFFFF
_FLAGS = hyperscan.HS_FLAG_SINGLEMATCH | hyperscan.HS_FLAG_ALLOWEMPTY

Charset = tuple[frozenset[int], bool]
"""What one character of a pattern may be: these ASCII codes, or (True) any non-ASCII."""


class Untranslatable(ValueError):
    """A pattern construct this module has no superset for (the rule is never skipped)."""


def _class(codes: Sequence[int] | frozenset[int] | set[int]) -> bytes:
    """A byte class of these codes, as ranges."""
    ordered = sorted(codes)
    out: list[bytes] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        first, last = b"\\x%02x" % ordered[i], b"\\x%02x" % ordered[j]
        out.append(first if i == j else first + b"-" + last)
        i = j + 1
    return b"[" + b"".join(out) + b"]"


RAW = frozenset(range(0x20, 0x80)) - {0x22, 0x5C}
"""The ASCII characters a JSON string holds as they are: never a control, a quote or a
backslash (those are escaped: orjson, the decoder here, refuses them raw), so no pattern
here matches across a string's quotes into its neighbours."""


def literal(codes: frozenset[int]) -> bytes:
    """Every spelling of one character of `codes` (a literal, both cases under (?i))."""
    alternatives = [_class(codes & RAW)] if codes & RAW else []
    short = [SHORT_ESCAPES[c] for c in codes if c in SHORT_ESCAPES]
    if short:
        alternatives.append(rb"\x5c" + _class(short))
    for code in sorted(codes & CONTROLS):
        high, low = b"%02x" % code, b"%02X" % code
        alternatives.append(rb"\x5cu00" + _class({high[0], low[0]}) + _class({high[1], low[1]}))
    return alternatives[0] if len(alternatives) == 1 else b"(?:" + b"|".join(alternatives) + b")"


def spelled(codes: frozenset[int], non_ascii: bool) -> tuple[bytes, int]:
    """One unit of the spellings of a class's characters, and how many units the longest
    spelling is: a byte of the class's raw members, of the escapes (a backslash, `u`, hex
    digits, the short escapes' letters), of UTF-8 if it may be non-ASCII; `\\"` is one
    unit (a quote is never raw inside a string)."""
    if not codes and not non_ascii:
        raise Untranslatable("a class that matches nothing")
    members = set(codes & RAW)
    longest = 1
    short = [SHORT_ESCAPES[c] for c in codes if c in SHORT_ESCAPES]
    if short:
        members |= {0x5C, *short}
        longest = 2
    if codes & CONTROLS:
        members |= {0x5C, ord("u")} | HEX
        longest = 6  # \u001b
    if non_ascii:
        members |= {0x5C, ord("u")} | HEX | HIGH
        longest = 12  # \ud83d\ude00
    unit = _class(members - {0x22})
    if 0x22 in members:
        unit = b"(?:" + unit + rb"|\x5c\x22)"
    return unit, longest


def _fold(codes: set[int]) -> set[int]:
    return codes | {ord(chr(c).swapcase()) for c in codes if c in LETTERS}


def _in_set(items: list[tuple[Any, Any]], ignorecase: bool) -> Charset:
    """What a `[...]` class may match."""
    negate = any(op is C.NEGATE for op, _ in items)
    categories = CATEGORY_NARROW if negate else CATEGORY_ASCII
    codes: set[int] = set()
    non_ascii = False
    for op, arg in items:
        if op is C.NEGATE:
            continue
        elif op is C.LITERAL:
            if arg < 128:
                codes.add(arg)
            else:
                non_ascii = True
                if ignorecase and arg in FOLDED_FROM:
                    codes.add(FOLDED_FROM[arg])
        elif op is C.RANGE:
            low, high = arg
            codes.update(range(low, min(high, 127) + 1))
            if high >= 128:
                non_ascii = True
                if ignorecase:
                    codes.update(FOLDED_FROM[cp] for cp in FOLDED_FROM if low <= cp <= high)
        elif op is C.CATEGORY:
            codes |= categories[arg]
            non_ascii = True  # Python's classes are Unicode: some non-ASCII in each
        else:
            raise Untranslatable(f"class item {op}")
    if negate:  # under (?i) Python's negated class takes fewer than this, never more
        return frozenset(ASCII - codes), True
    return frozenset(_fold(codes) if ignorecase else codes), non_ascii


def _charset(op: Any, arg: Any, flags: int) -> Charset | None:
    """What one node matches, if it is one character (a literal, a class, `.`)."""
    ignorecase = bool(flags & re.IGNORECASE)
    if op is C.LITERAL:
        if arg >= 128:  # under (?i) it may fold onto an ASCII letter (K onto k)
            folded = _fold({FOLDED_FROM[arg]}) if ignorecase and arg in FOLDED_FROM else set()
            return frozenset(folded), True
        return frozenset(_fold({arg}) if ignorecase else {arg}), False
    if op is C.NOT_LITERAL:
        return frozenset(ASCII - {arg}), True
    if op is C.ANY:
        return frozenset(ASCII if flags & re.DOTALL else ASCII - {10}), True
    if op is C.IN:
        return _in_set(arg, ignorecase)
    return None


REPEAT_CAP = 16
"""Counts above this are loosened (`{6,512}` becomes `{6,}`, `{40}` `{16,}`): a wider
repeat is still a superset, and Hyperscan's compile time grows with what it unrolls."""


def _bounds(low: int, high: int | None) -> bytes:
    if high is not None and high > REPEAT_CAP:
        high = None
    low = min(low, REPEAT_CAP)
    return b"{%d,}" % low if high is None else b"{%d,%d}" % (low, high)


def _translate(nodes: Any, flags: int, groups: dict[int, bytes]) -> bytes:
    out: list[bytes] = []
    for op, arg in nodes:
        charset = _charset(op, arg, flags)
        if charset is not None:
            codes, non_ascii = charset
            if op is C.LITERAL and not non_ascii:
                out.append(literal(codes))
            else:
                members, longest = spelled(codes, non_ascii)
                out.append(members + _bounds(1, longest))
        elif op is C.BRANCH:
            _, branches = arg
            out.append(b"(?:" + b"|".join(_translate(b, flags, groups) for b in branches) + b")")
        elif op is C.SUBPATTERN:
            group, add, remove, sub = arg
            inner = _translate(sub, (flags | add) & ~remove, groups)
            if group is not None:
                groups[group] = inner
            out.append(b"(?:" + inner + b")")
        elif op is C.ATOMIC_GROUP:
            out.append(b"(?:" + _translate(arg, flags, groups) + b")")
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            low, high, sub = arg
            if high == 0:
                continue
            top = None if high == C.MAXREPEAT else high
            one = _charset(sub[0][0], sub[0][1], flags) if len(sub) == 1 else None
            if one is not None and not (sub[0][0] is C.LITERAL and not one[1]):
                # n characters of one class: n to n * longest bytes of its spellings' bytes
                members, longest = spelled(*one)
                out.append(members + _bounds(low, None if top is None else top * longest))
            else:
                out.append(b"(?:" + _translate(sub, flags, groups) + b")" + _bounds(low, top))
        elif op is C.GROUPREF:
            if arg not in groups:
                raise Untranslatable("a reference to a group not yet closed")
            out.append(b"(?:" + groups[arg] + b")")
        elif op is C.GROUPREF_EXISTS:
            _, yes, no = arg
            branches = [
                _translate(yes, flags, groups),
                _translate(no, flags, groups) if no else b"",
            ]
            out.append(b"(?:" + b"|".join(branches) + b")")
        elif op in (C.AT, C.ASSERT, C.ASSERT_NOT):
            continue  # true everywhere: a superset
        else:
            raise Untranslatable(f"construct {op}")
    return b"".join(out)


def _parse(pattern: str) -> Any:
    """What `re.compile(pattern)` parses (its flags from the pattern itself)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # as rules.py compiles them
        return sre.parse(pattern, 0)


def translate(pattern: str) -> bytes:
    """A Hyperscan (byte) pattern matching every raw JSON spelling of each match of
    `pattern` in a decoded string, outside `GUARD` (the module's docstring: why)."""
    parsed = _parse(pattern)
    return _translate(parsed, parsed.state.flags, {})


LITERAL_RUN = 2
"""A pattern Hyperscan scans cheaply holds, in every match, a literal run this long: it
finds those runs first and tries the rest only there. A pattern without one (a class
repeated, `[a-f0-9]{40}`) would run at every byte: its rule's keywords stand in for it."""


def _has_literal(nodes: Any, flags: int) -> bool:
    """Whether every match of `nodes` holds LITERAL_RUN literal characters in a row (a
    character of two cases, `[Aa]`, counts: Hyperscan finds those as literals too)."""
    run = 0
    for op, arg in nodes:
        charset = _charset(op, arg, flags)
        if charset is not None and not charset[1] and len(_fold(set(charset[0]))) <= 2:
            run += 1
            if run >= LITERAL_RUN:
                return True
            continue
        if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
            continue  # matches no character: the run goes on
        run = 0
        if op is C.SUBPATTERN and _has_literal(arg[3], (flags | arg[1]) & ~arg[2]):
            return True
        if op is C.ATOMIC_GROUP and _has_literal(arg, flags):
            return True
        if op is C.BRANCH and all(_has_literal(branch, flags) for branch in arg[1]):
            return True
        repeated = op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT) and arg[0] >= 1
        if repeated and _has_literal(arg[2], flags):
            return True
    return False


def has_literal(pattern: str) -> bool:
    parsed = _parse(pattern)
    return _has_literal(parsed, parsed.state.flags)


def keyword(word: str) -> bytes:
    """Every spelling of `word` in a string whose `.lower()` holds it."""
    return translate("(?i)" + re.escape(word))


def _compiles(expression: bytes, flags: int) -> bool:
    try:
        hyperscan.Database().compile(expressions=[expression], flags=flags)
    except hyperscan.error:
        return False
    return True


def _compile(expressions: list[bytes], ids: list[int]) -> tuple[bytes, frozenset[int]]:
    """The serialized database, and the rules left out of it (possible everywhere)."""
    flags = [_FLAGS] * len(expressions)
    database = hyperscan.Database()
    rest: set[int] = set()
    try:
        database.compile(expressions=expressions, ids=ids, flags=flags)
    except hyperscan.error:
        # A pattern Hyperscan refuses (too large, say): its approximate mode (PREFILTER,
        # a superset too) for that one, else no prefilter for its rule.
        for at in range(1, len(expressions)):
            if not _compiles(expressions[at], _FLAGS):
                flags[at] |= hyperscan.HS_FLAG_PREFILTER
                if not _compiles(expressions[at], flags[at]):
                    rest.add(ids[at])
        keep = [at for at in range(len(expressions)) if at == 0 or ids[at] not in rest]
        database = hyperscan.Database()
        database.compile(
            expressions=[expressions[at] for at in keep],
            ids=[ids[at] for at in keep],
            flags=[flags[at] for at in keep],
        )
    return hyperscan.dumpb(database), frozenset(rest)


_COMPILED: dict[str, tuple[bytes, frozenset[int]]] = {}
"""Databases this process compiled or loaded, by digest (a forked parse worker has them)."""
_COMPILING = threading.Lock()


def _after_fork() -> None:
    """A fork while another thread compiled would leave the child's lock held forever."""
    global _COMPILING
    _COMPILING = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)
try:
    _SOURCE = hashlib.sha256(Path(__file__).read_bytes()).digest()
except OSError:  # not a file (a zip): the version names the translation
    _SOURCE = b"sessiond-prefilter-1"
"""How the patterns are translated is part of a database's name: a new translation, a
new database."""

Rules = Sequence[tuple[str, Sequence[str]]]
"""Each rule's pattern (Python's syntax) and its keywords."""


KEYED = 1 << 20
"""`KEYED + i` in `possible`'s answer: a keyword (of any rule: Redactor._named then asks
which are rule i's) is in an object's key (or in the
name of a name/value pair, `{"name": "DB_PASSWORD", "value": ...}`) whose value may hold
what a rule that knows a secret by its name takes: a string, an array or object holding a
string, or a number of 10 digits or more. The engine then looks at the name with the
value (`"name": "value"`), as it would at the same written as text."""
_STRING_REST = rb"(?:[^\x22\x5c]|\x5c[\x00-\xff])*"
"""The rest of a JSON string: no raw quote inside one (an escaped one, `\\"`, is taken)."""
_WS = rb"[\x20\x09\x0a\x0d]*"
_NAMED_VALUE = (
    rb"(?:\x22|\x5b[^\x5d]*?\x22|\x7b[^\x7d]*?\x22" + _WS + rb":" + _WS + rb"\x22|-?[0-9]{10})"
)
"""What follows a key's colon for the name-based rules to matter: a string, an array with a
string before its first `]`, an object with a string member before its first `}`, a long
number (a number of fewer digits is no secret any such rule takes)."""
_NAME_FIELD = rb"\x22(?:name|key|Name|Key)\x22" + _WS + rb":" + _WS + rb"\x22" + _STRING_REST


KEYED_ID = GUARD_ID - 1


def _plain(word: str) -> bytes:
    """`word` in any case, as a JSON string spells it unescaped (`/` also as `\\/`): the
    other spellings of its characters (`\\u0070`, U+212A for K) are GUARD's, which sends the
    text to every rule anyway. Plain, so Hyperscan finds it as a literal."""
    out = []
    for char in word.encode():
        if char in LETTERS:
            out.append(b"[%c%c]" % (char | 0x20, char & ~0x20))
        elif char == ord("/"):
            out.append(rb"\x5c?/")
        else:
            out.append(b"\\x%02x" % char)
    return b"".join(out)


KEYED_GROUP = 512
"""Keywords per keyed pattern (Hyperscan's limit on a pattern's length)."""


def keyed(words: Sequence[str]) -> list[bytes]:
    """Where one of `words` names a value in a JSON text: inside a key followed by such a
    value, or inside the name of a name/value pair. A pattern of many keywords, not one
    each: on a text of keywords and no quote (hostile) 600 patterns kept as many states
    alive at every byte, 3x the pass's time; which rules a key picks the walk asks its
    keywords (`Redactor._named`)."""
    out = []
    for at in range(0, len(words), KEYED_GROUP):
        group = words[at : at + KEYED_GROUP]
        spelled = b"(?:" + b"|".join(_plain(word) for word in group) + b")"
        out.append(spelled + _STRING_REST + rb"\x22" + _WS + rb":" + _WS + _NAMED_VALUE)
        out.append(_NAME_FIELD + spelled)
    return out


def _expressions(rules: Rules) -> tuple[list[bytes], list[int], set[int]]:
    """Each rule's expression (or its keywords'), by rule index, the `keyed` ones (by
    KEYED_ID), and the rules that do not translate."""
    expressions: list[bytes] = [GUARD]
    ids: list[int] = [GUARD_ID]
    rest: set[int] = set()
    for index, (pattern, keywords) in enumerate(rules):
        try:
            if has_literal(pattern) or not keywords:
                chosen = [translate(pattern)]
            else:
                chosen = [keyword(word) for word in keywords]
        except (Untranslatable, re.error, RecursionError, OverflowError):
            rest.add(index)
            continue
        expressions += chosen
        ids += [index] * len(chosen)
    if words := keywords_of(rules):
        chosen = keyed(words)
        expressions += chosen
        ids += [KEYED_ID] * len(chosen)
    return expressions, ids, rest


def keywords_of(rules: Rules) -> list[str]:
    """Every rule's keywords, each once, in a fixed order."""
    return sorted({word for _, keywords in rules for word in keywords})


def compiled(rules: Rules) -> tuple[bytes, frozenset[int]]:
    """The serialized database of these rules and the rules it cannot rule out: this
    process's, else the cache's (a file named by the digest of the rules, this module and
    Hyperscan's version, read only from a private folder), else compiled now (~0.3 s for
    the default rules) and cached."""
    digest = hashlib.sha256(str(getattr(hyperscan, "__version__", "")).encode() + b"\0" + _SOURCE)
    for pattern, keywords in rules:
        digest.update(
            b"%s\0%s\0" % (pattern.encode("utf-8", "surrogatepass"), "\0".join(keywords).encode())
        )
    key = digest.hexdigest()
    with _COMPILING:
        if key in _COMPILED:
            return _COMPILED[key]
        name = f"redaction-{key[:32]}.hsdb"
        data = cache.read(name)
        if data is not None:
            try:
                head, _, database = data.partition(b"\n")
                rest = frozenset(int(i) for i in head.split(b",") if i)
                hyperscan.loadb(database, hyperscan.HS_MODE_BLOCK)  # it loads
                _COMPILED[key] = database, rest
                return _COMPILED[key]
            except (ValueError, hyperscan.error):
                pass
        expressions, ids, untranslated = _expressions(rules)
        database, refused = _compile(expressions, ids)
        _COMPILED[key] = database, frozenset(untranslated) | refused
        head = ",".join(map(str, sorted(_COMPILED[key][1]))).encode()
        cache.write(name, head + b"\n" + database, "redaction-*.hsdb")
        return _COMPILED[key]


class Prefilter:
    """One Hyperscan database: each rule's pattern (or, for a pattern without a literal
    run, its keywords: the engine runs no rule without one), each keyword where it names a
    value (`keyed`), and `GUARD`."""

    def __init__(self, rules: Rules) -> None:
        database, rest = compiled(rules)
        self._database = hyperscan.loadb(database, hyperscan.HS_MODE_BLOCK)
        self._named = frozenset(KEYED + index for index, (_, words) in enumerate(rules) if words)
        self.everything = frozenset(range(len(rules))) | self._named
        self.unfiltered = rest | {KEYED + index for index in rest if rules[index][1]}
        """Rules no pass here can rule out: possible on every text."""
        self._local = threading.local()
        self._scan = self._database.scan

    def possible(self, raw: bytes) -> frozenset[int] | set[int]:
        """The rules that may match in `raw`, a JSON text (a source line, an item), and
        (`KEYED` + i) those whose keyword names a value there. Run once per source line:
        written for the interpreter's sake (positional arguments, no helper calls: a
        third of its cost was that)."""
        found: set[int] = set()
        try:
            scratch = self._local.scratch
        except AttributeError:  # Hyperscan's scratch is one per thread
            scratch = self._local.scratch = hyperscan.Scratch(self._database)
        try:
            self._scan(raw, _collect, 0, found, scratch)
        except hyperscan.ScanTerminated:  # GUARD matched: nothing can be ruled out
            return self.everything
        if KEYED_ID in found:
            found.discard(KEYED_ID)
            found |= self._named
        if self.unfiltered:
            found |= self.unfiltered
        return found


def _collect(index: int, start: int, end: int, flags: int, found: object) -> bool:
    cast(set[int], found).add(index)
    return index == GUARD_ID  # True stops the scan


class Keywords:
    """Which of the rules' keywords a long text holds, each reported once: one Hyperscan
    pass over its lower-cased UTF-8 (the keyword automaton reports every occurrence, and
    Python paid for each: 0.8 s for 4 MB of a keyword repeated)."""

    def __init__(self, words: Sequence[str]) -> None:
        self.words = list(words)
        database = hyperscan.Database()
        database.compile(
            expressions=[re.escape(word).encode() for word in self.words],
            ids=list(range(len(self.words))),
            flags=[hyperscan.HS_FLAG_SINGLEMATCH] * len(self.words),
        )
        self._database = database
        self._local = threading.local()

    def present(self, lowered: bytes) -> set[str]:
        found: set[int] = set()
        try:
            scratch = self._local.scratch
        except AttributeError:
            scratch = self._local.scratch = hyperscan.Scratch(self._database)
        self._database.scan(lowered, _collect_words, 0, found, scratch)
        return {self.words[index] for index in found}


def _collect_words(index: int, start: int, end: int, flags: int, found: object) -> bool:
    cast(set[int], found).add(index)
    return False
