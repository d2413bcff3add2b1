"""A hit's snippet: a window of its text around the first match, and where each match is
in it (`[start, end)` in characters, that is Unicode code points, of the snippet).

Matching is the query's own: the same tokens (`query.TOKEN`) the backends indexed, so the
highlights are the words the index matched, whichever backend found the hit."""

from __future__ import annotations

from restore.search.query import TOKEN, Query, Term

BEFORE = 60
"""Characters of context kept before the first match."""
WIDTH = 200
"""Characters of text a snippet shows at most (plus an ellipsis at each cut end)."""
ELLIPSIS = "…"


def matches(text: str, terms: tuple[Term, ...]) -> list[tuple[int, int]]:
    """Every span of `text` a term matches, in order, not overlapping."""
    tokens = [(m.start(), m.end(), m.group().lower()) for m in TOKEN.finditer(text)]
    spans: list[tuple[int, int]] = []
    for term in terms:
        n = len(term.words)
        for at in range(len(tokens) - n + 1):
            if all(
                tokens[at + k][2].startswith(word)
                if term.prefix and k == n - 1
                else tokens[at + k][2] == word
                for k, word in enumerate(term.words)
            ):
                spans.append((tokens[at][0], tokens[at + n - 1][1]))
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


def snippet(text: str, query: Query) -> tuple[str, list[list[int]]]:
    """(snippet, highlights) of `text` for `query`'s words (not its excluded ones)."""
    spans = matches(text, query.positive)
    first = spans[0][0] if spans else 0
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
    highlights = [[a + shift, min(b, end) + shift] for a, b in spans if a >= start and a < end]
    return lead + window + (ELLIPSIS if end < len(text) else ""), highlights
