"""Redaction's Hyperscan pass over a whole item (restore/redaction/prefilter.py) rules out
only what cannot match: for every rule whose pattern RE2 (what runs the rules) or Python's
`re` (what the pass is derived from) finds in a string (its
keyword there, as the engine asks), the pass over any JSON spelling of a record holding
that string reports the rule — the corpus test's secret shapes and this repository's own
lines, spelled by every encoder an agent may use (raw UTF-8, ASCII with `\\u` escapes,
`\\/`, Go's `\\u003c`, everything escaped) and made hostile (quotes, backslashes, controls,
non-ASCII letters, digits and spaces Python's classes take). And the engine with the pass
finds exactly what it finds without it, on the same texts."""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.redaction import REPO, corpus_lines
from restore.redaction import prefilter
from restore.redaction.engine import Redactor
from restore.redaction.settings import RedactionSettings, redactor_for
from tests.security.test_redaction import SECRETS

KEY = b"prefilter-test-key-0123456789abc"


@pytest.fixture(scope="module")
def redactors() -> dict[str, Redactor]:
    made = {}
    for mode in ("default", "strict"):
        redactor = redactor_for(RedactionSettings(mode), KEY)
        assert redactor is not None
        made[mode] = redactor
    return made


def python_rules(redactor: Redactor, text: str) -> set[int]:
    """The rules the engine would run on `text` and whose pattern finds a match there: as
    RE2 runs it (the engine), and as Python's `re` reads it (what the pass is derived from;
    the two differ in `\\s` and `\\S`, and the pass must take both)."""
    lowered = text.lower()
    data = text.encode("utf-8", "surrogatepass")
    return {
        index
        for index, rule in enumerate(redactor.rules)
        if (not rule.keywords or any(word in lowered for word in rule.keywords))
        and (rule.engine.search(data) or rule.pattern.search(text))
    }


def spellings(record: dict[str, Any]) -> Iterator[tuple[str, bytes]]:
    """The same record as each JSON encoder may write it."""
    yield "orjson", orjson.dumps(record)
    yield "ascii", json.dumps(record).encode()
    yield "utf-8", json.dumps(record, ensure_ascii=False).encode()
    yield "slashes", json.dumps(record, ensure_ascii=False).replace("/", "\\/").encode()
    go = json.dumps(record, ensure_ascii=False)
    for char, escape in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e")):
        go = go.replace(char, escape)
    yield "go", go.encode()
    yield "escaped", re.sub(r'"(?:[^"\\]|\\.)*"', _escape_all, json.dumps(record)).encode()


def _escape_all(token: re.Match[str]) -> str:
    """A JSON string with every character as `\\uXXXX` (astral ones as surrogate pairs)."""
    units = json.loads(token.group()).encode("utf-16-be")
    return (
        '"' + "".join(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2)) + '"'
    )


HOSTILE = ['"', "\\", "/", "\n", "\t", "\x1b", "\x00", "é", "\u212a", "\u017f", "\u0130",
           "\u0131", "😀", "\u3000", "٣", "\x1c", "\xa0", "\ufffd", "'", "`", " "]  # fmt: skip
"""Characters whose spelling differs, or which Python's classes or case folding take."""


def check(redactor: Redactor, text: str) -> None:
    expected = python_rules(redactor, text)
    record = {"type": "message", "id": "x", "content": [{"text": text, "n": 1}], "k": [text[:9]]}
    for name, raw in spellings(record):
        assert orjson.loads(raw) == record, name
        found = redactor.possible(raw)
        missing = {redactor.rules[i].kind for i in expected - set(found)}
        assert not missing, (name, text, missing)


def test_every_planted_shape_is_found_in_every_spelling_and_made_hostile(
    redactors: dict[str, Redactor],
) -> None:
    for mode, redactor in redactors.items():
        assert redactor.use_prefilter
        for kind, (secret, planted) in SECRETS.items():
            assert kind in {redactor.rules[i].kind for i in python_rules(redactor, planted)}
            check(redactor, planted)
            for char in HOSTILE:  # around, inside and instead of parts of the secret
                middle = len(secret) // 2
                for text in (
                    planted.replace(secret, char + secret + char),
                    planted.replace(secret, secret[:middle] + char + secret[middle:]),
                    planted.replace(secret, secret[:middle] + char + secret[middle + 1 :]),
                    planted.replace(" ", char),
                    char.join(planted),
                ):
                    check(redactor, text)
        assert mode


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(
    st.sampled_from([text for _, text in SECRETS.values()]),
    st.sampled_from([secret for secret, _ in SECRETS.values()]),
    st.sampled_from(HOSTILE),
    st.sampled_from(["token", "password=", "Authorization: Bearer ", "://u:", "@h", "key",
                     "s.", "ey", "_", "-", "=", ":", "AKIA", "ghp_", "xoxb-", "sk-"]),
    st.text(max_size=12),
), max_size=8))  # fmt: skip
def test_a_string_made_of_secrets_and_hostile_characters_is_never_ruled_out(
    parts: list[str],
) -> None:
    redactor = redactor_for(RedactionSettings(), KEY)
    assert redactor is not None
    check(redactor, "".join(parts))


def test_this_repositorys_lines_are_never_ruled_out_when_a_rule_matches(
    redactors: dict[str, Redactor],
) -> None:
    lines, _ = corpus_lines([REPO])
    redactor = redactors["strict"]
    matched = 0
    for line in lines:
        if python_rules(redactor, line):
            matched += 1
            check(redactor, line)
    assert matched > 20  # the corpus has shapes (test fixtures, docs' examples)


def findings(redactor: Redactor, records: list[dict[str, Any]]) -> list[Any]:
    redactor.counts.clear()
    out = [redactor.item(record) for record in records]
    return [out, dict(redactor.counts)]


def test_the_engine_finds_the_same_with_the_pass_as_without_it(
    redactors: dict[str, Redactor],
) -> None:
    lines, _ = corpus_lines([REPO])
    records = [{"type": "message", "text": line, "sessionId": "s"} for line in lines]
    records += [{"type": "tool", "output": text, "args": {"cmd": [secret]}}
                for secret, text in SECRETS.values()]  # fmt: skip
    from tests.security.test_redaction_corpus import planted as structured

    # tool I/O as structure: values under secret-named keys, found by name (the pass's
    # `keyed` patterns send the item to that walk, the same as without the pass)
    records += [{"type": "operation", "result": value} for _, _, value in structured()]
    records.append({"text": "\n".join(lines[:2000])})
    for mode, redactor in redactors.items():
        with_pass = findings(redactor, records)
        redactor.use_prefilter = False
        try:
            without = findings(redactor, records)
        finally:
            redactor.use_prefilter = True
        assert with_pass == without, mode
        assert sum(with_pass[1].values()) >= len(SECRETS), with_pass[1]
        for secret, planted in SECRETS.values():  # blobs and plain texts: the same path
            assert secret not in redactor.text(planted)
            assert secret.encode() not in redactor.data(planted.encode())


def test_python_folds_only_these_non_ascii_characters_onto_ascii_letters() -> None:
    """GUARD's four characters are all there are (asked of Python for all of Unicode)."""
    letters = re.compile(r"(?i)[a-z]")
    folded = {cp for cp in range(0x80, 0x110000) if letters.fullmatch(chr(cp))}
    assert folded == set(prefilter.FOLDED_FROM)
    lowered = {cp for cp in range(0x80, 0x110000)
               if any(ord(c) < 0x80 for c in chr(cp).lower())}  # fmt: skip
    assert lowered <= set(prefilter.FOLDED_FROM)  # str.lower(): İ and K
    for cp in folded:
        spelled = orjson.dumps(chr(cp))
        assert redactor_possible_everything(spelled), hex(cp)
        assert redactor_possible_everything(json.dumps(chr(cp)).encode()), hex(cp)


def redactor_possible_everything(raw: bytes) -> bool:
    redactor = redactor_for(RedactionSettings(), KEY)
    assert redactor is not None
    return set(range(len(redactor.rules))) <= set(redactor.possible(raw))


def test_a_users_own_patterns_are_in_the_pass_lookarounds_and_back_references_too() -> None:
    extra = RedactionSettings("default", (("internal-token", r"itk_[0-9a-f]{32}"),
                                          ("odd", r"(?<=id=)(tk)_\1[0-9]{4}(?!x)")))  # fmt: skip
    redactor = redactor_for(extra, KEY)
    assert redactor is not None
    own, odd = len(redactor.rules) - 2, len(redactor.rules) - 1
    secret = "itk_" + "0123456789abcdef" * 2
    assert own in redactor.possible(orjson.dumps({"t": f"use {secret}"}))
    assert own not in redactor.possible(orjson.dumps({"t": "use itk_ nothing"}))
    assert odd in redactor.possible(orjson.dumps({"t": "id=tk_tk1234"}))
    assert odd not in redactor.possible(orjson.dumps({"t": "id=tk_1234"}))
    assert redactor.text(f"use {secret} now, id=tk_tk1234") == (
        f"use {redactor.placeholder('internal-token', secret)} now, "
        f"id={redactor.placeholder('odd', 'tk')}_tk1234"  # the first group is the secret
    )
    for text in ("id=tk_tk1234", "xid=tk_tk1234\n", 'id=tk_tk1234"'):
        check(redactor, text)


def test_the_compiled_database_is_cached_privately_and_a_writable_one_is_not_loaded(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    rules = [(r"abc[0-9]{4}", ("abc",)), (r"[a-f0-9]{40}", ("sgp_",))]
    build: Callable[[], prefilter.Prefilter] = lambda: prefilter.Prefilter(rules)  # noqa: E731
    monkeypatch.setattr(prefilter, "_COMPILED", {})
    first = build()
    assert first.possible(b'{"a":"xabc1234"}') == {0}
    assert first.possible(b'{"a":"' + b"a" * 40 + b'"}') == set()  # no keyword of rule 1
    assert first.possible(b'{"a":"sgp_"}') == {1}
    folder = tmp_path / "sessiond"
    (cached,) = folder.glob("redaction-*.hsdb")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(cached.stat().st_mode) == 0o600
    monkeypatch.setattr(prefilter, "_COMPILED", {})
    cached.write_bytes(b"\n" + b"\0" * 64)  # not a database: compiled again, rewritten
    assert build().possible(b'{"a":"xabc1234"}') == {0}
    assert cached.read_bytes() != b"\n" + b"\0" * 64
    os.chmod(cached, 0o666)  # another user could have written it: never loaded
    before = cached.stat().st_ino
    monkeypatch.setattr(prefilter, "_COMPILED", {})
    assert build().possible(b'{"a":"xabc1234"}') == {0}
    assert stat.S_IMODE(cached.stat().st_mode) == 0o600 and cached.stat().st_ino != before


def test_a_line_the_import_mends_is_looked_at_as_it_was_read() -> None:
    """The import passes the line's own bytes: a lone surrogate escape Node wrote (half an
    emoji) or invalid UTF-8 is U+FFFD in the record, and the pass still sees the rule."""
    from restore.imports.parse import decode

    redactor = redactor_for(RedactionSettings("strict"), KEY)
    assert redactor is not None
    secret = SECRETS["secret-assignment"][0]
    for raw in (
        b'{"t":"DB_PASSWORD=' + secret[:5].encode() + b"\\ud83d" + secret[5:].encode() + b'"}\n',
        b'{"t":"DB_PASSWORD=' + secret[:5].encode() + b"\xff\xfe" + secret[5:].encode() + b'"}\n',
    ):
        record, reason, repaired = decode(raw, 0)
        assert record is not None and reason is None and repaired, raw
        assert "\ufffd" in record["t"]
        expected = python_rules(redactor, record["t"])
        assert {redactor.rules[i].kind for i in expected} >= {"secret-assignment"}
        assert expected <= set(redactor.possible(raw))
        assert secret[5:] not in redactor.item(record, raw)["t"]


def _parse_codex(path: Path, redactor: Redactor) -> list[dict[str, Any]]:
    from restore.agents.codex.parser import CodexParser
    from restore.imports.parse import Flush, ParseStart, parse
    from restore.imports.plan import EMPTY_SHA

    start = ParseStart(path=str(path), parser=CodexParser, offset=0, lines=0, line_start=0,
                       tail_sha=EMPTY_SHA, state=None, fallback_ts="2026-01-01T00:00:00Z",
                       writing=False, redactor=redactor)  # fmt: skip
    items: list[dict[str, Any]] = []
    for part in parse(start):
        items += part.items
        assert isinstance(part, Flush) or part.skipped == []
    return items


@pytest.mark.parametrize("filler", [0, 9 << 20], ids=["small file", "past the whole-file pass"])
def test_an_imported_file_is_passed_whole_and_a_secret_in_its_last_line_is_still_caught(
    tmp_path: Path, filler: int
) -> None:
    """A file the whole-file pass finds clean is not looked at line by line; one holding a
    secret anywhere (its last line), or too big for that pass, is."""
    from bench import codex_peer

    redactor = redactor_for(RedactionSettings(), KEY)
    assert redactor is not None
    secret, planted = SECRETS["github-pat"]
    ts = "2026-01-01T00:00:00.000Z"
    body = codex_peer.session_meta("s-1", datetime(2026, 1, 1, tzinfo=UTC), "/work/p")
    body += codex_peer.message_lines(ts, "user", "x" * 500)
    repeats = codex_peer.message_lines(ts, "assistant", "ordinary text " * 60)
    body += repeats * (filler // len(repeats) + 1) if filler else b""
    clean = tmp_path / "clean.jsonl"
    clean.write_bytes(body)
    assert "ordinary text" in json.dumps(_parse_codex(clean, redactor)) or not filler
    held = tmp_path / "held.jsonl"
    held.write_bytes(body + codex_peer.message_lines(ts, "user", planted))
    items = json.dumps(_parse_codex(held, redactor))
    assert secret not in items and "[secret:github-pat:" in items


def test_the_translated_rules_are_kept_privately_and_a_writable_or_damaged_copy_is_not_used(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """gitleaks' patterns translated from Go's syntax are kept (a process's first record
    paid ~70 ms for it): the kept copy gives the same rules, and one another user could have
    written — weaker rules, say — is never read."""
    from restore.redaction import rules

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    fresh = rules.load(rules.GITLEAKS)
    folder = tmp_path / "sessiond"
    (kept,) = folder.glob("rules-*.json")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert rules.load(rules.GITLEAKS) == fresh  # read from the kept copy
    assert len(fresh.rules) > 150
    weaker = orjson.loads(kept.read_bytes())
    weaker["rules"] = weaker["rules"][:1]
    kept.write_bytes(orjson.dumps(weaker))
    assert len(rules.load(rules.GITLEAKS).rules) == 1  # the test sees the copy is read
    os.chmod(kept, 0o646)  # another user could have written it: never read, made again
    assert rules.load(rules.GITLEAKS) == fresh
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    kept.write_bytes(b'{"rules": [{"kind": 1}]')  # damaged: translated again
    assert rules.load(rules.GITLEAKS) == fresh
    own = tmp_path / "own.toml"  # another file (or this module changed): another copy
    own.write_text('[[rules]]\nid = "x"\nregex = """x[[:digit:]]{4}"""\n')
    assert [rule.regex for rule in rules.load(own).rules] == ["x[0-9]{4}"]
    assert len(list(folder.glob("rules-*.json"))) == 2
