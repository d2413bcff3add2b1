"""The search query language, parsed once and compiled for each backend.

`words` (all must match), `"a phrase"`, `prefix*`, `-word` (or `-"a phrase"`);
punctuation standing alone (`a & b`) is no term. Words are runs of letters and digits
(`TOKEN`): `foo.py` is the phrase `foo py`, exactly as SQLite's unicode61 tokenizer and
PostgreSQL's `simple` configuration (over text with punctuation made blank, migration
004) split the text they index. The compiled queries hold nothing but those tokens,
quoted, and operators: nothing a user types is FTS5 or tsquery syntax.
Malformed input is InvalidParams naming the problem, never a database error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from protocol.errors import ErrorKind, ProtocolError

TOKEN = re.compile(r"[^\W_]+")
"""A word: letters and digits (Unicode), as both backends' tokenizers cut text."""
MAX_QUERY_BYTES = 1024
MAX_TERMS = 16
MIN_PREFIX = 2
"""A one-letter prefix matches most of the index; two keeps a prefix query an index walk."""


@dataclass(frozen=True)
class Term:
    """One term: its words in order (more than one: a phrase), the last one a prefix?"""

    words: tuple[str, ...]
    prefix: bool = False
    negated: bool = False


@dataclass(frozen=True)
class Query:
    text: str
    terms: tuple[Term, ...]

    @property
    def positive(self) -> tuple[Term, ...]:
        return tuple(term for term in self.terms if not term.negated)

    def fts5(self) -> str:
        """The FTS5 MATCH expression: `("a b" AND "c" *) NOT "d"`."""

        def phrase(term: Term) -> str:
            return '"' + " ".join(term.words) + '"' + (" *" if term.prefix else "")

        found = "(" + " AND ".join(phrase(term) for term in self.positive) + ")"
        return found + "".join(f" NOT {phrase(t)}" for t in self.terms if t.negated)

    def tsquery(self) -> str:
        """The PostgreSQL `to_tsquery('simple', …)` text: `(a <-> b) & c:* & !(d)`."""

        def phrase(term: Term) -> str:
            words = [f"'{word}'" for word in term.words]
            if term.prefix:
                words[-1] += ":*"
            return "(" + " <-> ".join(words) + ")"

        return " & ".join(("!" if term.negated else "") + phrase(term) for term in self.terms)


def invalid(problem: str) -> ProtocolError:
    return ProtocolError(ErrorKind.INVALID_PARAMS, f"query: {problem}", field="query")


def parse(text: str) -> Query:
    """The query, or InvalidParams saying what is wrong with it."""
    if "\0" in text:
        raise invalid("contains NUL")
    if len(text.encode("utf-8", "surrogatepass")) > MAX_QUERY_BYTES:
        raise invalid(f"longer than {MAX_QUERY_BYTES} bytes")
    terms: list[Term] = []
    skipped: list[str] = []  # punctuation between words ("a & b"): nothing to find
    at, length = 0, len(text)
    while at < length:
        if text[at].isspace():
            at += 1
            continue
        negated = text[at] == "-"
        if negated:
            at += 1
            if at == length or text[at].isspace():
                raise invalid("'-' must be followed by a word or a phrase")
        if text[at] == '"':
            close = text.find('"', at + 1)
            if close == -1:
                raise invalid("unbalanced quote")
            raw, at, quoted = text[at + 1 : close], close + 1, True
            if at < length and text[at] == "*":
                raise invalid("'*' ends a word, not a phrase")
        else:
            end = at
            while end < length and not text[end].isspace() and text[end] != '"':
                end += 1
            raw, at, quoted = text[at:end], end, False
        prefix = not quoted and raw.endswith("*")
        if prefix:
            raw = raw[:-1]
            if not raw:
                raise invalid("'*' alone: it ends a prefix, as in pars*")
        if "*" in raw:
            raise invalid(f"'*' only ends a prefix: {raw}*")
        words = tuple(TOKEN.findall(raw.lower()))
        if not words and not quoted and not negated and not prefix:
            skipped.append(raw)
            continue
        if not words:
            shown = f'"{raw}"' if quoted else raw or "-"
            raise invalid(f"{shown} has no letters or digits to search for")
        if prefix and len(words[-1]) < MIN_PREFIX:
            raise invalid(f"a prefix needs at least {MIN_PREFIX} letters: {raw}*")
        terms.append(Term(words, prefix, negated))
        if len(terms) > MAX_TERMS:
            raise invalid(f"more than {MAX_TERMS} terms")
    if not terms:
        problem = f"{skipped[0]} has no letters or digits to search for" if skipped else "empty"
        raise invalid(problem)
    if all(term.negated for term in terms):
        raise invalid(
            "only excluded terms: -word leaves out the records that have it; say what to "
            "find as well (deploy -staging)"
        )
    return Query(text, tuple(terms))
