"""The search query language (restore/search/query.py): what each syntax compiles to for
SQLite FTS5 and PostgreSQL, that user text is never operator syntax there, and that every
malformed query is InvalidParams naming its problem. The compiled strings are also run
against real SQLite FTS5 here (a compiled query that FTS5 rejected would be a database
error at a user); PostgreSQL runs them in tests/test_search.py."""

from __future__ import annotations

import random
import sqlite3

import pytest

from protocol.errors import ErrorKind, ProtocolError
from restore.search.query import MAX_QUERY_BYTES, MAX_TERMS, TOKEN, Term, parse
from restore.search.snippets import WIDTH, matches, snippet, snippets


@pytest.mark.parametrize(
    ("text", "fts5", "tsquery"),
    [
        ("parser", '("parser")', "('parser')"),
        ("Parser  Error", '("parser" AND "error")', "('parser') & ('error')"),
        ('"unbalanced quote"', '("unbalanced quote")', "('unbalanced' <-> 'quote')"),
        ("pars*", '("pars" *)', "('pars':*)"),
        ("parser -docs", '("parser") NOT "docs"', "('parser') & !('docs')"),
        ('x -"a b"', '("x") NOT "a b"', "('x') & !('a' <-> 'b')"),
        ("src/foo.py", '("src foo py")', "('src' <-> 'foo' <-> 'py')"),
        ("foo.ba*", '("foo ba" *)', "('foo' <-> 'ba':*)"),
        ("café Ünïcode", '("café" AND "ünïcode")', "('café') & ('ünïcode')"),
    ],
)
def test_each_syntax_compiles_for_both_backends(text: str, fts5: str, tsquery: str) -> None:
    query = parse(text)
    assert query.fts5() == fts5
    assert query.tsquery() == tsquery


@pytest.mark.parametrize(
    "text",
    [
        "NEAR(a b) OR c AND d NOT e",
        'col:value ^start "x" {a b}(c)',
        "a' OR '1'='1",
        "a & b | !c <-> dd:*",
    ],
)
def test_fts_and_tsquery_syntax_in_user_text_is_only_words(text: str) -> None:
    """FTS5's and tsquery's operators typed by a user are words to find: the compiled
    query holds only quoted tokens, and FTS5 accepts it."""
    query = parse(text)
    words = [w for term in query.terms for w in term.words]
    assert all(w.isalnum() for w in words)
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(text, prefix='2 3')")
    conn.execute("INSERT INTO t VALUES ('near a b or c and d not e col value start x')")
    conn.execute("SELECT count(*) FROM t WHERE t MATCH ?", (query.fts5(),)).fetchone()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "empty"),
        ("   \t ", "empty"),
        ('"unclosed phrase', "unbalanced quote"),
        ('a "b', "unbalanced quote"),
        ("-", "'-' must be followed"),
        ("a - b", "'-' must be followed"),
        ("*", "'*' alone"),
        ("a *", "'*' alone"),
        ("fo*o", "'*' only ends a prefix"),
        ('"a b"*', "'*' ends a word, not a phrase"),
        ("p*", "a prefix needs at least 2"),
        ("...", "has no letters or digits"),
        ('""', "has no letters or digits"),
        ("-secret", "only excluded terms"),
        ("a\0b", "contains NUL"),
        ("x" * (MAX_QUERY_BYTES + 1), f"longer than {MAX_QUERY_BYTES} bytes"),
        ("é" * (MAX_QUERY_BYTES // 2 + 1), f"longer than {MAX_QUERY_BYTES} bytes"),
        ("x" * (1 << 20), f"longer than {MAX_QUERY_BYTES} bytes"),
        (" ".join(["w"] * (MAX_TERMS + 1)), f"more than {MAX_TERMS} terms"),
    ],
)
def test_malformed_queries_are_invalid_params_naming_the_problem(text: str, problem: str) -> None:
    with pytest.raises(ProtocolError) as refused:
        parse(text)
    assert refused.value.kind is ErrorKind.INVALID_PARAMS
    assert problem in refused.value.message
    assert refused.value.details["field"] == "query"


def test_highlights_are_the_matched_words_as_offsets_into_the_snippet() -> None:
    text = "before " * 30 + "the Parser failed in src/foo.py, parsing\nagain" + " after" * 60
    shown, highlights = snippet(text, parse('pars* "foo.py" -after'))
    assert shown.startswith("…") and shown.endswith("…")
    assert [shown[a:b] for a, b in highlights] == ["Parser", "foo.py", "parsing"]
    assert "\n" not in shown  # one line: control characters are spaces, offsets unchanged


def test_a_short_text_is_its_own_snippet() -> None:
    shown, highlights = snippet("fix the parser", parse("parser"))
    assert (shown, highlights) == ("fix the parser", [[8, 14]])


def _reference_matches(text: str, terms: tuple[Term, ...]) -> list[tuple[int, int]]:
    """What a match is, written as plainly as possible: the text cut into tokens, each
    term compared at every token (the implementation before issue 34, O(tokens x terms))."""
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


def test_matches_are_the_tokens_the_query_names_in_any_text() -> None:
    """The scanning matcher finds exactly what comparing token by token finds, over texts
    of words, near misses, punctuation, underscores, digits, case and other scripts."""
    pieces = ["par", "parser", "Parser", "PARSE", "foo", "py", "foo.py", "a", "b", "ab",
              "café", "CAFÉ", "über", "Ünïcode", "x_y", "_", "9", "42a", "ǅ", "ﬁx", "ΣΟΦΙΑ",
              " ", "  ", ".", "/", "\n", "-", "é", "İstanbul"]  # fmt: skip
    queries = ["par*", "parser", '"foo py"', "a b", "café", "ünïcode", "ab* foo", "x y",
               '"a a"', "42a", "fix", "σοφια", "pa* -b", "istanbul", "9 par"]  # fmt: skip
    chooser = random.Random(34)
    for _ in range(400):
        text = "".join(chooser.choice(pieces) for _ in range(chooser.randint(0, 40)))
        for raw in queries:
            terms = parse(raw).positive
            assert matches(text, terms) == _reference_matches(text, terms), (text, raw)


def test_a_texts_snippet_costs_a_bounded_scan_however_hostile() -> None:
    """100,000 characters of near misses for 16 terms: the first match is looked for at a
    bounded number of places, and the snippet still shows a window of the text."""
    text = ("alphab bravox " * 8000)[:99_980] + " alpha bravo"
    query = parse(" ".join(["alpha", "bravo", *(f"w{n}" for n in range(14))]))
    shown, highlights = snippet(text, query)
    assert len(shown) <= WIDTH + 2 and highlights == []  # the matches are past the bound
    near = "alphab " * 10 + "alpha bravo"
    shown, highlights = snippet(near, query)
    assert [shown[a:b] for a, b in highlights] == ["alpha", "bravo"]


def test_a_page_past_its_budget_shows_the_rest_cut_without_highlights() -> None:
    query = parse("needle")
    texts = ["hay " * 30 + "needle"] * 3
    shown, partial = snippets(texts, query, budget=0.0)
    assert partial and all(highlights == [] for _, highlights in shown)
    shown, partial = snippets(texts, query, budget=None)
    assert not partial and all(len(highlights) == 1 for _, highlights in shown)
