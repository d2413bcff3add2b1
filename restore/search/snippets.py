"""A hit's snippet: a window of its text around the first match, and where each match is
in it (`[start, end)` in characters, that is Unicode code points, of the snippet).

Matching is the query's own: the same tokens (`query.TOKEN`) the backends indexed, so the
highlights are the words the index matched, whichever backend found the hit.

Bounded in cost, because a page is up to 200 hits of up to 100,000 characters each and a
query up to 16 terms: cut into tokens and compared term by term in Python, one 8-hit page
took 10-14 s (issue 34). Here a term is one regular expression over the lowered text (its
words separated by what is not a word, at word boundaries: exactly a run of consecutive
tokens), so scanning runs in C; the first match is found by `str.find` of each term's
first word, a candidate verified by its expression, at most `MAX_CANDIDATES` candidates a
hit (a text made of near misses costs no more than that: the snippet then starts at the
best match found so far, or at the text's start); the highlights are looked for only in
the window shown. A page's snippets have a time budget (`PAGE_BUDGET`): past it, the rest
show their text's start without highlights and the page says `partial`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from functools import lru_cache

from restore.search.cancel import Cancel
from restore.search.query import Query, Term

BEFORE = 60
"""Characters of context kept before the first match."""
WIDTH = 200
"""Characters of text a snippet shows at most (plus an ellipsis at each cut end)."""
ELLIPSIS = "…"
MAX_CANDIDATES = 256
"""Places a hit's first match is looked for at (where a term's first word occurs, at a
word boundary or not), whatever its length: the bound on a hostile text's cost (each is a
step of Python holding the interpreter the recording threads wait for: 256 cost ~0.3 ms,
2,048 cost 2-3 ms a hit, half a second a 200-hit page; bench/search_load.py)."""
SPAN_REACH = 4096
"""Characters past the window a match that starts in it may run to (a phrase whose words
are far apart): the highlights' scan ends there, not at the end of the text."""
PAGE_BUDGET = 0.25
"""Seconds a page's snippets may take; past them the rest are cut without looking."""

Shown = tuple[str, list[list[int]]]


@lru_cache(maxsize=256)
def _expression(term: Term) -> re.Pattern[str]:
    """The term as a pattern over lowered text: its words at word boundaries, separated by
    non-word characters (consecutive tokens), the last one extended to its token's end
    when it is a prefix. The boundary before the first word is a lookbehind placed after
    it, so the pattern starts with a literal and the scan for it is fast."""
    first = re.escape(term.words[0])
    rest = "".join(r"[\W_]+" + re.escape(word) for word in term.words[1:])
    tail = r"[^\W_]*" if term.prefix else ""
    return re.compile(rf"{first}(?<![^\W_]{first}){rest}{tail}(?![^\W_])")


def _lowered(text: str) -> str:
    """`text` lowered character for character, so offsets stay the text's (`str.lower`
    turns U+0130 into two characters: such a text keeps those as they are)."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(low if len(low := c.lower()) == 1 else c for c in text)


def _first(lowered: str, terms: Sequence[Term]) -> int | None:
    """Where the first match of any term starts (None: none found within the bound)."""
    best: int | None = None
    examined = 0
    for term in terms:
        expression, word = _expression(term), term.words[0]
        at = lowered.find(word, 0, len(lowered) if best is None else best)
        while at != -1:
            examined += 1
            if examined > MAX_CANDIDATES:
                return best
            if expression.match(lowered, at):
                best = at
                break
            at = lowered.find(word, at + 1, len(lowered) if best is None else best)
    return best


def matches(text: str, terms: tuple[Term, ...]) -> list[tuple[int, int]]:
    """Every span of `text` a term matches, in order, not overlapping (the shortest of
    those starting at one place)."""
    return _spans(_lowered(text), terms, 0, len(text))


def _spans(lowered: str, terms: Sequence[Term], start: int, end: int) -> list[tuple[int, int]]:
    """The spans starting in [start, end), in order, not overlapping."""
    spans: list[tuple[int, int]] = []
    reach = min(len(lowered), end + SPAN_REACH)
    for term in terms:
        for found in _expression(term).finditer(lowered, start, reach):
            if found.start() >= end:
                break
            spans.append(found.span())
    spans.sort()
    kept: list[tuple[int, int]] = []
    for span in spans:
        if not kept or span[0] >= kept[-1][1]:
            kept.append(span)
    return kept


_CONTROLS = dict.fromkeys([*range(0x20), *range(0x7F, 0xA0)], " ")
"""Unicode's control characters (category Cc: these 65, fixed by its stability policy)."""


def _plain(text: str) -> str:
    """Control characters (newlines, tabs, escapes) as spaces: one line, same offsets. One
    `translate`, not a Python test per character: a search runs it for every hit beside
    the recording threads, holding the GIL."""
    return text.translate(_CONTROLS)


def snippet(text: str, query: Query) -> Shown:
    """(snippet, highlights) of `text` for `query`'s words (not its excluded ones)."""
    lowered = _lowered(text)
    first = _first(lowered, query.positive)
    return _window(text, lowered, query, 0 if first is None else first, look=True)


def plain_snippet(text: str) -> Shown:
    """The text's start, no highlights: a hit past its page's budget."""
    return _window(text, text, None, 0, look=False)


def _window(text: str, lowered: str, query: Query | None, first: int, *, look: bool) -> Shown:
    start = max(0, first - BEFORE)
    if start > 0:  # begin at a word: the space after the cut
        space = text.find(" ", start, first)
        start = space + 1 if space != -1 else start
    end = min(len(text), start + WIDTH)
    if end < len(text):
        space = text.rfind(" ", max(first + 1, start), end)
        end = space if space > first else end
    window = _plain(text[start:end])
    lead = ELLIPSIS if start > 0 else ""
    shift = len(lead) - start
    spans = _spans(lowered, query.positive, start, end) if look and query is not None else []
    highlights = [[a + shift, min(b, end) + shift] for a, b in spans]
    return lead + window + (ELLIPSIS if end < len(text) else ""), highlights


def snippets(
    texts: Sequence[str],
    query: Query,
    *,
    budget: float | None = PAGE_BUDGET,
    cancel: Cancel | None = None,
) -> tuple[list[Shown], bool]:
    """Each text's snippet, in order, and whether the budget ran out (`partial`: the rest
    were cut from their start, without highlights). Stops at a cancel (`Cancelled`)."""
    deadline = None if budget is None else time.monotonic() + budget
    shown: list[Shown] = []
    out_of_time = False
    for text in texts:
        if cancel is not None:
            cancel.check()
        if not out_of_time and deadline is not None and time.monotonic() >= deadline:
            out_of_time = True
        shown.append(plain_snippet(text) if out_of_time else snippet(text, query))
    return shown, out_of_time
