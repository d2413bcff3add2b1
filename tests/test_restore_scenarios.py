"""The restore contract end to end: real git repos, a real server, real kill -9.

Drift, crash-point and ledger faults live in tests/faults/."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BOTH_STORES, git
from tests.support.rpc_client import RpcError, ServerProcess

pytestmark = BOTH_STORES  # the embedded store and PostgreSQL: the same scenarios, same answers
Spawn = Callable[..., ServerProcess]


def sha(data: str) -> str:
    return hashlib.sha256(data.encode()).hexdigest()


def subsystem(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in report["subsystems"] if s["name"] == name)


def record(server: ServerProcess, tid: str, sid: str, *items: dict[str, Any]) -> dict[str, Any]:
    for item in items:
        item.setdefault("id", str(uuid.uuid4()))
    return server.request(
        "thread/record", {"threadId": tid, "sessionId": sid, "items": list(items)}
    )


def started(server: ServerProcess, cwd: Path, **extra: Any) -> tuple[str, str]:
    result = server.request("thread/start", {"cwd": str(cwd), **extra})
    return result["thread"]["threadId"], result["sessionId"]


def test_seed_scenario_wrong_repo_then_wrong_branch_then_accepted_drift(
    spawn: Spawn, make_repo: Callable[..., Path]
) -> None:
    repo_a = make_repo("repo-a", "main")
    git(repo_a, "checkout", "-q", "-b", "fix/payment")
    (repo_a / "CHANGELOG").write_text("payment fix in progress\n")
    git(repo_a, "add", ".")
    git(repo_a, "commit", "-q", "-m", "wip")
    repo_b = make_repo("repo-b", "main")
    server = spawn()
    server.initialize([str(repo_a)])
    tid, sid = started(server, repo_a)
    for n, name in enumerate(("payment.py", "refund.py")):
        edit = server.request("fs/applyEdit", {
            "threadId": tid, "sessionId": sid, "operationId": f"op-{n}",
            "path": name, "content": f"# fixed {name}\n"})  # fmt: skip
        assert edit["outcome"] == "applied"
    head = git(repo_a, "rev-parse", "HEAD")
    record(server, tid, sid, {"type": "verifier", "name": "tests", "passed": 7, "total": 9,
                              "headSha": head})  # fmt: skip
    server.kill9()

    again = spawn()
    again.initialize([str(repo_a), str(repo_b)])
    elsewhere = again.request("thread/resume", {"threadId": tid, "cwd": str(repo_b)})
    assert elsewhere["status"] == "needs_review"
    assert elsewhere["session"]["sessionId"] is None
    fields = {d["field"] for d in elsewhere["environment"]["drift"] if d["severity"] == "block"}
    assert {"cwd", "repo"} <= fields

    git(repo_a, "checkout", "-q", "main")
    switched = again.request("thread/resume", {"threadId": tid})
    assert switched["status"] == "needs_review"
    [branch] = [d for d in switched["environment"]["drift"] if d["field"] == "branch"]
    assert (branch["recorded"], branch["current"], branch["severity"]) == (
        "fix/payment", "main", "block")  # fmt: skip

    accepted = again.request("thread/resume", {"threadId": tid, "acceptDrift": True})
    assert accepted["status"] == "ready" and accepted["session"]["sessionId"]
    verifier = subsystem(accepted, "verifier")
    assert verifier["status"] == "invalidated" and "HEAD moved" in verifier["reason"]
    assert [s["name"] for s in accepted["subsystems"]] == [
        "worktree", "permissions", "model_override", "prompt_sections", "messages", "todos",
        "file_history", "attribution", "cost", "operations", "verifier"]  # fmt: skip
    items = again.request("thread/read", {"threadId": tid})["items"]
    assert [i["type"] for i in items if i["type"] == "drift_accepted"] == ["drift_accepted"]
    meta = [i for i in items if i["type"] == "session_meta"][-1]
    assert meta["reason"] == "acceptDrift" and meta["branch"] == "main"


def test_every_subsystem_survives_a_restart(spawn: Spawn, make_repo: Callable[..., Path]) -> None:
    repo = make_repo("repo", "main")
    (repo / "AGENTS.md").write_text("Use tabs.\n")
    (repo / "notes.txt").write_text("x")  # the user's own edit, recorded by the harness
    server = spawn()
    server.initialize([str(repo)])
    tid, sid = started(
        server,
        repo,
        model="gpt-5",
        permissions={"approvalMode": "on-failure", "sandbox": "workspace-write"},
    )
    server.request(
        "fs/applyEdit",
        {
            "threadId": tid,
            "sessionId": sid,
            "operationId": "e1",
            "path": "app.py",
            "content": "print('hi')\n",
        },
    )
    record(
        server, tid, sid,
        {"type": "model_override", "model": "claude-opus"},
        {"type": "permissions", "approvalMode": "on-request", "sandbox": "read-only",
         "toolProfile": "coding"},
        {"type": "prompt_section", "name": "agents", "content": "Use tabs.\n",
         "path": str(repo / "AGENTS.md"), "sha": sha("Use tabs.\n"), "cacheable": True},
        {"type": "prompt_section", "name": "style", "content": "Be brief."},
        {"type": "message", "role": "user", "content": "add a greeting", "turnId": "t1"},
        {"type": "message", "role": "assistant", "content": "done", "turnId": "t1"},
        {"type": "todos", "items": [{"id": "1", "content": "greet", "status": "completed"},
                                    {"id": "2", "content": "test", "status": "pending"}]},
        {"type": "file_edit", "path": "notes.txt", "beforeSha": None, "afterSha": sha("x"),
         "author": "user"},
        {"type": "cost", "model": "claude-opus", "inputTokens": 100, "outputTokens": 20,
         "usd": 0.5},
        {"type": "cost", "model": "gpt-5", "inputTokens": 10, "outputTokens": 2, "usd": 0.25},
        {"type": "operation", "operationId": "search-1", "tool": "grep", "effect": "read",
         "state": "started"},
        {"type": "verifier", "name": "tests", "passed": 9, "total": 9,
         "headSha": git(repo, "rev-parse", "HEAD")},
    )  # fmt: skip
    server.kill9()

    again = spawn()
    again.initialize([str(repo)])
    report = again.request("thread/resume", {"threadId": tid})
    assert report["status"] == "ready"
    assert report["continueReason"] == "process_recovery"
    assert subsystem(report, "worktree")["state"]["branch"] == "main"
    assert subsystem(report, "permissions")["state"] == {
        "approvalMode": "on-request",
        "sandbox": "read-only",
        "toolProfile": "coding",
    }
    assert subsystem(report, "model_override")["state"] == {"model": "claude-opus"}
    sections = {s["name"]: s for s in subsystem(report, "prompt_sections")["state"]["sections"]}
    assert sections["agents"]["cacheable"] is True and not sections["agents"].get("stale")
    assert sections["style"]["content"] == "Be brief."
    assert [m["content"] for m in report["messages"]["items"]] == ["add a greeting", "done"]
    assert [t["status"] for t in subsystem(report, "todos")["state"]["items"]] == [
        "completed",
        "pending",
    ]
    history = subsystem(report, "file_history")["state"]["files"]
    app = next(f for f in history if f["path"].endswith("app.py"))
    assert app["afterSha"] == sha("print('hi')\n") and app["diverged"] is False
    attribution = subsystem(report, "attribution")["state"]["files"]
    assert attribution["notes.txt"]["lastAuthor"] == "user"
    cost = subsystem(report, "cost")["state"]
    assert (cost["inputTokens"], cost["outputTokens"], cost["usd"]) == (110, 22, 0.75)
    [pending] = report["pendingOperations"]
    assert (pending["operationId"], pending["recovery"]) == ("search-1", "safe_to_retry")
    assert subsystem(report, "verifier")["status"] == "restored"
    assert subsystem(report, "verifier")["state"]["checkpoints"][0]["passed"] == 9
    # The new session carries what was restored, so the next resume starts from it too.
    meta = again.request("thread/read", {"threadId": tid})["items"][-1]
    assert meta["type"] == "session_meta" and meta["model"] == "claude-opus"
    assert meta["permissions"]["approvalMode"] == "on-request"


def test_dangerous_permissions_come_back_downgraded(spawn: Spawn, tmp_path: Path) -> None:
    server = spawn()
    server.initialize()
    tid, sid = started(server, tmp_path)
    record(server, tid, sid, {"type": "permissions", "approvalMode": "bypassPermissions",
                              "sandbox": "danger-full-access"})  # fmt: skip
    server.request("thread/close", {"threadId": tid, "sessionId": sid})
    report = server.request("thread/resume", {"threadId": tid})
    permissions = subsystem(report, "permissions")
    assert permissions["state"]["approvalMode"] == "on-request"
    assert permissions["state"]["sandbox"] == "workspace-write"
    assert "bypassPermissions" in permissions["reason"]
    assert report["continueReason"] == "user"  # closed cleanly before


def test_unavailable_model_and_changed_prompt_file_are_invalidated(
    server: ServerProcess, tmp_path: Path
) -> None:
    agents = tmp_path / "AGENTS.md"
    agents.write_text("old rules")
    tid, sid = started(server, tmp_path, model="gpt-4-legacy")
    record(server, tid, sid, {"type": "prompt_section", "name": "agents", "content": "old rules",
                              "path": str(agents), "sha": sha("old rules")})  # fmt: skip
    server.request("thread/close", {"threadId": tid, "sessionId": sid})
    agents.write_text("new rules")
    report = server.request("thread/resume", {"threadId": tid, "availableModels": ["gpt-5"]})
    assert subsystem(report, "model_override")["status"] == "invalidated"
    prompt = subsystem(report, "prompt_sections")
    assert prompt["status"] == "invalidated"
    [section] = prompt["state"]["sections"]
    assert section["stale"] is True and section["content"] == "new rules"


def test_clear_and_compact_keep_state_and_reset_the_conversation(
    spawn: Spawn, tmp_path: Path
) -> None:
    server = spawn()
    server.initialize()
    tid, sid = started(server, tmp_path)
    todos = [{"id": "1", "content": "ship", "status": "in_progress"}]
    record(
        server,
        tid,
        sid,
        {"type": "message", "role": "user", "content": "before clear"},
        {"type": "todos", "items": todos},
        {"type": "cost", "model": "m", "inputTokens": 5, "outputTokens": 1, "usd": 1.0},
    )
    cleared = server.request("thread/clear", {"threadId": tid, "sessionId": sid})
    assert cleared["previousSessionId"] == sid and cleared["sessionId"] != sid
    with pytest.raises(RpcError) as stale:
        record(server, tid, sid, {"type": "message", "role": "user", "content": "old session"})
    assert stale.value.kind == "StaleSession"
    sid = cleared["sessionId"]
    record(
        server,
        tid,
        sid,
        {"type": "message", "role": "user", "content": "after clear"},
        {"type": "cost", "model": "m", "inputTokens": 5, "outputTokens": 1, "usd": 1.0},
    )
    server.kill9()

    again = spawn()
    again.initialize()
    report = again.request("thread/resume", {"threadId": tid})
    assert [m["content"] for m in report["messages"]["items"]] == ["after clear"]
    assert subsystem(report, "todos")["state"]["items"] == todos
    assert subsystem(report, "cost")["state"]["usd"] == 2.0
    sid = report["session"]["sessionId"]
    record(again, tid, sid, {"type": "cost", "model": "m", "inputTokens": 1, "outputTokens": 1,
                             "usd": 0.5})  # fmt: skip
    compact = again.request(
        "thread/compact", {"threadId": tid, "sessionId": sid, "summary": "User wants to ship."}
    )
    record(again, tid, sid, {"type": "message", "role": "user", "content": "after compact"})
    again.request("thread/close", {"threadId": tid, "sessionId": sid})
    report = again.request("thread/resume", {"threadId": tid})
    first, second = report["messages"]["items"]
    assert (first["type"], first["summary"], first["seq"]) == (
        "compact_boundary",
        "User wants to ship.",
        compact["boundarySeq"],
    )
    assert second["content"] == "after compact"
    assert subsystem(report, "todos")["state"]["items"] == todos
    assert subsystem(report, "cost")["state"]["usd"] == 2.5
    metas = [i for i in again.request("thread/read", {"threadId": tid})["items"]
             if i["type"] == "session_meta"]  # fmt: skip
    assert [m["source"] for m in metas] == ["startup", "clear", "resume", "resume"]
    assert metas[1]["parentSessionId"] == cleared["previousSessionId"]


def _edit(server: ServerProcess, tid: str, sid: str, op: str, path: str, text: str) -> dict:
    return server.request("fs/applyEdit", {"threadId": tid, "sessionId": sid, "operationId": op,
                                           "path": path, "content": text})  # fmt: skip


def test_client_recorded_operations_get_their_recovery_class(spawn: Spawn, tmp_path: Path) -> None:
    server = spawn()
    server.initialize()
    tid, sid = started(server, tmp_path)
    record(
        server, tid, sid,
        {"type": "operation", "operationId": "plan", "tool": "deploy", "effect": "side_effect",
         "state": "planned"},
        {"type": "operation", "operationId": "mail", "tool": "send_email",
         "effect": "side_effect", "state": "started"},
        {"type": "operation", "operationId": "fetch", "tool": "http_get", "effect": "idempotent",
         "state": "started"},
        {"type": "operation", "operationId": "pay", "tool": "charge", "effect": "side_effect",
         "state": "started"},
        {"type": "operation", "operationId": "pay", "tool": "charge", "effect": "side_effect",
         "state": "committed", "resultPersisted": False},
        {"type": "operation", "operationId": "done", "tool": "charge", "effect": "side_effect",
         "state": "committed", "resultPersisted": True},
    )  # fmt: skip
    server.kill9()
    again = spawn()
    again.initialize()
    report = again.request("thread/resume", {"threadId": tid})
    classes = {p["operationId"]: p["recovery"] for p in report["pendingOperations"]}
    assert classes == {"plan": "not_started", "mail": "needs_review", "fetch": "safe_to_retry",
                       "pay": "committed_result_missing"}  # fmt: skip


def test_rewind_restores_files_and_conversation_but_not_over_user_changes(
    server: ServerProcess, tmp_path: Path
) -> None:
    target = tmp_path / "app.py"
    target.write_text("v0\n")
    tid, sid = started(server, tmp_path)
    record(server, tid, sid, {"type": "message", "role": "user", "content": "one", "turnId": "t1"})
    _edit(server, tid, sid, "e1", "app.py", "v1\n")
    record(server, tid, sid, {"type": "turn", "turnId": "t1", "phase": "completed"})
    record(server, tid, sid, {"type": "message", "role": "user", "content": "two", "turnId": "t2"})
    _edit(server, tid, sid, "e2", "app.py", "v2\n")
    _edit(server, tid, sid, "e3", "new.py", "created\n")
    target.write_text("user edit\n")
    with pytest.raises(RpcError) as refused:
        server.request("thread/rewind", {"threadId": tid, "sessionId": sid, "toTurnId": "t1"})
    assert refused.value.kind == "ConflictingOperation"
    assert target.read_text() == "user edit\n"
    rewound = server.request(
        "thread/rewind", {"threadId": tid, "sessionId": sid, "toTurnId": "t1", "force": True}
    )
    assert target.read_text() == "v1\n" and not (tmp_path / "new.py").exists()
    assert rewound["conversation"] is True
    server.request("thread/close", {"threadId": tid, "sessionId": sid})
    report = server.request("thread/resume", {"threadId": tid})
    assert [m["content"] for m in report["messages"]["items"]] == ["one"]
