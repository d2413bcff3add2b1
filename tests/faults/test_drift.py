"""The workspace moved under a thread: resume says so and never continues silently.

Real git repos changed between the thread's last session and its resume: branch switched,
HEAD moved, another repo at the same path, cwd deleted, linked worktree removed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.conftest import BOTH_STORES, git
from tests.faults.helpers import Spawn, record, subsystem, thread_file
from tests.faults.helpers import start as started
from tests.support.rpc_client import ServerProcess


def _closed_thread(server: ServerProcess, cwd: Path) -> str:
    tid, sid = started(server, cwd)
    server.request("thread/close", {"threadId": tid, "sessionId": sid})
    return tid


def test_branch_switched_needs_review_writes_nothing_and_switching_back_is_ready(
    server: ServerProcess, make_repo: Callable[..., Path], home: Path
) -> None:
    repo = make_repo("repo", "fix/payment")
    tid = _closed_thread(server, repo)
    git(repo, "checkout", "-q", "-b", "main")
    before = thread_file(home, tid).read_bytes()
    report = server.request("thread/resume", {"threadId": tid})
    assert report["status"] == "needs_review" and report["session"]["sessionId"] is None
    [branch] = report["environment"]["drift"]
    assert (branch["field"], branch["recorded"], branch["current"], branch["severity"]) == (
        "branch", "fix/payment", "main", "block")  # fmt: skip
    assert subsystem(report, "worktree")["status"] == "invalidated"
    assert thread_file(home, tid).read_bytes() == before  # no session was opened
    git(repo, "checkout", "-q", "fix/payment")
    back = server.request("thread/resume", {"threadId": tid})
    assert back["status"] == "ready" and back["environment"]["drift"] == []


def test_head_moved_on_the_same_branch_warns_and_invalidates_verification(
    server: ServerProcess, make_repo: Callable[..., Path]
) -> None:
    repo = make_repo("repo")
    tid, sid = started(server, repo)
    record(server, tid, sid, {"type": "verifier", "name": "tests", "passed": 9, "total": 9,
                              "headSha": git(repo, "rev-parse", "HEAD")})  # fmt: skip
    server.request("thread/close", {"threadId": tid, "sessionId": sid})
    git(repo, "commit", "-q", "--allow-empty", "-m", "someone else's commit")
    report = server.request("thread/resume", {"threadId": tid})
    assert report["status"] == "ready"
    assert [(d["field"], d["severity"]) for d in report["environment"]["drift"]] == [
        ("head", "warn")]  # fmt: skip
    assert subsystem(report, "verifier")["status"] == "invalidated"
    assert subsystem(report, "worktree")["reason"] == "moved since: head"


def test_deleted_cwd_needs_review(server: ServerProcess, tmp_path: Path) -> None:
    work = tmp_path / "gone"
    work.mkdir()
    tid = _closed_thread(server, work)
    work.rmdir()
    report = server.request("thread/resume", {"threadId": tid})
    assert report["status"] == "needs_review"
    assert report["environment"]["current"]["cwdExists"] is False
    assert "cwd" in {d["field"] for d in report["environment"]["drift"]}


def test_another_repo_at_the_same_path_needs_review(
    server: ServerProcess, make_repo: Callable[..., Path], tmp_path: Path
) -> None:
    repo = make_repo("repo")
    tid = _closed_thread(server, repo)
    git(repo, "remote", "add", "origin", "https://example.invalid/other.git")
    report = server.request("thread/resume", {"threadId": tid})
    [repo_drift] = [d for d in report["environment"]["drift"] if d["field"] == "repo"]
    assert report["status"] == "needs_review" and repo_drift["severity"] == "block"
    assert repo_drift["current"].endswith("other.git")


def test_removed_linked_worktree_needs_review(
    server: ServerProcess, make_repo: Callable[..., Path], tmp_path: Path
) -> None:
    repo = make_repo("repo")
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "-b", "feature", str(linked))
    tid, sid = started(server, linked)
    server.request("thread/close", {"threadId": tid, "sessionId": sid})
    items = server.request("thread/read", {"threadId": tid})["items"]
    assert items[0]["worktree"] == str(linked) and items[0]["branch"] == "feature"
    git(repo, "worktree", "remove", str(linked))
    report = server.request("thread/resume", {"threadId": tid, "cwd": str(repo)})
    assert report["status"] == "needs_review"
    fields = {d["field"] for d in report["environment"]["drift"]}
    assert {"cwd", "worktree", "branch"} <= fields


@BOTH_STORES
def test_same_repository_in_another_checkout_resumes_with_a_warning(
    spawn: Spawn, make_repo: Callable[..., Path], tmp_path: Path
) -> None:
    """Bound to a repository, not a path: recorded in /…/shop/api, resumed in another clone's
    api/ on the same branch and HEAD (another machine, say) — ready, with a warn drift."""
    origin = "https://example.invalid/shop.git"
    repo = make_repo("shop")
    git(repo, "remote", "add", "origin", origin)
    (repo / "api").mkdir()
    clone = tmp_path / "elsewhere" / "shop"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    git(clone, "remote", "set-url", "origin", origin)
    (clone / "api").mkdir()
    server = spawn()
    server.initialize()
    tid = _closed_thread(server, repo / "api")
    report = server.request("thread/resume", {"threadId": tid, "cwd": str(clone / "api")})
    assert report["status"] == "ready", report["environment"]["drift"]
    assert report["environment"]["drift"] == [{
        "field": "worktree", "recorded": str(repo), "current": str(clone), "severity": "warn",
        "reason": "same repository, other checkout"}]  # fmt: skip
    assert subsystem(report, "worktree")["status"] == "restored"
    other_subdir = server.request("thread/resume", {"threadId": tid, "cwd": str(clone)})
    assert other_subdir["status"] == "needs_review"  # the clone's root is not where it ran
