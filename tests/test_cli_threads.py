"""A thread as a person handles it from a shell, on both stores (issue 35): ids pasted
back as the unique prefixes `list` and `search` print, the hint `search` prints run as
printed, `resume` as a summary a person reads, and tidying up (`rename`, `archive`,
`unarchive`, `delete`) without hand-written JSON-RPC, on threads recorded over the
protocol and imported ones alike. Real processes, a real data dir or PostgreSQL."""

from __future__ import annotations

import json
import os
import pty
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from tests.conftest import BOTH_STORES
from tests.support.import_fixtures import ClaudeSession
from tests.support.rpc_client import REPO, ServerProcess

pytestmark = BOTH_STORES
SESSIOND = [sys.executable, "-m", "server.cli"]


def cli(
    home: Path, store: str | None, *args: str, stdin: int | None = None
) -> subprocess.CompletedProcess[str]:
    shared = ["--store", store] if store else []
    return run([*SESSIOND, "--home", str(home), *shared, *args], stdin=stdin)


def run(argv: list[str], stdin: int | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=REPO,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL if stdin is None else stdin,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )


def rows(home: Path, store: str | None, *args: str) -> list[dict[str, object]]:
    listed = cli(home, store, "list", "--json", *args)
    assert listed.returncode == 0, listed.stderr
    return [json.loads(line) for line in listed.stdout.splitlines()]


def recorded_thread(spawn: Callable[..., ServerProcess], tmp_path: Path) -> str:
    """A thread recorded over the protocol: one turn and an operation left open."""
    server = spawn()
    server.initialize()
    started = server.request(
        "thread/start",
        {"cwd": str(tmp_path), "title": "payment retries",
         "items": [{"type": "message", "id": "q", "role": "user",
                    "content": "why do the payment retries double charge?"}]},
    )  # fmt: skip
    tid, sid = started["thread"]["threadId"], started["sessionId"]
    server.request("thread/record", {"threadId": tid, "sessionId": sid, "items": [
        {"type": "message", "id": "a", "role": "assistant", "content": "The idempotency key "
         "is dropped on the second attempt."},
        {"type": "operation", "id": "o", "operationId": "op-deploy", "tool": "Bash",
         "state": "started", "effect": "side_effect", "command": "make deploy"},
        {"type": "todos", "id": "t", "items": [
            {"id": "1", "content": "keep the key across retries", "status": "in_progress"}]},
        {"type": "cost", "id": "c", "model": "gpt-5", "inputTokens": 1500, "outputTokens": 200,
         "usd": 0.25},
    ]})  # fmt: skip
    server.shutdown()
    return str(tid)


def imported_thread(home: Path, store: str | None, work: Path) -> tuple[str, ClaudeSession]:
    """A Claude Code session in the git repository `work` (on main), imported with
    `sessiond import claude`."""
    session = ClaudeSession(work.parent / "claude", work, "main")
    session.user("where do the refund webhooks go?")
    session.say("To the billing queue; nothing retries them.")
    session.save()
    done = cli(home, store, "import", "claude", "--from", str(work.parent / "claude"), "--json")
    assert done.returncode == 0, done.stderr
    (row,) = [r for r in rows(home, store) if (r["origin"] or {}).get("agent") == "claude-code"]  # type: ignore[union-attr]
    return str(row["threadId"]), session


def test_ids_are_pasted_back_as_search_prints_them_and_its_hint_runs_as_printed(
    spawn: Callable[..., ServerProcess],
    home: Path,
    tmp_path: Path,
    store_url: str | None,
    make_repo: Callable[..., Path],
) -> None:
    recorded = recorded_thread(spawn, tmp_path)
    imported, session = imported_thread(home, store_url, make_repo("work"))

    found = cli(home, store_url, "search", "retries")
    assert found.returncode == 0, found.stderr
    (hit,) = [line for line in found.stdout.splitlines() if "double charge" in line]
    short, hint = hit.split()[0], hit.split("» ")[1]
    assert short == recorded[:8]
    argv = shlex.split(hint)
    assert argv[0] == "sessiond" and argv[-2:] == ["resume", short]
    resumed = run([*SESSIOND, *argv[1:]])  # the hint, exactly as printed
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.splitlines()[0] == f"thread {recorded}: payment retries"

    shown = cli(home, store_url, "show", short)
    assert shown.returncode == 0, shown.stderr
    assert "    why do the payment retries double charge?" in shown.stdout

    refunds = cli(home, store_url, "search", "refund", "webhooks", "--role", "user")
    (line,) = refunds.stdout.splitlines()
    assert line.startswith(imported[:8])
    assert line.endswith(f"» cd {session.cwd} && claude --resume {session.session_id}")
    for typed in (imported[:8], imported[:4].upper(), imported.replace("-", "")[:13], imported):
        shown = cli(home, store_url, "show", typed)
        assert shown.returncode == 0, (typed, shown.stderr)
        assert shown.stdout.startswith(f"thread {imported}: where do the refund webhooks go?\n")


def test_resume_prints_what_a_person_reads_and_the_command_that_continues_an_import(
    spawn: Callable[..., ServerProcess],
    home: Path,
    tmp_path: Path,
    store_url: str | None,
    make_repo: Callable[..., Path],
) -> None:
    recorded = recorded_thread(spawn, tmp_path)
    imported, session = imported_thread(home, store_url, make_repo("work"))
    before = rows(home, store_url)

    said = cli(home, store_url, "resume", recorded[:8])
    assert said.returncode == 0, said.stderr
    assert said.stdout.splitlines() == [
        f"thread {recorded}: payment retries",
        f"ready: the workspace is as recorded, {tmp_path}",
        "last message (assistant, just now):",
        "  The idempotency key is dropped on the second attempt.",
        "open operations (1):",
        "  Bash (op-deploy): started, no outcome recorded, with side effects: check what it "
        "did before running it again",
        "todos (0 of 1 done):",
        "  [>] keep the key across retries",
        "cost: $0.2500 · 1,500 in / 200 out tokens",
        f"the transcript: sessiond show {recorded[:8]}",
        "continue it in an editor with sessiond (VS Code: the Threads view, or 'sessiond: Open "
        f"Thread…' with {recorded[:8]}), or any client's thread/resume",
    ]
    report = json.loads(cli(home, store_url, "resume", recorded[:8], "--json").stdout)
    assert report["status"] == "ready" and report["session"]["sessionId"] is None
    assert [op["recovery"] for op in report["pendingOperations"]] == ["needs_review"]

    handed = cli(home, store_url, "resume", imported[:8])
    assert handed.returncode == 0, handed.stderr
    assert handed.stdout.splitlines()[-2:] == [
        "continue it in its agent:",
        f"  cd {session.cwd} && claude --resume {session.session_id}",
    ]
    assert "last message (assistant, " in handed.stdout
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    drifted = cli(home, store_url, "resume", recorded[:8], "--cwd", str(elsewhere))
    assert drifted.returncode == 1
    assert f"  directory: {tmp_path} → {elsewhere} (blocks: a resume asks first)" in drifted.stdout
    assert rows(home, store_url) == before  # a look: nothing written, no session opened


def test_rename_archive_unarchive_and_delete_take_prefixes_on_recorded_and_imported_threads(
    spawn: Callable[..., ServerProcess],
    home: Path,
    tmp_path: Path,
    store_url: str | None,
    make_repo: Callable[..., Path],
) -> None:
    recorded = recorded_thread(spawn, tmp_path)
    imported, _ = imported_thread(home, store_url, make_repo("work"))
    for thread_id in (recorded, imported):
        short = thread_id[:8]
        renamed = cli(home, store_url, "rename", short, "the", "new", "title")
        assert renamed.stdout == f"renamed {thread_id}  the new title\n", renamed.stderr
        assert {r["threadId"]: r["title"] for r in rows(home, store_url)}[thread_id] == (
            "the new title"
        )
        archived = cli(home, store_url, "archive", short)
        assert archived.stdout == f"archived {thread_id}  the new title\n", archived.stderr
        assert thread_id not in {r["threadId"] for r in rows(home, store_url)}
        assert thread_id in {r["threadId"] for r in rows(home, store_url, "--archived")}
        refused = cli(home, store_url, "resume", short)
        assert refused.returncode == 2
        assert refused.stderr == (
            f"sessiond: ThreadArchived: {thread_id} is archived: sessiond unarchive {short} first\n"
        )
        back = cli(home, store_url, "unarchive", short)
        assert back.stdout == f"unarchived {thread_id}  the new title\n", back.stderr
        assert cli(home, store_url, "show", short).returncode == 0
    unasked = cli(home, store_url, "delete", recorded[:8])  # not on a terminal: --yes needed
    assert unasked.returncode == 2
    assert unasked.stderr == (
        "sessiond: deleting cannot be undone: add --yes (not on a terminal, none asks)\n"
    )
    assert len(rows(home, store_url)) == 2
    deleted = cli(home, store_url, "delete", recorded[:8], imported[:6], "--yes")
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.splitlines() == [
        f"deleted {recorded}  the new title",
        f"deleted {imported}  the new title",
    ]
    assert rows(home, store_url) == [] and rows(home, store_url, "--archived") == []
    gone = cli(home, store_url, "show", recorded[:8])
    assert (gone.returncode, gone.stderr) == (
        2, f"sessiond: ThreadNotFound: no thread id starts with {recorded[:8]}\n"
    )  # fmt: skip


def test_delete_asks_on_a_terminal_and_keeps_the_thread_unless_told_yes(
    spawn: Callable[..., ServerProcess], home: Path, tmp_path: Path, store_url: str | None
) -> None:
    recorded = recorded_thread(spawn, tmp_path)
    for answer, code, left in ((b"n\n", 1, 1), (b"\n", 1, 1), (b"yes\n", 0, 0)):
        leader, follower = pty.openpty()
        try:
            os.write(leader, answer)
            done = cli(home, store_url, "delete", recorded[:8], stdin=follower)
        finally:
            os.close(leader)
            os.close(follower)
        assert done.returncode == code, done.stderr
        assert done.stderr.startswith(
            f"delete 1 thread for good (there is no undo)?\n  {recorded}  payment retries\n[y/N] "
        )
        assert len(rows(home, store_url)) == left


def _hand_written(home: Path, thread_id: str, title: str) -> None:
    """A thread file as storage.md describes it (a chosen id: prefixes that collide)."""
    meta = {"v": 1, "seq": 1, "ts": "2026-03-10T12:00:00.000000Z", "type": "session_meta",
            "sessionId": "6c1d0000-0000-4000-8000-000000000000", "id": "meta",
            "threadId": thread_id, "source": "startup", "reason": "user", "cwd": "/",
            "title": title}  # fmt: skip
    path = home / "threads" / thread_id[:2] / f"{thread_id}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(meta) + b"\n")


def test_an_ambiguous_prefix_is_one_line_naming_the_candidates(
    home: Path, tmp_path: Path, store_url: str | None
) -> None:
    files = tmp_path / "files"
    home.chmod(0o700)  # as sessiond makes it (else its first use says so on stderr)
    ids = {
        "abcd0000-0000-4000-8000-000000000001": "first",
        "abcd0000-0000-4000-8000-000000000002": "second",
        "abce0000-0000-4000-8000-000000000003": "third",
    }
    for thread_id, title in ids.items():
        _hand_written(files if store_url else home, thread_id, title)
    if store_url:  # the same threads in the database
        copied = run([*SESSIOND, "--home", str(files), "migrate", "--to", store_url])
        assert copied.returncode == 0, copied.stderr
    for typed in ("abcd", "ABCD0000", "abcd00000000"):
        said = cli(home, store_url, "show", typed)
        assert said.returncode == 2 and said.stdout == ""
        prefix = typed.lower()[:8] if len(typed) <= 8 else "abcd0000-0000"
        assert said.stderr == (
            f"sessiond: InvalidId: {prefix} is the start of 2 thread ids: "
            "abcd0000-0000-4000-8000-000000000001 (first), "
            "abcd0000-0000-4000-8000-000000000002 (second); type more of the one you mean\n"
        ), said.stderr
    assert cli(home, store_url, "show", "abce").stdout.startswith(
        "thread abce0000-0000-4000-8000-000000000003: third\n"
    )
    assert cli(home, store_url, "show", "abcd0000-0000-4000-8000-000000000002").returncode == 0
    too_short = cli(home, store_url, "resume", "abc")
    assert too_short.returncode == 2
    assert too_short.stderr.startswith(
        "sessiond: InvalidId: a thread id is a UUID or its first 4 or more hex digits"
    )
    nothing = cli(home, store_url, "delete", "abcf", "abce", "--yes")  # one typo: nothing goes
    assert nothing.stderr == "sessiond: ThreadNotFound: no thread id starts with abcf\n"
    assert len(rows(home, store_url)) == 3


@pytest.mark.parametrize("framing", ["lines"])
def test_thread_resolve_names_the_threads_a_prefix_starts_over_the_protocol(
    spawn: Callable[..., ServerProcess], home: Path, tmp_path: Path, framing: str,
    store_url: str | None,
) -> None:  # fmt: skip
    server = spawn(framing=framing)
    server.initialize()
    tid = server.request("thread/start", {"cwd": str(tmp_path), "title": "one"})["thread"][
        "threadId"
    ]
    server.request("thread/archive", {"threadId": tid})
    found = server.request("thread/resolve", {"prefix": tid[:6].upper()})
    assert [(t["threadId"], t["archived"]) for t in found["threads"]] == [(tid, True)]
    assert found["more"] is False
    other = "0000" if not tid.startswith("0000") else "ffff"
    assert server.request("thread/resolve", {"prefix": other}) == {"threads": [], "more": False}
