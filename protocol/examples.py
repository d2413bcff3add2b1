"""Worked examples of the protocol, as data: docs/protocol.md shows them, and
tests/test_protocol_examples.py replays them against a real server, so the documented
exchange is one the server really has.

In requests and results, `$name` is a value the server chose earlier (`$threadId`) or the
client's directory (`$cwd`); in a result, `…` stands for any value (timestamps, rows).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

ANY = "…"


@dataclass(frozen=True)
class Step:
    """One request of an example, what it is for, and the answer it gets."""

    why: str
    method: str
    params: dict[str, Any]
    result: Any
    captures: dict[str, str] | None = None
    """Names for values in the result, by dotted path (`thread.threadId`)."""


_OPERATION = {"operationId": "op-1", "tool": "edit_file", "effect": "side_effect", "turnId": "t1"}

_TURN_END = [
    {"type": "operation", "id": "op-1-committed", **_OPERATION, "state": "committed",
     "resultPersisted": True, "result": {"changed": ["src/login.py"]}},
    {"type": "message", "id": "m-2", "role": "assistant", "turnId": "t1",
     "content": "Fixed: the password hash was compared as text. Tests pass."},
    {"type": "cost", "id": "c-1", "turnId": "t1", "model": "gpt-5", "inputTokens": 1200,
     "outputTokens": 300, "usd": 0.0123},
    {"type": "turn", "id": "t1-completed", "turnId": "t1", "phase": "completed"},
]  # fmt: skip

_RECORD_TURN_END = Step(
    "After the tool: its outcome (with the result, so a resume need not run it again), the "
    "agent's answer, what the model calls cost, and the end of the turn, in that order.",
    "thread/record",
    {"threadId": "$threadId", "sessionId": "$sessionId", "items": _TURN_END},
    {"firstSeq": 5, "lastSeq": 8, "duplicates": 0},
)

RECORD_ONE_TURN: tuple[Step, ...] = (
    Step(
        "Start a thread in the directory the agent works in. It is durable at once (its "
        "`session_meta` is seq 1) and listed before its first message.",
        "thread/start",
        {"cwd": "$cwd", "title": "fix login"},
        {"thread": ANY, "sessionId": ANY},
        {"threadId": "thread.threadId", "sessionId": "sessionId"},
    ),
    Step(
        "The user's request opens a turn. Every item gets an `id` the client chooses (a "
        "UUID, or any string unique in the thread): it is the idempotency key. Items of one "
        "turn carry its `turnId`.",
        "thread/record",
        {
            "threadId": "$threadId",
            "sessionId": "$sessionId",
            "items": [
                {"type": "turn", "id": "t1-started", "turnId": "t1", "phase": "started"},
                {
                    "type": "message",
                    "id": "m-1",
                    "role": "user",
                    "turnId": "t1",
                    "content": "The login form rejects valid passwords.",
                },
            ],
        },
        {"firstSeq": 2, "lastSeq": 3, "duplicates": 0},
    ),
    Step(
        "Before a tool with side effects runs, record its operation as `started` and wait "
        "for the answer: if the agent dies mid-call, a resume reports the operation as "
        "`needs_review` instead of letting it run twice.",
        "thread/record",
        {
            "threadId": "$threadId",
            "sessionId": "$sessionId",
            "items": [
                {
                    "type": "operation",
                    "id": "op-1-started",
                    **_OPERATION,
                    "state": "started",
                    "argsDigest": "sha256:5d41402abc4b2a76b9719d911017c592",
                },
            ],
        },
        {"firstSeq": 4, "lastSeq": 4, "duplicates": 0},
    ),
    _RECORD_TURN_END,
    replace(
        _RECORD_TURN_END,
        why="No answer came in time, so the client cannot know whether the items were "
        "stored: it sends the same request again. Nothing is written twice; the answer names "
        "the seqs the items already have. (After a reconnect, resume first and send the "
        "unacknowledged items, same ids, through the new session.)",
        result={"firstSeq": 5, "lastSeq": 8, "duplicates": 4},
    ),
    Step(
        "End the session: its writer is released and a snapshot taken. Tomorrow's "
        "`thread/resume` gives back the conversation, the operation ledger and the cost.",
        "thread/close",
        {"threadId": "$threadId", "sessionId": "$sessionId"},
        {},
    ),
    Step(
        "Weeks later, find it again by what was said: every thread's messages, tool calls, "
        "edited paths, todos and titles are searchable. Each hit names the record (`seq`: "
        "`thread/read {afterSeq: seq - 1}` opens the transcript there) and where in its "
        "snippet the words matched.",
        "thread/search",
        {"query": '"password hash"'},
        {
            "hits": [
                {
                    "threadId": "$threadId",
                    "seq": 6,
                    "role": "assistant",
                    "ts": ANY,
                    "snippet": "Fixed: the password hash was compared as text. Tests pass.",
                    "highlights": [[11, 24]],
                    "thread": ANY,
                }
            ],
            "nextCursor": None,
            "partial": False,
        },
    ),
)
