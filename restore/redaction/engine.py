"""Finding secrets in text and replacing each with its placeholder,
`[secret:<kind>:<fingerprint>]`.

An item (a source line, a record) is first looked at whole, as the JSON it is: one
Hyperscan pass of every rule's pattern at once over its raw bytes (restore/redaction/
prefilter.py: a superset of what the rules match in any of its strings, ~1 µs a line)
says which rules could match anywhere in it, and which rules' keywords name a value in it
(a key, `"DB_PASSWORD": …`); most items: none, and nothing else runs. Then the item is
walked: each string, and each key, by the rules a keyword prefilter picks (pyahocorasick's
Aho-Corasick automaton over the lower-cased text: every rule's keywords in one pass, as
gitleaks itself does) of those the pass allowed; and each object member whose key holds a
rule's keyword is looked at as the rules look at text, the name with the value
(`"name": "value"` and `name="value"`): a value under a secret-named key is redacted as
the same written in a `.env` file or a JSON text would be, whatever it is (a string, a long
number, an array or object of them, as deep as it nests; a name/value pair,
`{"name": "DB_PASSWORD", "value": …}`, alike); a string that is JSON text (a tool's
answer kept as text) is walked as the structure it holds. Without the `hyperscan` package
(a platform it has no wheel for) the keywords alone decide: the same findings, slower.

The rules run in RE2 (rules.py), over each text's UTF-8 bytes: linear in the text,
whatever it holds, and each item has a budget (`Budget`: characters the rules may scan,
matches they may find) past which it is refused whole (`TooCostly`), never stored
unlooked-at. A match
is checked as gitleaks checks it (the secret's entropy, the rule's and the global
allowlists and stopwords: one Aho-Corasick pass per allowlist, not one search per
stopword); where two rules match overlapping text the specific one wins over a generic one
(a key recognised by its own shape over a key recognised by the name it is given).

sessiond's own structural fields (`STRUCTURAL`: ids, hashes, enumerations) are skipped only
where they are sessiond's: a scalar at an item's top level. The same names anywhere below
(a tool's output, an API's error body, a webhook) are looked at like any other.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import re
import threading
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

import ahocorasick
import orjson

from protocol.errors import ErrorKind, ProtocolError
from restore.redaction.rules import Allow, Rule

try:
    from restore.redaction.prefilter import KEYED, Keywords, Prefilter
except ImportError:  # no hyperscan wheel for this platform: the keywords alone decide
    Prefilter = None  # type: ignore[assignment,misc]
    Keywords = None  # type: ignore[assignment,misc]
    KEYED = 1 << 20

_BUILDING = threading.Lock()


def _after_fork() -> None:
    """A fork while another thread built a pass would leave the child's lock held."""
    global _BUILDING
    _BUILDING = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)

MIN_TEXT = 8
"""Texts shorter than this are never looked at alone: no rule's secret fits in fewer (a
short value under a secret-named key is looked at with its name)."""
PLACEHOLDER = re.compile(r"\[secret:([a-z0-9-]+):([0-9a-f]{4})\]")
STRUCTURAL = frozenset(
    {
        "v",
        "seq",
        "ts",
        "type",
        "sessionId",
        "id",
        "threadId",
        "operationId",
        "parentOperationId",
        "turnId",
        "toolCallId",
        "beforeSha",
        "afterSha",
        "sha",
        "sha256",
        "role",
        "status",
        "state",
        "effect",
        "event",
        "source",
        "reason",
        "targetSessionId",
        "resumedFrom",
        "scope",
        "kind",
        "sessionUpdate",
        # the same in the agents' transcripts an import reads (Claude Code, Codex, Gemini)
        "timestamp",
        "uuid",
        "parentUuid",
        "leafUuid",
        "requestId",
        "messageId",
        "session_id",
        "thread_id",
        "turn_id",
        "call_id",
        "tool_use_id",
        "tool_call_id",
        "created_at",
        "createdAt",
        "updatedAt",
        "startTime",
        "lastUpdated",
    }
)
"""Keys whose values are ids, hashes, timestamps and enumerations (sessiond's, and the
agents' transcripts'): never a secret, and what the stores and subsystems key on. Skipped
at an item's top level only, and only a scalar (a string, a number)."""
NAME_FIELDS = ("name", "key", "Name", "Key")
VALUE_FIELDS = ("value", "Value")
"""A name/value pair (`{"name": "DB_PASSWORD", "value": …}`: Kubernetes' `env`, AWS tags
and parameters, CI secrets lists): the value is looked at with that name."""
LONG_NUMBER = 10
"""A number under a secret-named key is looked at from this many characters (fewer: no
rule that knows a secret by its name takes it)."""
LONG_TEXT = 4096
"""A text this long has its keywords found by Hyperscan (each once), not the automaton."""
LINE_CONTEXT = 2048
"""An allowlist that looks at a match's line sees at most this much either side of the
match: a 16 MiB line holding many matches is not searched whole once per match."""
SCAN_BUDGET = 128 << 20
"""Characters the rules may scan for one item, all rules together (RE2 runs ~200 MB/s a
rule, most rules far faster: about half a second)."""
MATCHES_BUDGET = 40_000
"""Matches the rules may find in one item, secrets or not (each costs Python's time, its
checks: ~20 µs; an .env template of 20,000 empty `SERVICE_n_API_KEY=` lines is 10,000
matches of gitleaks' generic rule, all allowed)."""


class TooCostly(ProtocolError):
    """An item the rules cannot look at within its budget: refused whole (never stored
    unlooked-at), with the mend: smaller items."""

    def __init__(self, what: str) -> None:
        super().__init__(
            ErrorKind.PAYLOAD_TOO_LARGE,
            f"an item is too costly to check for secrets ({what}); record it as smaller "
            "items (docs/security.md, redaction)",
        )


class Budget:
    """What the rules may still spend on one item (`SCAN_BUDGET`, `MATCHES_BUDGET`)."""

    __slots__ = ("collect", "matches", "scan")

    def __init__(self, scan: int = SCAN_BUDGET, matches: int = MATCHES_BUDGET) -> None:
        self.scan = scan
        self.matches = matches
        self.collect: list[tuple[str, str]] | None = None
        """The secrets replaced, while a JSON text's walk wants them (`_inner_hits`)."""

    def spend(self, characters: int) -> None:
        self.scan -= characters
        if self.scan < 0:
            raise TooCostly(f"more than {SCAN_BUDGET >> 20} MiB of text for its rules to scan")

    def matched(self) -> None:
        self.matches -= 1
        if self.matches < 0:
            raise TooCostly(f"more than {MATCHES_BUDGET:,} matches of its rules")


@dataclass(frozen=True)
class Found:
    start: int
    end: int
    kind: str
    secret: str


Hit = tuple[int, int, bool | None, str, str]
"""A match kept: start and end (bytes of the text's UTF-8), generic (None: found by a JSON
text's walk, counted there), kind, the secret."""


def entropy(text: str) -> float:
    """Shannon entropy in bits per character (gitleaks' measure)."""
    size = len(text)
    return -sum(n / size * math.log2(n / size) for n in Counter(text).values()) if size else 0.0


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _decode(data: bytes) -> str:
    return data.decode("utf-8", "surrogatepass")


Context = tuple[str, Sequence[int]] | None
"""The nearest secret-named key above a value, and the rules its name picks (None: none)."""


class Redactor:
    """Secrets found and replaced, with counts per kind (what `doctor --redact` reports).

    `key` keys the fingerprint (HMAC-SHA256, 4 hex digits): the same secret gets the
    same placeholder in every thread of a home, without the placeholder telling it.
    Safe to share between threads (a server redacts on several)."""

    def __init__(
        self,
        rules: Sequence[Rule],
        key: bytes,
        *,
        global_allow: Allow | None = None,
        allow: Sequence[str] = (),
        strict: bool = False,
    ) -> None:
        self.rules = tuple(rules)
        self.key = key
        self.strict = strict
        self.counts: Counter[str] = Counter()
        self._global = global_allow or Allow()
        self._allow = tuple(re.compile(regex) for regex in allow)
        self._by_keyword: dict[str, list[int]] = {}
        self._always: list[int] = []
        for index, rule in enumerate(self.rules):
            if not rule.keywords:
                self._always.append(index)
            for word in rule.keywords:
                self._by_keyword.setdefault(word, []).append(index)
        self._every = frozenset(range(len(self.rules))) | {
            KEYED + index for index, rule in enumerate(self.rules) if rule.keywords
        }
        self._keywords: ahocorasick.Automaton | None = None
        self._longest = max(map(len, self._by_keyword), default=1)
        if self._by_keyword:
            self._keywords = ahocorasick.Automaton()
            for word in self._by_keyword:
                self._keywords.add_word(word, word)
            self._keywords.make_automaton()
        self._stopwords: dict[int, ahocorasick.Automaton] = {}
        self._long: Keywords | None = None
        self._names: dict[str, tuple[int, ...]] = {}
        self._prefilter: Prefilter | None = None
        self.use_prefilter = Prefilter is not None
        """Whether items are looked at whole by Hyperscan first (off: the keywords alone
        decide, as without the package: the same findings, a differential test says)."""
        self.rebuild: tuple[Callable[..., Redactor | None], tuple[Any, ...]] | None = None
        """How another process makes the same redactor (an import's parse workers): the
        rules are compiled there once, from the cache, not shipped with every file."""

    @property
    def ready(self) -> bool:
        """Whether `possible` is cheap now: its Hyperscan database loaded (the first call
        loads it, or compiles it: ~0.35 s), or none used."""
        return self._prefilter is not None or not self.use_prefilter

    def __reduce__(self) -> tuple[Callable[..., Redactor | None], tuple[Any, ...]]:
        if self.rebuild is None:
            raise TypeError("this Redactor cannot be sent to another process")
        return self.rebuild

    # --- finding ---------------------------------------------------------------------------

    def candidates(self, text: str) -> list[int]:
        """The rules worth running on `text`: those a keyword of which occurs in it (every
        occurrence, overlapping ones too: Aho-Corasick, one pass over the text)."""
        if self._keywords is None:
            return self._always
        if len(text) >= LONG_TEXT and Keywords is not None:
            hits = self._long_words().present(_encode(text.lower()))
        else:
            hits = {word for _, word in self._keywords.iter(text.lower())}
        if not hits:
            return self._always
        chosen = set(self._always)
        for word in hits:
            chosen.update(self._by_keyword[word])
        return sorted(chosen)

    def find(self, text: str, allowed: Collection[int] | None = None) -> list[Found]:
        """Every secret in `text`, non-overlapping, in order. `allowed`: the rules the
        pass over the item holding `text` found possible (None: not known, all)."""
        if len(text) < MIN_TEXT or (allowed is not None and not allowed):
            return []
        data = _encode(text)
        kept = _settle(self._hits(data, self._chosen(text, allowed), Budget()))
        found, at, chars = [], 0, 0
        for start, end, _, kind, secret in kept:  # byte offsets to characters, in one pass
            chars += len(_decode(data[at:start]))
            found.append(Found(chars, chars + len(secret), kind, secret))
            chars, at = chars + len(secret), end
        return found

    def _chosen(self, text: str, allowed: Collection[int] | None) -> list[int]:
        indexes = self.candidates(text)
        return indexes if allowed is None else [index for index in indexes if index in allowed]

    def _hits(self, data: bytes, indexes: Sequence[int], budget: Budget) -> list[Hit]:
        """Each rule's checked matches in `data` (overlapping between rules)."""
        found: list[Hit] = []
        for index in indexes:
            rule = self.rules[index]
            budget.spend(len(data))
            for spans in rule.matches(data):
                budget.matched()
                hit = self._check(rule, spans, data)
                if hit is not None:
                    found.append(hit)
        return found

    def keywords_in(self, text: str, since: int = 0) -> list[tuple[int, str]]:
        """Each keyword that occurs in `text` ending at or past `since` (one a previous
        call saw ended before it), and where it starts, or (with Hyperscan, each once: one
        C call, not the automaton's 20 ns a character) at most where."""
        if self._keywords is None:
            return []
        begin = max(0, since - self._longest + 1)
        if Keywords is not None:
            return [
                (len(text), word)
                for word in self._long_words().present(_encode(text[begin:].lower()))
            ]
        found = []
        for end, word in self._keywords.iter(text[begin:].lower()):
            if begin + end + 1 > since:
                found.append((begin + end + 1 - len(word), word))
        return found

    def _long_words(self) -> Keywords:
        if self._long is None:
            with _BUILDING:
                if self._long is None:
                    self._long = Keywords(sorted(self._by_keyword))
        return self._long

    def rules_for(self, words: Collection[str]) -> list[int]:
        """The rules these keywords (and none) pick, as `candidates` picks them."""
        chosen = set(self._always)
        for word in words:
            chosen.update(self._by_keyword.get(word, ()))
        return sorted(chosen)

    def unsettled(self, text: str, since: int = 0, rules: Sequence[int] | None = None) -> int:
        """The earliest offset of `text`, a stream's text so far with more to come, from
        which a secret may still be in progress (len(text): none). That is the last word
        (a token, or a keyword, cut short), and for each rule whose keyword occurs (as
        `candidates`) a match that reaches the end (it may grow) or that more text could
        complete (a partial match: `Rule.partial`), and then any match that straddles the
        offset. Text before it can be stored on its own: no secret of the rules' shapes
        is cut there, nor cut from the name that makes it one (`api_key = ...`). A match
        in progress is found by RE2 (`Rule.in_progress`, prefixes.py: linear), not by
        partial matching, which backtracked for 100 ms over a held chunk of keywords.

        A stream's hold (restore/sources/acp_chunks.py) passes what it knows, so that
        holding a long text costs each new piece once, not a scan of all it holds again:
        `since`, how much of `text` a previous call saw (a rule whose matches are at most
        `width` characters long is run from `since - width` only: a match that can still
        grow starts there or later), and `rules`, those its keywords pick (it keeps them
        as they come: `keywords_in`)."""
        end = len(text)
        cut = max(text.rfind(space) for space in " \n\t\r") + 1  # (a token has none)
        whole: list[tuple[int, int]] = []
        for index in self.candidates(text) if rules is None else rules:
            rule = self.rules[index]
            width = rule.width
            begin = 0 if width is None else max(0, since - width)
            progress = rule.in_progress
            if progress is None:  # what RE2 cannot run: partial matching (backtracking)
                for match in rule.partial.finditer(text, begin, partial=True):
                    start, stop = match.span()
                    if match.partial or stop >= end:
                        cut = min(cut, start)
                    elif stop > start:
                        whole.append((start, stop))
                continue
            found = progress.search(text, begin)
            if found is not None and found.start() < end:
                cut = min(cut, found.start())
            engine: Any = rule.engine  # RE2 (`in_progress` is None otherwise): takes a str
            for match in engine.finditer(text, begin):
                start, stop = match.span()
                if stop >= end:
                    cut = min(cut, start)
                elif stop > start:
                    whole.append((start, stop))
        moved = True
        while moved:
            moved = False
            for start, stop in whole:
                if start < cut < stop:
                    cut, moved = start, True
        return cut

    def _check(self, rule: Rule, spans: list[tuple[int, int]], data: bytes) -> Hit | None:
        group = rule.secret_group
        if group == 0:
            group = next((g for g in range(1, len(spans)) if spans[g][0] >= 0), 0)
        elif group >= len(spans):
            group = 0
        start, end = spans[group]
        if start < 0 or end <= start:
            return None
        secret = data[start:end].decode("utf-8", "replace")
        if not self.strict:
            if rule.require_digit and not any(c.isdigit() for c in secret):
                return None
            if rule.entropy and entropy(secret) <= rule.entropy:
                return None
        if secret[0] == "[" and PLACEHOLDER.fullmatch(secret):
            return None
        whole = spans[0]
        if self._allowed(self._global, secret, whole, data):
            return None
        if any(self._allowed(allow, secret, whole, data) for allow in rule.allows):
            return None
        if any(pattern.search(secret) for pattern in self._allow):
            return None
        return start, end, rule.generic, rule.kind, secret

    def _allowed(self, allow: Allow, secret: str, whole: tuple[int, int], data: bytes) -> bool:
        if allow.target == "match":
            target = data[whole[0] : whole[1]]
        elif allow.target == "line":
            begin = max(data.rfind(b"\n", 0, whole[0]) + 1, whole[0] - LINE_CONTEXT)
            finish = data.find(b"\n", whole[1], whole[1] + LINE_CONTEXT)
            finish = finish if finish >= 0 else min(len(data), whole[1] + LINE_CONTEXT)
            target = data[begin:finish]
        else:
            target = secret.encode("utf-8", "surrogatepass")
        if allow.matches(target):
            return True
        if self.strict or not allow.stopwords:
            return False
        words = self._stopwords.get(id(allow))
        if words is None:
            words = ahocorasick.Automaton()
            for word in allow.stopwords:
                words.add_word(word, word)
            words.make_automaton()
            self._stopwords[id(allow)] = words
        return next(words.iter(secret.lower()), None) is not None

    # --- replacing -------------------------------------------------------------------------

    def fingerprint(self, secret: str) -> str:
        digest = hmac.new(self.key, secret.encode("utf-8", "surrogatepass"), hashlib.sha256)
        return digest.hexdigest()[:4]

    def placeholder(self, kind: str, secret: str) -> str:
        return f"[secret:{kind}:{self.fingerprint(secret)}]"

    def text(self, text: str, allowed: Collection[int] | None = None) -> str:
        """`text` with every secret replaced by its placeholder. TooCostly past a text's
        budget."""
        if allowed is None and len(text) >= MIN_TEXT:
            try:
                allowed = self.possible(orjson.dumps(text))
            except orjson.JSONEncodeError:  # a lone surrogate: the keywords alone decide
                allowed = None
        return self._string(text, allowed, None, Budget())

    def value(self, value: Any, allowed: Collection[int] | None = None) -> Any:
        """A JSON value with its strings (and keys) redacted; the same object when nothing
        changed (most items: no copy). TooCostly past the value's budget."""
        if allowed is None:
            try:
                allowed = self.possible_item(orjson.dumps(value))
            except orjson.JSONEncodeError:  # a lone surrogate: the keywords alone decide
                allowed = self._every
            if not allowed:
                return value
        return self._value(value, allowed, None, Budget())

    def possible(self, raw: bytes) -> Collection[int]:
        """The rules that could match in any string of `raw`, a JSON text (an item's
        encoding, a source line), and (`KEYED` + i) those whose keyword names a value
        there: Hyperscan's pass, or, without it, every rule if any keyword occurs (no rule
        here matches without one of its keywords; a text with JSON escapes that could
        spell a keyword, `\\u` or `\\/`, is looked at)."""
        prefilter = self._prefilter
        if prefilter is not None and self.use_prefilter:
            return prefilter.possible(raw)
        if self.use_prefilter:
            with _BUILDING:  # built on first use: a process that redacts
                if self._prefilter is None:  # nothing (a server's start) never pays it
                    self._prefilter = Prefilter([(r.regex, r.keywords) for r in self.rules])
            return self._prefilter.possible(raw)
        if self._always or self._keywords is None:
            return self._every
        if b"\\u" in raw or b"\\/" in raw:
            return self._every
        text = raw.decode("utf-8", "replace").lower()
        return self._every if next(self._keywords.iter(text), None) is not None else ()

    def item(
        self, item: dict[str, Any], raw: str | bytes | None = None, budget: Budget | None = None
    ) -> dict[str, Any]:
        """An item (or any JSON object) with its secrets redacted: every string and key
        but the top-level scalars of sessiond's own fields (`STRUCTURAL`), values under
        secret-named keys with their names. `raw`: the JSON it was decoded from, if at
        hand (else it is encoded for the check). TooCostly past the item's budget."""
        if raw is None:
            raw = orjson.dumps(item)
        elif isinstance(raw, str):
            raw = raw.encode("utf-8", "surrogatepass")
        allowed = self.possible_item(raw)
        if not allowed:
            return item
        return self._object(item, allowed, None, budget or Budget(), top=True)

    def possible_item(self, raw: bytes) -> Collection[int]:
        """`possible` for an item's JSON (what `item` asks first): where a PEM block's head
        is in `raw` but no rule can match a string of it, asked again with a list's strings
        read as the lines they were (a private key one line an entry: `_across_lines`)."""
        allowed = self.possible(raw)
        if not allowed and b"PRIVATE KEY" in raw:
            allowed = self.possible(_BETWEEN_STRINGS.sub(rb"\\n", raw))
        return allowed

    def _value(self, value: Any, allowed: Collection[int], context: Context, budget: Budget) -> Any:
        if isinstance(value, str):
            return self._string(value, allowed, context, budget)
        if isinstance(value, dict):
            return self._object(value, allowed, context, budget)
        if isinstance(value, list):
            changed = [self._value(entry, allowed, context, budget) for entry in value]
            changed = self._across_lines(changed, budget)
            return value if all(a is b for a, b in zip(changed, value, strict=True)) else changed
        if context is not None and isinstance(value, int | float) and not isinstance(value, bool):
            shown = orjson.dumps(value).decode()
            if len(shown) >= LONG_NUMBER:
                redacted = self._string(shown, allowed, context, budget)
                return value if redacted is shown else redacted
        return value

    def _across_lines(self, entries: list[Any], budget: Budget) -> list[Any]:
        """A secret split over the strings of a list (a tool's output as `lines`: a private
        key one line an entry) that no entry holds whole: the entries joined as the lines
        they were, scanned, and each entry's part of a match replaced (a search document
        or an export joining them again would otherwise hold the secret)."""
        at = [i for i, entry in enumerate(entries) if isinstance(entry, str)]
        if len(at) < 2:
            return entries
        parts = [_encode(entries[i]) for i in at]
        data = b"\n".join(parts)
        if len(data) < MIN_TEXT:
            return entries
        text = _decode(data)
        try:
            allowed = self.possible(orjson.dumps(text))
        except orjson.JSONEncodeError:
            allowed = self._every
        if not allowed:
            return entries
        starts, offset = [], 0
        for part in parts:
            starts.append(offset)
            offset += len(part) + 1
        spanning = [
            hit
            for hit in self._hits(data, self._chosen(text, allowed), budget)
            if sum(
                1 for a, b in zip(starts, parts, strict=True) if a < hit[1] and a + len(b) > hit[0]
            )
            > 1
        ]
        if not spanning:
            return entries
        cuts: dict[int, list[tuple[int, int, bytes]]] = {}
        for start, end, _, kind, secret in _settle(spanning):
            self.counts[kind] += 1
            if budget.collect is not None:
                budget.collect.append((kind, secret))
            shown = self.placeholder(kind, secret).encode()
            for n, (a, part) in enumerate(zip(starts, parts, strict=True)):
                if a < end and a + len(part) > start:
                    cuts.setdefault(n, []).append(
                        (max(start, a) - a, min(end, a + len(part)) - a, shown)
                    )
        result = list(entries)
        for n, spans in cuts.items():
            part, out, last = parts[n], [], 0
            for begin, finish, shown in sorted(spans):
                out += [part[last:begin], shown]
                last = finish
            out.append(part[last:])
            result[at[n]] = _decode(b"".join(out))
        return result

    def _object(
        self,
        item: dict[str, Any],
        allowed: Collection[int],
        context: Context,
        budget: Budget,
        *,
        top: bool = False,
    ) -> dict[str, Any]:
        pairs: list[tuple[str, Any]] = []
        changed = False
        pair = None if top else self._pair(item, allowed)
        for key, value in item.items():
            new: Any = value
            if value is None or isinstance(value, bool):
                pass
            elif top and key in STRUCTURAL and not isinstance(value, dict | list):
                pass  # sessiond's own: an id, a hash, an enumeration
            else:
                named = self._named(key, allowed) if isinstance(key, str) else ()
                inner = (key, named) if named else pair if key in VALUE_FIELDS and pair else context
                new = self._value(value, allowed, inner, budget)
            new_key = key
            if isinstance(key, str) and len(key) >= MIN_TEXT and key not in STRUCTURAL:
                new_key = self._string(key, allowed, None, budget)
            changed = changed or new is not value or new_key is not key
            pairs.append((new_key, new))
        if not changed:
            return item
        result: dict[str, Any] = {}
        for key, value in pairs:
            while key in result:
                key += "~"  # two keys that redact alike: both kept
            result[key] = value
        return result

    def _named(self, key: str, allowed: Collection[int]) -> tuple[int, ...]:
        """The rules a keyword of which `key` holds, of those the pass found naming a
        value (`KEYED`): what looks at a value under this key with its name."""
        found = self._names.get(key)
        if found is None:
            found = (
                ()
                if self._keywords is None
                else tuple(
                    sorted(
                        {
                            index
                            for _, word in self._keywords.iter(key.lower())
                            for index in self._by_keyword[word]
                        }
                    )
                )
            )
            if len(self._names) >= 4096:
                self._names.clear()  # keys are few in practice; a flood of them is bounded
            self._names[key] = found
        return tuple(index for index in found if KEYED + index in allowed)

    def _pair(self, item: dict[str, Any], allowed: Collection[int]) -> Context:
        """A name/value pair's name and the rules it picks (None: not such a pair)."""
        for field in NAME_FIELDS:
            name = item.get(field)
            if isinstance(name, str) and any(value in item for value in VALUE_FIELDS):
                named = self._named(name, allowed)
                return (name, named) if named else None
        return None

    def _string(
        self, text: str, allowed: Collection[int] | None, context: Context, budget: Budget
    ) -> str:
        """`text` redacted: by the rules alone (from MIN_TEXT characters), and with the
        name of the key it is under (`context`)."""
        if len(text) < MIN_TEXT and context is None:
            return text
        data = _encode(text)
        hits = (
            self._hits(data, self._chosen(text, allowed), budget) if len(text) >= MIN_TEXT else []
        )
        if context is not None:
            hits += self._named_hits(context, data, budget)
        inner = self._inner_hits(text, data, budget) if _looks_like_json(text) else []
        if not hits and not inner:
            return text
        parts: list[bytes] = []
        at = 0
        for start, end, generic, kind, secret in _settle(hits + inner):
            parts.append(data[at:start])
            parts.append(self.placeholder(kind, secret).encode())
            if generic is not None:  # (the JSON text's own walk counted its findings)
                self.counts[kind] += 1
                if budget.collect is not None:
                    budget.collect.append((kind, secret))
            at = end
        parts.append(data[at:])
        return _decode(b"".join(parts))

    def _inner_hits(self, text: str, data: bytes, budget: Budget) -> list[Hit]:
        """A string that is JSON text (a tool's output, an API answer kept as text, an
        escaped config inside it) walked as the structure it holds: a name/value pair, a
        value under a secret-named key, a key, as anywhere else. What the walk finds is
        replaced wherever the text spells it (as it is, or JSON-escaped, once or twice)."""
        try:
            parsed = orjson.loads(data)
        except orjson.JSONDecodeError:
            return []
        if not isinstance(parsed, dict | list):
            return []
        allowed = self.possible(data)
        if not allowed:
            return []
        outer, budget.collect = budget.collect, []
        try:
            self._value(parsed, allowed, None, budget)
            found = budget.collect
        finally:
            budget.collect = outer
        if outer is not None:
            outer.extend(found)
        hits: list[Hit] = []
        for kind, secret in dict.fromkeys(found):
            spelled = _encode(secret)
            forms = {spelled}
            for _ in range(2):
                spelled = orjson.dumps(_decode(spelled))[1:-1]
                forms.add(spelled)
            for form in forms:
                at = data.find(form)
                while at >= 0:
                    budget.matched()
                    hits.append((at, at + len(form), None, kind, secret))
                    at = data.find(form, at + len(form))
        return hits

    def _named_hits(
        self, context: tuple[str, Sequence[int]], data: bytes, budget: Budget
    ) -> list[Hit]:
        """The findings in `data` of the rules its key's name picks, with the name before
        it as a JSON member and as an assignment: `"name": "data"` and `name="data"`."""
        name, indexes = context
        named = _encode(name)
        first = len(named) + 5
        second = first + len(data) + 2 + len(named) + 2
        text = b'"' + named + b'": "' + data + b'"\n' + named + b'="' + data + b'"'
        hits = []
        for start, end, generic, kind, secret in self._hits(text, indexes, budget):
            for offset in (first, second):
                inside_start, inside_end = max(start, offset), min(end, offset + len(data))
                if inside_start < inside_end:  # the part of the match that is the value's
                    hits.append((inside_start - offset, inside_end - offset, generic, kind, secret))
        return hits

    def data(self, data: bytes) -> bytes:
        """File contents (a blob): redacted as text when they are UTF-8; bytes that are
        not (binaries) are stored as they are, unreadable to every rule here."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return data
        redacted = self.text(text)
        return data if redacted is text else redacted.encode("utf-8")


_BETWEEN_STRINGS = re.compile(rb'"\s*,\s*"')
"""Where one string of a JSON list ends and the next begins (whatever the spacing)."""


def _looks_like_json(text: str) -> bool:
    """An object or an array written as text (what `_inner_hits` walks)."""
    if len(text) < MIN_TEXT:
        return False
    first, last = text.lstrip()[:1], text.rstrip()[-1:]
    return (first, last) in (("{", "}"), ("[", "]"))


def _settle(hits: list[Hit]) -> list[Hit]:
    """Non-overlapping, in order: where two overlap, a specific rule's over a generic
    one's (a JSON text's walk's first: it saw the structure), then the earlier, then the
    longer."""
    if not hits:
        return []
    hits.sort(key=lambda hit: (hit[2] is not None, bool(hit[2]), hit[0], hit[0] - hit[1]))
    kept: list[Hit] = []
    for hit in hits:
        if all(hit[1] <= other[0] or hit[0] >= other[1] for other in kept):
            kept.append(hit)
    kept.sort(key=lambda hit: hit[0])
    return kept
