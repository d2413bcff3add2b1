"""The chunk hold (restore/sources/acp_chunks.py) against the real rule set: however an
agent's stream is cut, what it lets go joins up to exactly what was sent, and each piece
redacted on its own — as the store redacts each raw update — keeps no part of any secret
planted in it (every shape of tests/security/test_redaction.py: tokens, keys by their
names, a URL's password, a PEM block over several lines)."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from restore.redaction.engine import Redactor
from restore.redaction.settings import RedactionSettings, redactor_for
from restore.sources.acp_chunks import HOLD_LIMIT, ChunkHold
from tests.security.test_redaction import SECRETS

REDACTOR = redactor_for(RedactionSettings(), b"k" * 32)
assert REDACTOR is not None
PROSE = "Here is what I found. The key point is that the token must not leak; "
TEXT = PROSE + " ".join(planted for _, planted in SECRETS.values()) + " That is all."
PIECE = 12
"""A run of this many characters of a secret, found anywhere, is a part of it kept."""


def chunk(text: str, message_id: str = "m") -> dict[str, Any]:
    update = {"sessionUpdate": "agent_message_chunk", "messageId": message_id,
              "content": {"type": "text", "text": text}}  # fmt: skip
    return {"sessionId": "s", "update": update}


def stream(hold: ChunkHold, pieces: list[str]) -> list[str]:
    out = [p for piece in pieces for p in hold.update(chunk(piece), lambda: REDACTOR)]
    return [p["update"]["content"]["text"] for p in out + hold.flush()]


def kept_parts(texts: list[str], redactor: Redactor) -> list[str]:
    stored = "\n".join(redactor.text(t) for t in texts)
    return [
        kind
        for kind, (secret, _) in SECRETS.items()
        if any(secret[i : i + PIECE] in stored for i in range(len(secret) - PIECE + 1))
    ]


def cut(text: str, at: list[int]) -> list[str]:
    bounds = [0, *sorted({a % len(text) for a in at}), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def test_cut_as_it_comes_each_chunk_redacted_alone_keeps_parts_of_secrets() -> None:
    """Why: without the hold, a stream cut inside each secret keeps parts of them."""
    at = [TEXT.index(secret) + len(secret) // 2 for secret, _ in SECRETS.values()]
    kept = kept_parts(cut(TEXT, at), REDACTOR)
    assert {"anthropic-api-key", "github-pat", "private-key", "jwt"} <= set(kept)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=10_000), max_size=60))
def test_however_the_stream_is_cut_no_part_of_a_secret_is_let_go_alone(at: list[int]) -> None:
    pieces = cut(TEXT, at)
    released = stream(ChunkHold(), pieces)
    assert "".join(released) == TEXT  # every character once, in order
    assert kept_parts(released, REDACTOR) == []


def test_prose_streamed_a_character_at_a_time_is_held_back_a_word_or_a_name() -> None:
    """The editor still sees text stream: what waits is the word being written, or what
    follows a name a secret could be given (`token` ... `=`) until it cannot be."""
    hold = ChunkHold()
    behind = []
    shown = ""
    for char in PROSE:
        shown += "".join(p["update"]["content"]["text"]
                         for p in hold.update(chunk(char), lambda: REDACTOR))  # fmt: skip
        behind.append(hold.holding)
    assert max(behind) <= 40
    assert shown + hold.flush()[0]["update"]["content"]["text"] == PROSE


def test_the_hold_is_bounded_and_what_ends_the_message_lets_it_go_first() -> None:
    hold = ChunkHold()

    def texts(params: dict[str, Any], redactor: Redactor | None = REDACTOR) -> list[str]:
        out = hold.update(params, lambda: redactor)
        return [p["update"]["content"]["text"] if "content" in p["update"] else "-" for p in out]

    run = "A" * (HOLD_LIMIT + 10)  # no break anywhere: no token of any rule is that long
    assert texts(chunk(run)) == [run] and hold.overflows == 1
    assert texts(chunk("Here sk-an")) == ["Here "]  # an Anthropic key could begin so
    assert texts(chunk("next", message_id="m2")) == ["sk-an"]  # another message: first
    tool = {"sessionId": "s", "update": {"sessionUpdate": "tool_call", "toolCallId": "t"}}
    assert texts(tool) == ["next", "-"]  # another update: the message's end first
    assert texts(chunk("as is"), None) == ["as is"]  # redaction off: nothing is held
    assert hold.flush() == []


def test_a_match_in_progress_is_found_by_re2_for_every_rule_at_every_cut_of_every_shape() -> None:
    """Where a match may still be in progress is one RE2 search (restore/redaction/
    prefixes.py: linear in the held text), for every built-in rule: partial matching in
    `regex` backtracked for 100 ms over each held 1 KB chunk of `api_key_token_` with no
    break (36 ms for `aws_secret_access_key=`), a chunk after a chunk. And it is sound: at
    every cut inside a match of any rule in the corpus' shapes (and prose naming keys),
    the text up to the cut is found in progress from that match's start or earlier."""
    assert all(rule.in_progress is not None for rule in REDACTOR.rules)
    texts = [TEXT, "export OPENAI_API_KEY=" + SECRETS["openai-api-key"][0] + "\n"]
    checked = 0
    for text in texts:
        data = text.encode()
        for rule in REDACTOR.rules:
            for match in rule.engine.finditer(data):
                start = len(data[: match.start()].decode())
                stop = len(data[: match.end()].decode())
                for at in range(start + 1, stop + 1):
                    found = rule.in_progress.search(text[:at])
                    assert found is not None and found.start() <= start, (rule.kind, at)
                    checked += 1
    assert checked > 1000
