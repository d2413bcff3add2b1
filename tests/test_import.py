"""`sessiond import claude|codex` on generated transcripts in both agents' real formats:
two real git repos on different branches, then what a server gives back for each session.

Every step runs the real command line or a real server process over a real pipe.
"""

from __future__ import annotations

import hashlib
import json
import os
import pty
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from restore.home.layout import Layout
from restore.stores.embedded.files import ThreadStore
from tests.conftest import git
from tests.support.import_fixtures import EPOCH, ClaudeSession, Fixture, build
from tests.support.rpc_client import ServerProcess
from tests.test_cli import sessiond


@pytest.fixture
def fixture(tmp_path: Path, make_repo: Callable[..., Path]) -> Fixture:
    alpha, beta = make_repo("alpha", "main"), make_repo("beta", "feature/login")
    heads = {repo: git(repo, "rev-parse", "HEAD") for repo in (alpha, beta)}
    return build(tmp_path / "sources", alpha, beta, heads)


def run_import(home: Path, agent: str, source: Path) -> dict[str, Any]:
    done = sessiond(home, "import", agent, "--from", str(source), "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def import_both(home: Path, fixture: Fixture) -> tuple[dict[str, Any], dict[str, Any]]:
    return (
        run_import(home, "claude", fixture.claude_root),
        run_import(home, "codex", fixture.codex_root),
    )


def thread_files(home: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in (home / "threads").rglob("*.jsonl")
    }


def listed(server: ServerProcess, **params: Any) -> list[dict[str, Any]]:
    return server.request("thread/list", {"limit": 200, **params})["threads"]


def by_session(threads: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {t["origin"]["sessionId"]: t for t in threads if t["origin"]}


def states(report: dict[str, Any]) -> dict[str, Any]:
    return {entry["name"]: entry["state"] for entry in report["subsystems"]}


def test_every_session_is_listed_once_under_its_cwd(
    fixture: Fixture, home: Path, server: ServerProcess
) -> None:
    claude, codex = import_both(home, fixture)
    assert (claude["created"], claude["empty"], codex["created"]) == (9, 1, 5)
    for repo in {session.cwd for session in fixture.sessions}:
        threads = listed(server, cwd=str(repo))
        ids = [t["origin"]["sessionId"] for t in threads]
        assert len(ids) == len(set(ids)), "a session listed twice"
        expected = {s.session_id: s for s in fixture.sessions if s.cwd == repo}
        assert expected.keys() <= set(ids)
        rows = by_session(threads)
        for session in expected.values():
            row = rows[session.session_id]
            assert (row["title"], row["branch"]) == (session.title, session.branch)
            assert row["origin"] == {
                "agent": session.agent,
                "sessionId": session.session_id,
                "path": str(session.path),
                "revision": 1,
            }
    # Listed by when the sessions happened, not when they were imported.
    alpha = [t for t in listed(server, cwd=str(fixture.sessions[0].cwd)) if t["origin"]]
    assert [t["updatedAt"] for t in alpha] == sorted((t["updatedAt"] for t in alpha), reverse=True)
    assert min(t["createdAt"] for t in alpha).startswith("2026-05-04T09:30")


def test_resume_gives_the_mapped_values_and_the_agents_handoff(
    fixture: Fixture, home: Path, server: ServerProcess
) -> None:
    import_both(home, fixture)
    rows = by_session(listed(server))
    before = thread_files(home)
    for session in fixture.sessions:
        report = server.request("thread/resume", {"threadId": rows[session.session_id]["threadId"]})
        assert report["status"] == "ready", report["environment"]["drift"]
        assert report["session"]["sessionId"] is None  # the agent continues it, not sessiond
        assert report["handoff"] == {
            "agent": session.agent,
            "command": session.handoff,
            "cwd": str(session.cwd),
        }
        restored = states(report)
        assert restored["worktree"]["branch"] == session.branch
        assert restored["worktree"]["cwd"] == str(session.cwd)
        assert [t["content"] for t in restored["todos"]["items"]] == session.todos
        assert restored["model_override"] == {"model": session.model}
        assert (restored["cost"]["inputTokens"], restored["cost"]["outputTokens"]) == (
            session.input_tokens,
            session.output_tokens,
        )
        assert restored["cost"]["usd"] > 0  # every model of the fixture has a known price
        files = restored["file_history"]["files"]
        assert sorted(f["path"] for f in files) == sorted(session.edited)
        assert not any(f["diverged"] for f in files)  # the fixture left the files as edited
        permissions = restored["permissions"]
        assert permissions.get("downgradedFrom", permissions)["approvalMode"] == session.approval
        texts = [m["content"] for m in report["messages"]["items"]]
        assert texts == session.messages
    assert thread_files(home) == before  # resuming a mirror writes nothing


def test_dangerous_modes_come_back_downgraded(
    fixture: Fixture, home: Path, server: ServerProcess
) -> None:
    import_both(home, fixture)
    (risky,) = [s for s in fixture.of("codex") if s.approval == "never" and s.todos]
    thread = by_session(listed(server))[risky.session_id]
    permissions = states(server.request("thread/resume", {"threadId": thread["threadId"]}))[
        "permissions"
    ]
    assert (permissions["approvalMode"], permissions["sandbox"]) == (
        "on-request",
        "workspace-write",
    )
    assert permissions["downgradedFrom"] == {
        "approvalMode": "never",
        "sandbox": "danger-full-access",
    }


def test_a_second_import_adds_nothing(fixture: Fixture, home: Path) -> None:
    import_both(home, fixture)
    files = thread_files(home)
    claude, codex = import_both(home, fixture)
    for summary in (claude, codex):
        assert (summary["created"], summary["updated"], summary["revisions"], summary["items"]) == (
            0,
            0,
            0,
            0,
        )
    assert claude["unchanged"] == 9 and codex["unchanged"] == 5
    assert thread_files(home) == files
    # The ledger is only a cache: without it, the threads' checkpoints say the same.
    (home / "imports.sqlite3").unlink()
    claude, _ = import_both(home, fixture)
    assert (claude["created"], claude["items"]) == (0, 0)
    assert thread_files(home) == files


def test_lines_appended_to_a_session_arrive_in_the_same_thread(
    fixture: Fixture, home: Path, server: ServerProcess
) -> None:
    import_both(home, fixture)
    claude, codex = fixture.of("claude-code")[0], fixture.of("codex")[0]
    first = by_session(listed(server))
    with open(claude.path, "ab") as out:
        for record in (
            {
                "type": "user",
                "uuid": "u-more",
                "cwd": str(claude.cwd),
                "gitBranch": claude.branch,
                "timestamp": "2026-05-06T08:00:00.000Z",
                "message": {"role": "user", "content": "Also handle negative amounts"},
            },
            {
                "type": "assistant",
                "uuid": "a-more",
                "timestamp": "2026-05-06T08:00:05.000Z",
                "message": {
                    "id": "msg_more",
                    "model": "claude-opus-4-5-20251101",
                    "content": [{"type": "text", "text": "Handled."}],
                    "usage": {"input_tokens": 7, "output_tokens": 3},
                },
            },
        ):
            out.write(orjson.dumps(record) + b"\n")
    from bench import codex_peer

    with open(codex.path, "ab") as out:
        out.write(codex_peer.message_lines("2026-05-06T08:00:00.000Z", "user", "And a LICENSE"))
    summary_claude, summary_codex = import_both(home, fixture)
    assert (summary_claude["updated"], summary_claude["items"]) == (1, 4)  # msg, model, msg, cost
    assert (summary_codex["updated"], summary_codex["items"]) == (1, 1)
    after = by_session(listed(server))
    assert after.keys() == first.keys()  # no new thread
    for session, text in ((claude, "Also handle negative amounts"), (codex, "And a LICENSE")):
        thread = after[session.session_id]
        assert thread["threadId"] == first[session.session_id]["threadId"]
        report = server.request("thread/resume", {"threadId": thread["threadId"]})
        assert report["messages"]["items"][-1 if session is codex else -2]["content"] == text
    report = server.request("thread/resume", {"threadId": after[claude.session_id]["threadId"]})
    assert states(report)["model_override"] == {"model": "claude-opus-4-5-20251101"}


def test_a_rewritten_session_becomes_a_new_revision_never_mixed(
    fixture: Fixture, home: Path, server: ServerProcess
) -> None:
    import_both(home, fixture)
    original = fixture.of("claude-code")[1]
    old_thread = by_session(listed(server))[original.session_id]
    old_file = thread_files(home)
    # The agent rewrote the transcript (not appended): same name, other history.
    rewrite = ClaudeSession(
        fixture.claude_root, original.cwd, original.branch, session_id=original.session_id
    )
    rewrite.user("A different first question")
    rewrite.say("A different answer")
    rewrite.save()
    claude, _ = import_both(home, fixture)
    assert (claude["revisions"], claude["created"], claude["updated"]) == (1, 0, 0)
    threads = [t for t in listed(server) if t["origin"]["sessionId"] == original.session_id]
    revisions = {t["origin"]["revision"]: t for t in threads}
    assert sorted(revisions) == [1, 2]
    assert revisions[1]["threadId"] == old_thread["threadId"]
    assert revisions[2]["title"] == "A different first question"
    assert {k: v for k, v in thread_files(home).items() if k in old_file} == old_file
    report = server.request("thread/resume", {"threadId": revisions[2]["threadId"]})
    assert [m["content"] for m in report["messages"]["items"]] == [
        "A different first question",
        "A different answer",
    ]
    assert report["handoff"]["command"] == ["claude", "--resume", original.session_id]
    # The agent can only resume the transcript as it is now: the old revision hands over none.
    old = server.request("thread/resume", {"threadId": revisions[1]["threadId"]})
    assert old["status"] == "ready" and old["handoff"] is None


def test_faults_never_hide_a_session(fixture: Fixture, home: Path, server: ServerProcess) -> None:
    claude, codex = import_both(home, fixture)
    problems = {Path(p["path"]): p for p in claude["problems"] + codex["problems"]}
    faults = fixture.faults
    assert problems[faults["empty"]]["reason"] == "empty file"
    assert [s["reason"] for s in problems[faults["garbage"]]["skipped"]] == ["invalid_json"] * 2
    assert [s["reason"] for s in problems[faults["torn"]]["skipped"]] == ["torn_tail"]
    assert problems[faults["latin"]]["repaired"] == 1
    assert [s["reason"] for s in problems[faults["codex-torn"]]["skipped"]] == [
        "invalid_json",
        "torn_tail",
    ]
    rows = {t["origin"]["path"]: t for t in listed(server) if t["origin"]}
    assert str(faults["empty"]) not in rows
    for name in ("garbage", "bom", "torn", "huge", "latin", "codex-torn"):
        thread = rows[str(faults[name])]
        report = server.request("thread/resume", {"threadId": thread["threadId"]})
        assert report["status"] == "ready"
        assert len(report["messages"]["items"]) == 2, name  # the prompt and the answer
    assert rows[str(faults["bom"])]["title"] == "A session that starts with a byte order mark"
    assert rows[str(faults["huge"])]["title"] == "Here is the whole build log:"
    latin = server.request("thread/resume", {"threadId": rows[str(faults["latin"])]["threadId"]})
    assert latin["messages"]["items"][0]["content"] == "Le caf\ufffd est pr\u00eat"
    garbage = server.request(
        "thread/resume", {"threadId": rows[str(faults["garbage"])]["threadId"]}
    )
    assert [(s["lineNo"], s["reason"]) for s in garbage["recovery"]["sourceSkippedLines"]] == [
        (2, "invalid_json"),
        (3, "invalid_json"),
    ]


def test_junk_in_an_agents_folder_is_reported_and_never_a_thread(
    home: Path, tmp_path: Path, server: ServerProcess
) -> None:
    """A file of which no line is a record (a 20 MB line of junk, binary bytes) is reported
    with its skipped lines and makes no "(no messages yet)" thread to delete by hand;
    once a real record is written to it, it is imported like any session."""
    project = tmp_path / "claude" / "-junk"
    project.mkdir(parents=True)
    huge, binary = project / f"{uuid.uuid4()}.jsonl", project / f"{uuid.uuid4()}.jsonl"
    huge.write_bytes(b"x" * (20 * 1024 * 1024) + b"\n")
    binary.write_bytes(b"\x00\x01\x02 \xff\xfe not a record\n\x7fELF\n")
    summary = run_import(home, "claude", project.parent)
    problems = {Path(p["path"]): p for p in summary["problems"]}
    assert (summary["created"], summary["empty"]) == (0, 2)
    assert problems[huge]["reason"] == "not a session: no line of it could be read"
    assert [s["reason"] for s in problems[huge]["skipped"]] == ["invalid_json"]
    assert len(problems[binary]["skipped"]) == 2
    assert listed(server) == []

    session = ClaudeSession(project.parent, tmp_path, "main", started=EPOCH)
    session.user("Now a real session")
    session.say("Imported.")
    binary.write_bytes(binary.read_bytes() + b"".join(session.lines))
    again = run_import(home, "claude", project.parent)
    assert (again["created"], again["empty"]) == (1, 1)
    assert [t["title"] for t in listed(server)] == ["Now a real session"]


def test_a_torn_tail_is_imported_once_its_writer_finishes_it(
    fixture: Fixture, home: Path, server: ServerProcess
) -> None:
    import_both(home, fixture)
    torn = fixture.faults["torn"]
    with open(torn, "ab") as out:  # the rest of the line that was being written
        out.write(b'xt":"Finished after all."}]},"timestamp":"2026-05-05T09:31:00.000Z"}\n')
    claude, _ = import_both(home, fixture)
    assert (claude["updated"], claude["items"], claude["skippedLines"]) == (1, 1, 0)
    thread = {t["origin"]["path"]: t for t in listed(server)}[str(torn)]
    report = server.request("thread/resume", {"threadId": thread["threadId"]})
    assert report["messages"]["items"][-1]["content"] == "Finished after all."


def test_resuming_an_imported_thread_never_waits_for_the_importer(
    fixture: Fixture, home: Path, server: ServerProcess
) -> None:
    import_both(home, fixture)
    session = fixture.sessions[0]
    thread_id = by_session(listed(server))[session.session_id]["threadId"]
    held = ThreadStore(Layout(home)).open_writer(thread_id)  # an importer appending right now
    try:
        report = server.request("thread/resume", {"threadId": thread_id})
    finally:
        held.close()
    assert report["status"] == "ready" and report["handoff"]["command"] == session.handoff


def test_drift_holds_back_the_handoff_until_accepted(
    fixture: Fixture, home: Path, server: ServerProcess
) -> None:
    import_both(home, fixture)
    session = next(s for s in fixture.of("claude-code") if s.branch == "feature/login")
    subprocess.run(["git", "checkout", "-q", "-b", "elsewhere"], cwd=session.cwd, check=True)
    thread_id = by_session(listed(server))[session.session_id]["threadId"]
    report = server.request("thread/resume", {"threadId": thread_id})
    assert report["status"] == "needs_review" and report["handoff"] is None
    assert [(d["field"], d["recorded"], d["current"]) for d in report["environment"]["drift"]] == [
        ("branch", "feature/login", "elsewhere")
    ]
    accepted = server.request("thread/resume", {"threadId": thread_id, "acceptDrift": True})
    assert accepted["status"] == "ready" and accepted["handoff"]["command"] == session.handoff
    assert accepted["session"]["sessionId"] is None


def test_import_of_a_missing_store_says_so(home: Path, tmp_path: Path) -> None:
    done = sessiond(home, "import", "codex", "--from", str(tmp_path / "nowhere"))
    assert done.returncode == 2
    assert "is not a directory" in done.stderr and "Traceback" not in done.stderr


def test_import_draws_a_progress_bar_on_a_terminal(fixture: Fixture, home: Path) -> None:
    leader, follower = pty.openpty()
    try:
        source = str(fixture.claude_root)
        done = sessiond(home, "import", "claude", "--from", source, stderr=follower)
        os.close(follower)
        follower = -1
        drawn = b""
        while chunk := _read_pty(leader):
            drawn += chunk
    finally:
        os.close(leader)
        if follower != -1:
            os.close(follower)
    assert done.returncode == 0
    assert b"importing claude" in drawn and b"10/10" in drawn
    assert "10 sessions" in done.stdout and "9 new" in done.stdout and "empty file" in done.stdout


def _read_pty(fd: int) -> bytes:
    try:
        return os.read(fd, 4096)
    except OSError:  # the other side closed
        return b""


def test_a_thread_cut_before_its_checkpoint_is_completed_not_doubled(
    fixture: Fixture, home: Path, server: ServerProcess
) -> None:
    import_both(home, fixture)
    session = fixture.sessions[0]
    thread = by_session(listed(server))[session.session_id]
    path = next((home / "threads").rglob(f"{thread['threadId']}.jsonl"))
    lines = path.read_bytes().splitlines(keepends=True)
    assert b'"import_checkpoint"' in lines[-1]
    # A crash (power loss) in the middle of the import's write: the checkpoint is torn and
    # the ledger row, written only after the sync, is not there.
    path.write_bytes(b"".join(lines[:-1]) + lines[-1][:40])
    (home / "imports.sqlite3").unlink()
    claude, _ = import_both(home, fixture)
    assert (claude["revisions"], claude["created"], claude["items"]) == (0, 0, 0)
    rows = [t for t in listed(server) if t["origin"]["sessionId"] == session.session_id]
    assert [t["threadId"] for t in rows] == [thread["threadId"]]
    assert rows[0]["itemCount"] == thread["itemCount"]
    assert b'"import_checkpoint"' in path.read_bytes().splitlines()[-1]
    again, _ = import_both(home, fixture)
    assert (again["updated"], again["unchanged"]) == (0, 9)


async def test_an_acp_editor_is_told_to_continue_an_imported_session_in_its_agent(
    fixture: Fixture, home: Path, tmp_path: Path
) -> None:
    from acp import RequestError

    from tests.support.acp_editor import fake_agent, sessiond_acp

    import_both(home, fixture)
    session = fixture.of("claude-code")[0]
    async with sessiond_acp(home, fake_agent(tmp_path / "agent")) as run:
        listed_ = await run.conn.list_sessions(cwd=str(session.cwd))
        (thread_id,) = [s.session_id for s in listed_.sessions if s.title == session.title]
        with pytest.raises(RequestError) as refused:
            await run.conn.load_session(cwd=str(session.cwd), session_id=thread_id)
    assert refused.value.data["handoff"]["command"] == session.handoff


def test_an_import_leaves_nothing_in_the_data_dir_others_can_read(
    fixture: Fixture, home: Path
) -> None:
    """The import ledger too (SQLite would create it 0644): every file 0600, every folder
    0700, like everything else in the data dir."""
    import_both(home, fixture)
    assert (home / "imports.sqlite3").exists()
    modes = {
        str(path.relative_to(home)): oct(path.stat().st_mode & 0o777)
        for path in [home, *home.rglob("*")]
        if not path.is_symlink()
    }
    wrong = {name: mode for name, mode in modes.items()
             if mode != (oct(0o700) if (home / name).is_dir() else oct(0o600))}  # fmt: skip
    assert wrong == {}
