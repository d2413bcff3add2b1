"""The import fixtures' Codex rollouts are real ones: `codex app-server` lists every one and
resumes each with every line parsed. Runs when Codex is installed (`bench.codex_peer.INSTALL`:
on PATH or in /tmp/codex-peer), offline, in a temporary CODEX_HOME.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from bench import codex_peer
from tests.conftest import git
from tests.support.import_fixtures import build

pytestmark = pytest.mark.skipif(
    not codex_peer.available(), reason=f"codex is not installed: {codex_peer.INSTALL}"
)


def test_codex_app_server_lists_and_resumes_the_generated_rollouts(
    tmp_path: Path, make_repo: Callable[..., Path]
) -> None:
    alpha, beta = make_repo("alpha", "main"), make_repo("beta", "feature/login")
    fixture = build(
        tmp_path / "sources",
        alpha,
        beta,
        {repo: git(repo, "rev-parse", "HEAD") for repo in (alpha, beta)},
    )
    home = fixture.codex_root.parent
    (home / "config.toml").write_text(codex_peer.CONFIG)
    sessions = fixture.of("codex")
    server = codex_peer.AppServer(home, codex_peer.RESUME_LOG)
    try:
        server.initialize(timeout=120)
        listed: set[str] = set()
        for repo in (alpha, beta):
            _, page = server.request("thread/list", {"limit": 100, "cwd": str(repo)}, 120)
            listed |= {thread["id"] for thread in page["data"]}
        assert {s.session_id for s in sessions} <= listed
        for session in sessions:
            _, resumed = server.request("thread/resume", {"threadId": session.session_id}, 120)
            turns = resumed["thread"]["turns"]
            assert len(turns) == 1  # one prompt per generated session
            items = turns[0]["items"]
            said = [
                part["text"] for i in items if i["type"] == "userMessage" for part in i["content"]
            ]
            answered = [i["text"] for i in items if i["type"] == "agentMessage"]
            assert (said, answered) == (session.messages[:1], session.messages[1:])
    finally:
        assert server.close()
    loads = re.findall(r"Resumed rollout with (\d+) items.*?parse errors: (\d+)", server.stderr())
    assert len(loads) >= len(sessions)
    assert [errors for _, errors in loads] == ["0"] * len(loads)
