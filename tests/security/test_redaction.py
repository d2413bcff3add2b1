"""Secrets stay where they were: every shape planted in messages, tool output, commands,
todos, titles, file edits (blobs), hook output and imported transcripts is absent from the
raw bytes of the whole data directory (thread files, the SQLite index, snapshots, blobs)
and from every PostgreSQL table, from what a hook reads and from what a new agent is
primed with; its placeholder is there. What the editor and the agent see live (the file
the edit wrote, the prompt the agent got) keeps the secret. `sessiond doctor --redact`
finds and then rewrites threads stored before redaction.

The secrets are made here from a seeded generator (high entropy, like real ones; nothing
in this file is a credential of anything)."""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import string
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from restore.redaction.rules import GENERIC_KINDS
from tests.conftest import BOTH_STORES
from tests.support.acp_editor import agent_log, fake_agent, sessiond_acp
from tests.support.import_fixtures import ClaudeSession
from tests.support.rpc_client import REPO, RpcError, ServerProcess
from tests.test_cli import sessiond
from tests.test_hooks import HOOK, finals

Spawn = Callable[..., ServerProcess]
_rng = random.Random(25)
ALNUM = string.ascii_letters + string.digits


def _pick(alphabet: str, size: int) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(size))


B64URL = ALNUM + "-_"
PEM_BODY = "\n".join(_pick(ALNUM + "+/", 64) for _ in range(6))
SECRETS: dict[str, tuple[str, str]] = {
    # kind: (the secret, the text it is planted in)
    "github-pat": (s := "ghp_" + _pick(ALNUM, 36), f"export GITHUB_TOKEN={s}"),
    "gitlab-pat": (s := "glpat-" + _pick(ALNUM, 20), f"git push https://gitlab.com ({s})"),
    "slack-bot-token": (
        s := f"xoxb-{_pick(string.digits, 11)}-{_pick(string.digits, 12)}-{_pick(ALNUM, 24)}",
        f"slack token {s} in the log",
    ),
    "stripe-access-token": (s := "sk_live_" + _pick(ALNUM, 24), f"stripe.api_key = '{s}'"),
    "aws-access-token": (
        s := "AKIA" + _pick(string.ascii_uppercase + "234567", 16),
        f"aws_access_key_id = {s}",
    ),
    "aws-secret-access-key": (
        s := _pick(ALNUM + "/+", 40),
        f"aws_secret_access_key = {s}",
    ),
    "openai-api-key": (
        s := "sk-proj-" + _pick(B64URL, 74) + "T3BlbkFJ" + _pick(B64URL, 74),
        f"OPENAI key {s} used",
    ),
    "anthropic-api-key": (
        s := "sk-ant-api03-" + _pick(B64URL, 93) + "AA",
        f"x-api-key: {s}\n",
    ),
    "gcp-api-key": (s := "AIza" + _pick(B64URL, 35), f'"{s}"'),
    "jwt": (
        s := "eyJ" + _pick(ALNUM, 30) + ".eyJ" + _pick(ALNUM, 40) + "." + _pick(B64URL, 43),
        f"cookie session={s};",
    ),
    "private-key": (
        s := f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----",
        f"rotate this:\n{s}\n",
    ),
    "url-password": (
        s := _pick(ALNUM, 13) + "7",
        f"psql postgresql://app:{s}@db.internal:5432/app failed",
    ),
    "secret-assignment": (s := _pick(ALNUM, 12) + "9", f"DB_PASSWORD={s}\nDEBUG=1"),
    "secret-json-field": (s := _pick(ALNUM, 17) + "3", f'{{"client_secret": "{s}"}}'),
    "authorization-header": (
        s := _pick(ALNUM, 31) + "5",
        f"< 401 Unauthorized\n> Authorization: Bearer {s}",
    ),
}
PLANTED = "\n".join(text for _, text in SECRETS.values())


def leaks(data: bytes) -> list[str]:
    """The planted secrets (by kind) found in `data`, also as JSON escapes them."""
    found = []
    for kind, (secret, _) in SECRETS.items():
        for form in {secret, json.dumps(secret)[1:-1]}:
            if form.encode() in data:
                found.append(kind)
                break
    return found


def data_dir_bytes(home: Path) -> bytes:
    """Every byte of every file under the data directory (index, WAL, blobs, snapshots)."""
    return b"".join(p.read_bytes() for p in sorted(home.rglob("*")) if p.is_file())


def database_bytes(url: str) -> bytes:
    """Every row of every sessiond table, as text (bytea columns decoded)."""
    import psycopg

    out = []
    with psycopg.connect(url) as conn:
        tables = [row[0] for row in conn.execute(
            "SELECT tablename FROM pg_tables WHERE tablename LIKE 'sessiond_%'"
        )]  # fmt: skip
        for table in tables:
            for row in conn.execute(f"SELECT * FROM {table}"):
                for value in row:
                    out.append(bytes(value) if isinstance(value, bytes | memoryview) else
                               str(value).encode())  # fmt: skip
    return b"\n".join(out)


def all_text(items: list[dict[str, Any]]) -> str:
    return json.dumps(items)


# --- the server's own protocol, both stores -------------------------------------------------


@BOTH_STORES
def test_no_planted_secret_reaches_any_store_hook_input_or_answer_and_the_placeholder_does(
    spawn: Spawn, home: Path, tmp_path: Path, store_url: str | None
) -> None:
    workspace = tmp_path / "work"
    workspace.mkdir()
    config = tmp_path / "config"
    config.mkdir()
    hook_log = tmp_path / "hooks.log"
    github = SECRETS["github-pat"][0]
    command = f"{sys.executable} {HOOK} {hook_log}"
    (config / "hooks.json").write_text(json.dumps({"SessionStart": [{"hooks": [
        {"type": "command", "name": "reads", "command": f"{command} transcript"},
        # a hook's additionalContext is stored too (a prompt_section): redacted like the rest
        {"type": "command", "name": "says", "command": f"{command} plain-context {github}"},
    ]}]}))  # fmt: skip
    server = spawn(env={"SESSIOND_CONFIG_HOME": str(config)})
    server.initialize([str(workspace)], trusted=True)
    started = server.request(
        "thread/start", {"cwd": str(workspace), "title": f"deploy with {github}"}
    )
    tid, sid = started["thread"]["threadId"], started["sessionId"]
    items = [
        {"type": "message", "id": str(uuid.uuid4()), "role": "user", "content": PLANTED},
        {"type": "message", "id": str(uuid.uuid4()), "role": "assistant",
         "content": [{"type": "text", "text": f"I found these:\n{PLANTED}"}]},
        {"type": "operation", "id": str(uuid.uuid4()), "operationId": "op-1", "tool": "bash",
         "effect": "side_effect", "state": "started", "command": f"cat .env # {PLANTED}"},
        {"type": "operation", "id": str(uuid.uuid4()), "operationId": "op-1", "tool": "bash",
         "effect": "side_effect", "state": "committed", "resultPersisted": True,
         "result": {"stdout": PLANTED, "lines": PLANTED.splitlines()}},
        {"type": "todos", "id": str(uuid.uuid4()), "items": [
            {"id": "t1", "content": f"rotate {github}", "status": "pending"}]},
    ]  # fmt: skip
    server.request("thread/record", {"threadId": tid, "sessionId": sid, "items": items})
    server.request("fs/applyEdit", {
        "threadId": tid, "sessionId": sid, "operationId": "edit-1",
        "path": str(workspace / ".env"), "content": PLANTED})  # fmt: skip
    server.request("thread/close", {"threadId": tid, "sessionId": sid})
    report = server.request("thread/resume", {"threadId": tid})  # SessionStart: resume
    finals(server, 4)  # both hooks, at the start and at the resume

    # live: the file the edit wrote is the user's, secrets and all
    assert leaks((workspace / ".env").read_bytes()) == list(SECRETS)
    stored = server.request("thread/read", {"threadId": tid, "limit": 1000})["items"]
    listed = server.request("thread/list", {"search": "deploy"})["threads"]
    # the search index (FTS5, tsvector) is built from what was stored: the secret finds
    # nothing, the words around it find the thread
    by_secret = server.request("thread/search", {"query": github})["hits"]
    by_words = server.request("thread/search", {"query": "rotate"})["hits"]
    answers = json.dumps([stored, listed, report, by_words]).encode()
    server.close()

    assert leaks(answers) == []
    assert by_secret == [] and {hit["threadId"] for hit in by_words} == {tid}
    for kind in SECRETS.keys() - GENERIC_KINDS:  # a name-based match may be either generic kind
        assert f"[secret:{kind}:" in all_text(stored), kind
    assert '\\"client_secret\\": \\"[secret:' in all_text(stored)
    assert listed[0]["title"].startswith("deploy with [secret:github-pat:")
    hooks_saw = hook_log.read_bytes()
    assert b"[secret:github-pat:" in hooks_saw or store_url is not None  # PG: no transcript
    assert leaks(hooks_saw) == []  # stdin, and the transcript the hook read
    assert leaks(data_dir_bytes(home)) == []
    if store_url is not None:
        everything = database_bytes(store_url)
        assert b"[secret:github-pat:" in everything
        assert leaks(everything) == []


def test_the_same_secret_gets_the_same_placeholder_and_the_key_is_private(
    spawn: Spawn, home: Path, tmp_path: Path
) -> None:
    server = spawn()
    server.initialize([str(tmp_path)])
    secret = SECRETS["github-pat"][0]
    placeholders = []
    for _ in range(2):
        started = server.request("thread/start", {"cwd": str(tmp_path), "title": secret})
        placeholders.append(started["thread"]["title"])
    server.close()
    assert placeholders[0] == placeholders[1]
    assert re.fullmatch(r"\[secret:github-pat:[0-9a-f]{4}\]", placeholders[0])
    assert (home / "redaction.key").stat().st_mode & 0o777 == 0o600


def test_an_edit_of_a_file_that_held_a_secret_is_not_rewound_to_placeholders(
    spawn: Spawn, tmp_path: Path
) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text(SECRETS["secret-assignment"][1])  # the secret, before the edit
    server = spawn()
    server.initialize([str(tmp_path)])
    started = server.request("thread/start", {"cwd": str(tmp_path)})
    tid, sid = started["thread"]["threadId"], started["sessionId"]
    server.request("thread/record", {"threadId": tid, "sessionId": sid, "items": [
        {"type": "message", "id": str(uuid.uuid4()), "role": "user", "content": "go",
         "turnId": "t1"},
        {"type": "turn", "id": str(uuid.uuid4()), "turnId": "t1", "phase": "completed"},
        {"type": "message", "id": str(uuid.uuid4()), "role": "user", "content": "edit",
         "turnId": "t2"}]})  # fmt: skip
    server.request("fs/applyEdit", {
        "threadId": tid, "sessionId": sid, "operationId": "e1", "path": str(env_file),
        "content": "DEBUG=1\n"})  # fmt: skip
    (edit,) = [i for i in server.request("thread/read", {"threadId": tid, "limit": 100})[
        "items"] if i["type"] == "file_edit"]  # fmt: skip
    before = server.request(
        "thread/readBlob", {"threadId": tid, "seq": edit["seq"], "sha": edit["beforeSha"]}
    )
    with pytest.raises(RpcError) as refused:
        server.request("thread/rewind", {"threadId": tid, "sessionId": sid, "toTurnId": "t1"})
    server.close()
    assert before["recorded"] is False  # never kept: there is no secret to give back
    assert refused.value.kind == "StorageError" and "held a secret" in refused.value.message
    assert env_file.read_text() == "DEBUG=1\n"  # the file is left as the edit made it


def test_redaction_off_stores_what_was_recorded(spawn: Spawn, home: Path, tmp_path: Path) -> None:
    server = spawn(args=["--redaction", "off"])
    server.initialize([str(tmp_path)])
    started = server.request("thread/start", {"cwd": str(tmp_path)})
    tid, sid = started["thread"]["threadId"], started["sessionId"]
    server.request(
        "thread/record",
        {
            "threadId": tid,
            "sessionId": sid,
            "items": [
                {"type": "message", "id": str(uuid.uuid4()), "role": "user", "content": PLANTED}
            ],
        },
    )
    server.close()
    assert leaks(data_dir_bytes(home)) == list(SECRETS)


def test_a_bad_redaction_toml_is_one_clear_error_and_nothing_is_stored(
    spawn: Spawn, home: Path, tmp_path: Path
) -> None:
    (home / "redaction.toml").write_text('[[patterns]]\nkind = "mine"\nregex = "(unclosed"\n')
    done = sessiond(home, "import", "claude", "--from", str(tmp_path))
    assert done.returncode == 2
    assert "redaction.toml" in done.stderr and "not a regular expression" in done.stderr
    assert "Traceback" not in done.stderr
    server = spawn()
    server.initialize([str(tmp_path)])
    with pytest.raises(RpcError) as refused:
        server.request("thread/start", {"cwd": str(tmp_path), "title": PLANTED[:400]})
    server.close()
    assert refused.value.kind == "InvalidParams" and "redaction.toml" in refused.value.message
    assert not (home / "threads").exists()


def test_extra_patterns_and_the_allowlist_of_redaction_toml(
    spawn: Spawn, home: Path, tmp_path: Path
) -> None:
    internal = "itk_" + _pick("0123456789abcdef", 32)
    allowed = "sk_test_" + _pick(ALNUM, 24)
    (home / "redaction.toml").write_text(
        'allow = ["^sk_test_"]\n[[patterns]]\nkind = "internal-token"\nregex = "itk_[0-9a-f]{32}"\n'
    )
    server = spawn()
    server.initialize([str(tmp_path)])
    title = server.request(
        "thread/start", {"cwd": str(tmp_path), "title": f"{internal} {allowed}"}
    )["thread"]["title"]
    server.close()
    assert title.startswith("[secret:internal-token:") and title.endswith(allowed)


# --- imports --------------------------------------------------------------------------------


def test_an_imported_transcripts_secrets_are_redacted_and_the_transcript_is_left_as_it_was(
    home: Path, tmp_path: Path
) -> None:
    projects = tmp_path / "projects"
    repo = tmp_path / "repo"
    repo.mkdir()
    session = ClaudeSession(projects, repo, "main")
    session.user(f"use this key: {SECRETS['openai-api-key'][1]}")
    session.say(f"Ok. {SECRETS['private-key'][1]}")
    session.bash("cat .env", PLANTED)
    session.write(repo / ".env", PLANTED)
    session.custom_title(f"keys {SECRETS['github-pat'][0]}")
    session.save()
    done = sessiond(home, "import", "claude", "--from", str(projects), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["created"] == 1
    listed = sessiond(home, "list", "--json")
    stored = data_dir_bytes(home)
    assert leaks(stored + listed.stdout.encode()) == []
    # the first prompt is cut to a title: redacted before the cut, so no half key stays
    assert SECRETS["openai-api-key"][0][:30].encode() not in stored
    assert "[secret:github-pat:" in listed.stdout
    assert leaks(session.path.read_bytes()) == list(SECRETS)  # the agent's own file: untouched


def test_what_is_read_of_a_record_the_parser_only_counts_is_redacted_too(
    home: Path, tmp_path: Path
) -> None:
    """Of Claude Code's attachments the redactor looks only at what the parser reads (their
    bulk is never stored): a secret in the branch name one of them carries, which becomes
    the thread's branch, is still redacted, and so is one in the bulk."""
    projects = tmp_path / "projects"
    repo = tmp_path / "repo"
    repo.mkdir()
    session = ClaudeSession(projects, repo, "main")
    session.user("check the tests")
    token = SECRETS["github-pat"][0]
    session.raw({"type": "attachment", "attachment": {"type": "prompt_snapshot",
                 "content": SECRETS["private-key"][1]}, "cwd": str(repo),
                 "gitBranch": f"fix/{token}", "sessionId": session.session_id,
                 "timestamp": "2026-12-02T08:00:00.000Z"})  # fmt: skip
    session.save()
    done = sessiond(home, "import", "claude", "--from", str(projects), "--json")
    assert done.returncode == 0, done.stderr
    listed = sessiond(home, "list", "--json")
    assert leaks(data_dir_bytes(home) + listed.stdout.encode()) == []
    assert "fix/[secret:github-pat:" in listed.stdout


# --- sessiond doctor --redact ---------------------------------------------------------------


@BOTH_STORES
def test_doctor_redact_reports_by_kind_changes_nothing_then_rewrites_with_yes(
    spawn: Spawn, home: Path, tmp_path: Path, store_url: str | None
) -> None:
    store_env = {"SESSIOND_STORE": store_url} if store_url else {}
    server = spawn(env={"SESSIOND_REDACT": "off"})
    server.initialize([str(tmp_path)])
    github = SECRETS["github-pat"][0]
    started = server.request("thread/start", {"cwd": str(tmp_path), "title": f"use {github}"})
    tid, sid = started["thread"]["threadId"], started["sessionId"]
    server.request(
        "thread/record",
        {
            "threadId": tid,
            "sessionId": sid,
            "items": [
                {"type": "message", "id": str(uuid.uuid4()), "role": "user", "content": PLANTED}
            ],
        },
    )
    server.request("fs/applyEdit", {
        "threadId": tid, "sessionId": sid, "operationId": "edit-1",
        "path": str(tmp_path / "notes.txt"), "content": PLANTED})  # fmt: skip
    server.request("thread/close", {"threadId": tid, "sessionId": sid})  # and its snapshot
    server.close()

    def stored() -> bytes:
        return data_dir_bytes(home) + (database_bytes(store_url) if store_url else b"")

    assert leaks(stored()) == list(SECRETS)

    def doctor(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "server.cli", "--home", str(home), "doctor", "--redact",
             *args], capture_output=True, text=True, cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO), **store_env},
        )  # fmt: skip

    dry = doctor()
    assert dry.returncode == 1, dry.stderr
    assert "1 thread" in dry.stdout and "1 blob" in dry.stdout
    assert "  github-pat: 3" in dry.stdout  # title, message, blob
    assert "nothing was changed" in dry.stdout
    assert leaks(stored()) == list(SECRETS)

    done = doctor("--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "  github-pat: 3" in done.stdout
    again = doctor()
    assert again.returncode == 0 and "0 secrets" in again.stdout, again.stdout

    server = spawn()  # the thread still reads, lists and resumes
    server.initialize([str(tmp_path)])
    (row,) = server.request("thread/list", {})["threads"]
    assert "[secret:github-pat:" in row["title"]
    server.request("thread/resume", {"threadId": tid})
    items = server.request("thread/read", {"threadId": tid, "limit": 100})["items"]
    server.close()
    assert "[secret:private-key:" in all_text(items)
    assert leaks(stored()) == []


# --- the ACP proxy: live traffic untouched, replay and priming redacted ----------------------


async def test_acp_live_prompt_keeps_the_secret_replay_and_priming_of_a_new_agent_do_not(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    repo = make_repo("repo")
    state = tmp_path / "agent"
    prompt = [{"type": "text", "text": f"remember {PLANTED}"}]
    async with sessiond_acp(home, fake_agent(state, "none")) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        await run.conn.prompt(session_id=session, prompt=prompt)
        live = json.dumps(run.editor.texts()).encode()
    first = json.dumps(agent_log(state)).encode()
    assert leaks(first) == list(SECRETS)  # the agent got the prompt as the user typed it
    assert leaks(live) == list(SECRETS)  # and the editor its echo, live

    async with sessiond_acp(home, fake_agent(state, "none")) as run:
        await run.conn.load_session(cwd=str(repo), session_id=session)
        replayed = json.dumps(run.editor.texts())
        await run.conn.prompt(session_id=session, prompt=[{"type": "text", "text": "go on"}])
    primed = [e for e in agent_log(state) if e["event"] == "session/prompt"][-1]
    priming = primed["params"]["prompt"][0]["text"]
    assert "[secret:github-pat:" in priming and "[secret:github-pat:" in replayed
    assert leaks(priming.encode()) == [] and leaks(replayed.encode()) == []
    assert leaks(data_dir_bytes(home)) == []


async def test_acp_a_turn_with_a_secret_that_the_agent_kept_is_not_taken_for_lost(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    """The record holds the prompt redacted and the agent's own replay holds it as typed:
    judged alike, the agent's session/load is trusted and nothing is primed again."""
    repo = make_repo("repo")
    state = tmp_path / "agent"
    async with sessiond_acp(home, fake_agent(state, "load")) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        prompt = [{"type": "text", "text": f"deploy with {SECRETS['github-pat'][1]}"}]
        await run.conn.prompt(session_id=session, prompt=prompt)
    async with sessiond_acp(home, fake_agent(state, "load")) as run:
        await run.conn.load_session(cwd=str(repo), session_id=session)
        answer = await run.conn.prompt(session_id=session, prompt=[{"type": "text", "text": "go"}])
    assert answer.field_meta["sessiond"]["upstream"] == "load"
    assert answer.field_meta["sessiond"]["primed"] is False


def _cut(text: str, cuts: list[int], secrets: list[str]) -> list[str]:
    """The pieces of each secret in `text` as the cuts leave them (what each chunk holds)."""
    pieces = []
    for secret in (s for s in secrets if s in text):
        start = text.index(secret)
        bounds = [start, *(c for c in cuts if start < c < start + len(secret)), start + len(secret)]
        pieces += [text[a:b] for a, b in itertools.pairwise(bounds)]
    return pieces


async def test_acp_a_secret_the_agent_streams_cut_across_chunks_is_stored_nowhere_in_part(
    home: Path, tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    """An agent streams its answer in chunks, and a token it repeats can be cut between
    two (or three) of them: neither piece matches a rule alone. No piece, as it was cut,
    is in any stored byte, in the `session/load` replay or in a search hit; the editor
    was shown exactly what the agent said, and the replay shows the placeholder."""
    repo = make_repo("repo")
    state = tmp_path / "agent"
    anthropic, github = SECRETS["anthropic-api-key"][0], SECRETS["github-pat"][0]
    first = f"Your key is {anthropic} - keep it."
    second = f"Token {github} and key {anthropic} today."
    at = second.index(anthropic)
    turns = [
        (first, [first.index(anthropic) + 40]),  # 2 chunks
        (second, [second.index(github) + 18, at + 30, at + 70]),  # 2 and 3 chunks
    ]
    pieces = [p for text, cuts in turns for p in _cut(text, cuts, [anthropic, github])]
    assert len(pieces) == 7 and all(len(p) >= 18 for p in pieces)
    shown: list[tuple[str, str]] = []
    async with sessiond_acp(home, fake_agent(state, "none")) as run:
        session = (await run.conn.new_session(cwd=str(repo))).session_id
        for text, cuts in turns:
            before = len(run.editor.received)
            said = f"split {','.join(map(str, cuts))} {text}"
            await run.conn.prompt(session_id=session, prompt=[{"type": "text", "text": said}])
            updates = [p["update"] for p in run.editor.received[before:]]
            for kind in ("agent_thought_chunk", "agent_message_chunk"):
                texts = [u["content"]["text"] for u in updates if u["sessionUpdate"] == kind]
                shown.append((kind, "".join(texts)))
    # the editor was shown, character for character, what the agent said (live: untouched)
    assert shown == [(kind, text) for text, _ in turns
                     for kind in ("agent_thought_chunk", "agent_message_chunk")]  # fmt: skip

    stored = data_dir_bytes(home)
    assert [p for p in pieces if p.encode() in stored] == []
    assert stored.count(b"[secret:anthropic-api-key:") >= 4  # both turns, thought and message

    async with sessiond_acp(home, fake_agent(state, "none")) as run:
        await run.conn.load_session(cwd=str(repo), session_id=session)
        replayed = "".join(
            p["update"]["content"]["text"]
            for p in run.editor.received
            if p["update"]["sessionUpdate"] == "agent_message_chunk"
        )
    assert [p for p in pieces if p in replayed] == []
    assert re.search(r"Your key is \[secret:anthropic-api-key:[0-9a-f]{4}\] - keep it\.", replayed)
    assert re.search(
        r"Token \[secret:github-pat:[0-9a-f]{4}\] and key \[secret:anthropic-api-key:", replayed
    )
    for piece in pieces:  # the longest run of letters and digits: what search indexes
        word = max(re.findall(r"[A-Za-z0-9]+", piece), key=len)
        found = sessiond(home, "search", word, "--json")
        assert (found.returncode, found.stdout) == (1, ""), word
