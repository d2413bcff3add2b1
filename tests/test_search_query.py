"""The search query language (restore/search/query.py): what each syntax compiles to for
SQLite FTS5 and PostgreSQL, that user text is never operator syntax there, and that every
malformed query is InvalidParams naming its problem. The compiled strings are also run
against real SQLite FTS5 here (a compiled query that FTS5 rejected would be a database
error at a user); PostgreSQL runs them in tests/test_search.py."""

from __future__ import annotations

import sqlite3

import pytest

from protocol.errors import ErrorKind, ProtocolError
from restore.search.query import MAX_QUERY_BYTES, MAX_TERMS, parse
from restore.search.snippets import snippet


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
