"""Secrets in structured tool I/O (issue 34): what a tool answers as JSON is redacted as the
same written as text would be. A value under a secret-named key (`AWS_SECRET_ACCESS_KEY`,
`DB_PASSWORD`, `client_secret`), whatever its shape, is looked at with its name; sessiond's
own field names (`reason`, `source`, `status`, `type`, `id`, …) are skipped only where
they are sessiond's, never inside a tool's output; keys are looked at too. A real server,
a real import; asserted on every byte of the data directory and on the answers.

The secrets are tests/security/test_redaction.py's (seeded, high entropy, credentials of
nothing)."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from tests.security.test_redaction import SECRETS, data_dir_bytes, leaks
from tests.support.rpc_client import ServerProcess
from tests.test_cli import sessiond

Spawn = Callable[..., ServerProcess]
AWS = SECRETS["aws-secret-access-key"][0]
PASSWORD = SECRETS["secret-assignment"][0]
CLIENT = SECRETS["secret-json-field"][0]
GITHUB = SECRETS["github-pat"][0]
AKIA = SECRETS["aws-access-token"][0]
SLACK = SECRETS["slack-bot-token"][0]
STRIPE = SECRETS["stripe-access-token"][0]
JWT = SECRETS["jwt"][0]


def _recorded(spawn: Spawn, tmp_path: Path, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    server = spawn()
    server.initialize([str(tmp_path)])
    started = server.request("thread/start", {"cwd": str(tmp_path)})
    tid, sid = started["thread"]["threadId"], started["sessionId"]
    server.request("thread/record", {"threadId": tid, "sessionId": sid, "items": items})
    stored: list[dict[str, Any]] = server.request("thread/read", {"threadId": tid})["items"]
    server.close()
    return stored


def _operation(result: Any) -> dict[str, Any]:
    return {"type": "operation", "id": str(uuid.uuid4()), "operationId": "op-1", "tool": "mcp",
            "effect": "read", "state": "committed", "resultPersisted": True,
            "result": result}  # fmt: skip


def test_a_secret_named_key_redacts_its_value_whatever_its_shape(
    spawn: Spawn, home: Path, tmp_path: Path
) -> None:
    """Before: `{"AWS_SECRET_ACCESS_KEY": "<40 chars>"}` and the like were stored as they
    came (the rules that know a secret by its name never saw the name)."""
    result = {
        "AWS_SECRET_ACCESS_KEY": AWS,  # a string: known by its name alone
        "DB_PASSWORD": PASSWORD,
        "client_secret": CLIENT,
        "credentials": {"password": {"value": PASSWORD + "a"}},  # an object under the name
        "api_secrets": [CLIENT + "b", CLIENT + "c"],  # an array of strings
        "env": [{"name": "DB_PASSWORD", "value": PASSWORD + "d"}],  # a name/value pair
    }
    content = [{"type": "text", "text": "ok", "meta": {"DB_PASSWORD": PASSWORD}}]
    message = {"type": "message", "id": str(uuid.uuid4()), "role": "tool", "content": content}
    stored = _recorded(spawn, tmp_path, [_operation(result), message])
    answer = json.dumps(stored)
    planted = [AWS, PASSWORD, CLIENT]
    assert [s for s in planted if s in answer] == [], answer
    assert [s for s in planted if s.encode() in data_dir_bytes(home)] == []
    (operation,) = [item for item in stored if item["type"] == "operation"]
    assert operation["result"]["AWS_SECRET_ACCESS_KEY"].startswith("[secret:")
    assert operation["result"]["env"][0]["name"] == "DB_PASSWORD"  # the name is kept
    assert operation["result"]["env"][0]["value"].startswith("[secret:")
    assert operation["operationId"] == "op-1" and operation["state"] == "committed"


def test_sessiond_field_names_inside_tool_output_are_looked_at_and_so_are_keys(
    spawn: Spawn, home: Path, tmp_path: Path
) -> None:
    """Before: a key named like one of sessiond's own fields (`reason`, `event`, `source`,
    `status`, `type`, `id`, …) hid its whole subtree at any depth, and keys were never
    looked at (a JWT used as a key was stored)."""
    result = {
        "error": {"code": 401, "reason": f"bad token {GITHUB}", "status": f"key {AKIA}"},
        "event": {"type": "message", "source": {"id": f"bot {SLACK}", "kind": [STRIPE]}},
        "sessions": {JWT: {"state": "active"}},
    }
    stored = _recorded(spawn, tmp_path, [_operation(result)])
    planted = [GITHUB, AKIA, SLACK, STRIPE, JWT]
    answer = json.dumps(stored)
    assert [s for s in planted if s in answer] == [], answer
    assert [s for s in planted if s.encode() in data_dir_bytes(home)] == []
    (operation,) = [item for item in stored if item["type"] == "operation"]
    assert operation["result"]["error"]["code"] == 401  # what holds no secret is as it was
    assert operation["result"]["event"]["type"] == "message"
    ((key, value),) = operation["result"]["sessions"].items()
    assert key.startswith("[secret:jwt:") and value == {"state": "active"}


def test_a_private_key_split_over_a_lists_lines_is_redacted_in_each(
    spawn: Spawn, home: Path, tmp_path: Path
) -> None:
    """A tool's output as `lines`, a private key one line an entry: no entry holds it whole,
    so each passed the rules, and the search index, which joins them, held the key again."""
    key = SECRETS["private-key"][0]
    lines = ["rotate this:", *key.splitlines(), "done"]
    stored = _recorded(spawn, tmp_path, [_operation({"lines": lines})])
    (operation,) = [item for item in stored if item["type"] == "operation"]
    kept = operation["result"]["lines"]
    assert len(kept) == len(lines) and kept[0] == "rotate this:" and kept[-1] == "done"
    assert all(entry.startswith("[secret:private-key:") for entry in kept[1:-1]), kept
    body = key.splitlines()[1].encode()  # a line of the key's body, anywhere in the home
    assert body not in data_dir_bytes(home)


def test_a_codex_sub_agents_nickname_is_redacted_in_the_thread_and_the_import_ledger(
    home: Path, tmp_path: Path
) -> None:
    """Before: `session_meta.source` (a structural name) hid the sub-agent's spawn record:
    its nickname reached the thread's title and the ledger's parser state unredacted."""
    sessions = tmp_path / "sessions" / "2026" / "01" / "01"
    sessions.mkdir(parents=True)
    session_id = str(uuid.uuid4())
    ts = "2026-01-01T00:00:00.000Z"
    spawn = {"parent_thread_id": str(uuid.uuid4()), "depth": 1, "agent_path": "explorer",
             "agent_nickname": f"Scout {GITHUB}"}  # fmt: skip
    meta = {"id": session_id, "timestamp": ts, "cwd": str(tmp_path), "originator": "codex",
            "cli_version": "0.171.0", "source": {"subagent": {"thread_spawn": spawn}}}  # fmt: skip
    lines = [
        {"timestamp": ts, "type": "session_meta", "payload": meta},
        {"timestamp": ts, "type": "event_msg",
         "payload": {"type": "user_message", "message": "look around", "kind": "plain"}},
    ]  # fmt: skip
    rollout = sessions / f"rollout-2026-01-01T00-00-00-{session_id}.jsonl"
    rollout.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    done = sessiond(home, "import", "codex", "--from", str(tmp_path / "sessions"), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["created"] == 1
    listed = sessiond(home, "list", "--json").stdout
    assert leaks(data_dir_bytes(home) + listed.encode()) == []
    (ledger,) = home.rglob("imports.sqlite3")
    with sqlite3.connect(ledger) as conn:
        parser_states = [row[0] for row in conn.execute("SELECT parser FROM sources")]
    assert parser_states and all(GITHUB not in state for state in parser_states)
    assert any("[secret:github-pat:" in state for state in parser_states)  # its agent title
