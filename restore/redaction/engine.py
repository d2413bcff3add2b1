"""Finding secrets in text and replacing each with its placeholder,
`[secret:<kind>:<fingerprint>]`.

An item (a source line, a record) is first looked at whole, as the JSON it is: one
Hyperscan pass of every rule's pattern at once over its raw bytes (restore/redaction/
prefilter.py: a superset of what the rules match in any of its strings, ~1 µs a line)
says which rules could match anywhere in it; most items: none, and nothing else runs.
Then each string of the item: a keyword prefilter (pyahocorasick's Aho-Corasick automaton
over the lower-cased text: every rule's keywords found in one pass, 4-5x faster than one
regex of the keywords folded into a trie) picks the rules whose keywords occur, as
gitleaks itself does, and of those the ones the item's pass allowed run. Without the
`hyperscan` package (a platform it has no wheel for) the keywords alone decide, as
before: the same findings, slower. A match is checked
as gitleaks checks it (the secret's entropy, the rule's and the global allowlists and
stopwords); where two rules match overlapping text the specific one wins over a generic
one (a key recognised by its own shape over a key recognised by the name it is given).
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

from restore.redaction.rules import Allow, Rule

try:
    from restore.redaction.prefilter import Prefilter
except ImportError:  # no hyperscan wheel for this platform: the keywords alone decide
    Prefilter = None  # type: ignore[assignment,misc]

_BUILDING = threading.Lock()


def _after_fork() -> None:
    """A fork while another thread built a pass would leave the child's lock held."""
    global _BUILDING
    _BUILDING = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)

MIN_TEXT = 8
"""Texts shorter than this are never looked at: no rule's secret fits in fewer."""
PLACEHOLDER = re.compile(r"\[secret:([a-z0-9-]+):([0-9a-f]{4})\]")
STRUCTURAL = frozenset(
    {
        "v", "seq", "ts", "type", "sessionId", "id", "threadId", "operationId",
        "parentOperationId", "turnId", "toolCallId", "beforeSha", "afterSha", "sha",
        "sha256", "role", "status", "state", "effect", "event", "source", "reason",
        "targetSessionId", "resumedFrom", "scope", "kind", "sessionUpdate",
        # the same in the agents' transcripts an import reads (Claude Code, Codex, Gemini)
        "timestamp", "uuid", "parentUuid", "leafUuid", "requestId", "messageId",
        "session_id", "thread_id", "turn_id", "call_id", "tool_use_id", "tool_call_id",
        "created_at", "createdAt", "updatedAt", "startTime", "lastUpdated",
    }
)  # fmt: skip
"""Keys whose values are ids, hashes, timestamps and enumerations (sessiond's, and the
agents' transcripts'): never a secret, and what the stores and subsystems key on."""


@dataclass(frozen=True)
class Found:
    start: int
    end: int
    kind: str
    secret: str


def entropy(text: str) -> float:
    """Shannon entropy in bits per character (gitleaks' measure)."""
    size = len(text)
    return -sum(n / size * math.log2(n / size) for n in Counter(text).values()) if size else 0.0


class Redactor:
    """Secrets found and replaced, with counts per kind (what `doctor --redact` reports).

    `key` keys the fingerprint (HMAC-SHA256, 4 hex digits): the same secret gets the
    same placeholder in every thread of a home, without the placeholder telling it."""

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
        self._every = frozenset(range(len(self.rules)))
        self._keywords: ahocorasick.Automaton | None = None
        if self._by_keyword:
            self._keywords = ahocorasick.Automaton()
            for word in self._by_keyword:
                self._keywords.add_word(word, word)
            self._keywords.make_automaton()
        self._prefilter: Prefilter | None = None
        self.use_prefilter = Prefilter is not None
        """Whether items are looked at whole by Hyperscan first (off: the keywords alone
        decide, as without the package: the same findings, a differential test says)."""
        self.rebuild: tuple[Callable[..., Redactor | None], tuple[Any, ...]] | None = None
        """How another process makes the same redactor (an import's parse workers): the
        rules are compiled there once, from the cache, not shipped with every file."""
        self._closure = {
            word: sorted(
                {*self._always}.union(
                    *(indexes for other, indexes in self._by_keyword.items()
                      if word.startswith(other))
                )
            )
            for word in self._by_keyword
        }  # fmt: skip

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
        indexes = self.candidates(text)
        if allowed is not None:
            indexes = [index for index in indexes if index in allowed]
        if not indexes:
            return []
        found: list[tuple[int, int, bool, Found]] = []
        for index in indexes:
            rule = self.rules[index]
            for match in rule.pattern.finditer(text):
                hit = self._check(rule, match, text)
                if hit is not None:
                    found.append((hit.start, -(hit.end - hit.start), rule.generic, hit))
        if not found:
            return []
        found.sort(key=lambda entry: (entry[2], entry[0], entry[1]))  # specific rules first
        kept: list[Found] = []
        for _, _, _, hit in found:
            if all(hit.end <= other.start or hit.start >= other.end for other in kept):
                kept.append(hit)
        kept.sort(key=lambda hit: hit.start)
        return kept

    def unsettled(self, text: str) -> int:
        """The earliest offset of `text`, a stream's text so far with more to come, from
        which a secret may still be in progress (len(text): none). That is the last word
        (a token, or a keyword, cut short), and for each rule whose keyword occurs (as
        `candidates`) a match that reaches the end (it may grow) or that more text could
        complete (a partial match: `Rule.partial`), and then any match that straddles the
        offset. Text before it can be stored on its own: no secret of the rules' shapes
        is cut there, nor cut from the name that makes it one (`api_key = ...`)."""
        end = len(text)
        cut = max(text.rfind(space) for space in " \n\t\r") + 1  # (a token has none)
        whole: list[tuple[int, int]] = []
        for index in self.candidates(text):
            for match in self.rules[index].partial.finditer(text, partial=True):
                start, stop = match.span()
                if match.partial or stop >= end:
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

    def _check(self, rule: Rule, match: re.Match[str], text: str) -> Found | None:
        group = rule.secret_group
        if group == 0 and match.re.groups:
            group = next((g for g in range(1, match.re.groups + 1) if match.group(g)), 0)
        secret = match.group(group) if group <= match.re.groups else match.group()
        if not secret or PLACEHOLDER.fullmatch(secret):
            return None
        start, end = match.span(group)
        if not self.strict:
            if rule.entropy and entropy(secret) <= rule.entropy:
                return None
            if rule.require_digit and not any(c.isdigit() for c in secret):
                return None
        if self._allowed(self._global, secret, match, text):
            return None
        if any(self._allowed(allow, secret, match, text) for allow in rule.allows):
            return None
        if any(pattern.search(secret) for pattern in self._allow):
            return None
        return Found(start, end, rule.kind, secret)

    def _allowed(self, allow: Allow, secret: str, match: re.Match[str], text: str) -> bool:
        if allow.target == "match":
            target = match.group()
        elif allow.target == "line":
            begin = text.rfind("\n", 0, match.start()) + 1
            finish = text.find("\n", match.end())
            target = text[begin : finish if finish >= 0 else len(text)]
        else:
            target = secret
        if any(pattern.search(target) for pattern in allow.regexes):
            return True
        if self.strict or not allow.stopwords:
            return False
        lowered = secret.lower()
        return any(word in lowered for word in allow.stopwords)

    # --- replacing -------------------------------------------------------------------------

    def fingerprint(self, secret: str) -> str:
        digest = hmac.new(self.key, secret.encode("utf-8", "surrogatepass"), hashlib.sha256)
        return digest.hexdigest()[:4]

    def placeholder(self, kind: str, secret: str) -> str:
        return f"[secret:{kind}:{self.fingerprint(secret)}]"

    def text(self, text: str, allowed: Collection[int] | None = None) -> str:
        """`text` with every secret replaced by its placeholder."""
        if allowed is None and len(text) >= MIN_TEXT:
            try:
                allowed = self.possible(orjson.dumps(text))
            except orjson.JSONEncodeError:  # a lone surrogate: the keywords alone decide
                allowed = None
        found = self.find(text, allowed)
        if not found:
            return text
        parts: list[str] = []
        at = 0
        for hit in found:
            parts.append(text[at : hit.start])
            parts.append(self.placeholder(hit.kind, hit.secret))
            self.counts[hit.kind] += 1
            at = hit.end
        parts.append(text[at:])
        return "".join(parts)

    def value(self, value: Any, allowed: Collection[int] | None = None) -> Any:
        """A JSON value with its strings redacted; the same object when nothing changed
        (most items: no copy)."""
        if allowed is None:
            try:
                allowed = self.possible(orjson.dumps(value))
            except orjson.JSONEncodeError:  # a lone surrogate: the keywords alone decide
                allowed = self._every
            if not allowed:
                return value
        return self._value(value, allowed)

    def _value(self, value: Any, allowed: Collection[int]) -> Any:
        if isinstance(value, str):
            return self.text(value, allowed) if len(value) >= MIN_TEXT else value
        if isinstance(value, dict):
            return self._walk(value, allowed)
        if isinstance(value, list):
            changed = [self._value(entry, allowed) for entry in value]
            return value if all(a is b for a, b in zip(changed, value, strict=True)) else changed
        return value

    def possible(self, raw: bytes) -> Collection[int]:
        """The rules that could match in any string of `raw`, a JSON text (an item's
        encoding, a source line): Hyperscan's pass, or, without it, every rule if any
        keyword occurs (no rule here matches without one of its keywords; a text with JSON
        escapes that could spell a keyword, `\\u` or `\\/`, is looked at)."""
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

    def item(self, item: dict[str, Any], raw: str | bytes | None = None) -> dict[str, Any]:
        """An item (or any JSON object) with every string but sessiond's own ids, hashes
        and enumerations (`STRUCTURAL`) redacted; keys are left as they are. `raw`: the
        JSON it was decoded from, if at hand (else it is encoded for the check)."""
        if raw is None:
            raw = orjson.dumps(item)
        elif isinstance(raw, str):
            raw = raw.encode("utf-8", "surrogatepass")
        allowed = self.possible(raw)
        return self._walk(item, allowed) if allowed else item

    def _walk(self, item: dict[str, Any], allowed: Collection[int]) -> dict[str, Any]:
        result: dict[str, Any] | None = None
        for key, value in item.items():
            if key in STRUCTURAL or value is None or isinstance(value, bool | int | float):
                continue
            new = self._value(value, allowed)
            if new is not value:
                if result is None:
                    result = dict(item)
                result[key] = new
        return item if result is None else result

    def data(self, data: bytes) -> bytes:
        """File contents (a blob): redacted as text when they are UTF-8; bytes that are
        not (binaries) are stored as they are, unreadable to every rule here."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return data
        redacted = self.text(text)
        return data if redacted is text else redacted.encode("utf-8")
