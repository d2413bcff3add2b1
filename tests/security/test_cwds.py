"""Where a thread runs is recorded canonical and checked, whoever names it.

Threats: a client (or an agent driving one) that spells a cwd through a trusted folder
(`TRUSTED/../untrusted`) or a link; a transcript someone hands you whose lines name a
relative cwd (`../..`: taken relative to wherever the importer or server runs) or one
with a NUL. `thread/start` refuses the last two; an import must neither store them nor
offer them as the cwd to run the agent's own resume in, and says what it did instead.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.faults.helpers import Spawn, sessiond, start
from tests.support.import_fixtures import ClaudeSession, CodexSession


def test_thread_start_stores_its_cwd_resolved_and_finds_it_by_either_spelling(
    spawn: Spawn, tmp_path: Path
) -> None:
    trusted, untrusted = tmp_path / "trusted", tmp_path / "untrusted"
    trusted.mkdir()
    untrusted.mkdir()
    link = tmp_path / "link"
    link.symlink_to(untrusted)
    server = spawn()
    server.initialize([str(trusted)], trusted=True)
    for spelled in (f"{trusted}/../untrusted", str(link)):
        tid, sid = start(server, spelled)
        [meta] = server.request("thread/read", {"threadId": tid})["items"]
        assert meta["cwd"] == str(untrusted.resolve()), spelled
        assert meta.get("workspaceFolder") is None  # attributed to where it really is
        found = server.request("thread/list", {"cwd": spelled})["threads"]
        assert tid in [t["threadId"] for t in found] and found[0]["cwd"] == str(untrusted)
        server.request("thread/close", {"threadId": tid, "sessionId": sid})
        report = server.request("thread/resume", {"threadId": tid, "cwd": spelled})
        assert report["status"] == "ready" and report["environment"]["drift"] == []
        resumed = report["session"]["sessionId"]
        server.request("thread/close", {"threadId": tid, "sessionId": resumed})


def test_an_imported_relative_or_nul_cwd_is_never_stored_nor_offered_for_the_handoff(
    spawn: Spawn, home: Path, tmp_path: Path
) -> None:
    projects, sessions = tmp_path / "claude" / "projects", tmp_path / "codex" / "sessions"
    bad = {}
    for cwd in ("../..", "/tmp/\0x"):
        session = ClaudeSession(projects, Path(cwd), "main")
        session.user(f"a session that says it ran in {cwd!r}")
        session.save()
        bad[session.session_id] = cwd
    rollout = CodexSession(sessions, Path("../.."), "main", "0" * 40)
    rollout.user("a rollout that says it ran in '../..'")
    rollout.save()
    bad[rollout.session_id] = "../.."
    summaries = {}
    for agent, root in (("claude", projects), ("codex", sessions)):
        done = sessiond(home, "import", agent, "--from", str(root), "--json")
        assert done.returncode == 0, done.stderr
        summaries[agent] = json.loads(done.stdout)
    assert summaries["claude"]["created"] == 2 and summaries["codex"]["created"] == 1
    problems = summaries["claude"]["problems"] + summaries["codex"]["problems"]
    assert len(problems) == 3
    for problem in problems:  # the summary says what was done with each
        assert problem["status"] == "created" and "cwd" in problem["reason"], problem
        assert "not an absolute path" in problem["reason"] or "NUL" in problem["reason"]
    server = spawn()
    server.initialize()
    threads = server.request("thread/list", {"limit": 50})["threads"]
    assert len(threads) == 3
    for thread in threads:
        assert thread["origin"]["sessionId"] in bad
        [meta] = [
            item
            for item in server.request("thread/read", {"threadId": thread["threadId"]})["items"]
            if item["type"] == "session_meta"
        ]
        for cwd in (meta["cwd"], thread["cwd"]):
            assert cwd.startswith("/") and "\0" not in cwd and ".." not in cwd.split("/"), cwd
        report = server.request("thread/resume", {"threadId": thread["threadId"]})
        handoff = report["handoff"]
        if handoff is not None:
            assert handoff["cwd"] == meta["cwd"], handoff
