"""`sessiond export` and `sessiond import sessiond`: a thread recorded by a real server
process — a message, an edit through fs/applyEdit (its blobs), a failed command, a todo
change, a turn's cost and a sub-agent under the call that ran it — written as Markdown,
JSON and HTML by the real CLI, the JSON taken back as an equal thread, the archive of
every thread, the encrypted page."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BOTH_STORES, git
from tests.support.rpc_client import REPO, RpcError, ServerProcess
from tests.support.wait import eventually

Spawn = Callable[..., ServerProcess]
PLANTED = ("zebrafish", "quokka", "narwhal", "axolotl", "pangolin")
"""Words placed in the thread's message, failed output, sub-agent, todo and edit."""


def sessiond(home: Path, *args: str, store: str | None = None) -> subprocess.CompletedProcess:
    """The real CLI on the test's data dir (and store: in the environment, as a URL with a
    password must be)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if store is not None:
        env["SESSIOND_STORE"] = store
    return subprocess.run([sys.executable, "-m", "server.cli", "--home", str(home), *args],
                          cwd=REPO, capture_output=True, env=env)  # fmt: skip


@dataclass
class Recorded:
    tid: str
    child: str
    workspace: Path


def record(server: ServerProcess, workspace: Path) -> Recorded:
    """The thread every test exports, in a git repository on branch `main`."""
    workspace.mkdir()
    git(workspace, "init", "-q", "-b", "main")
    (workspace / "pay.py").write_text("def pay():\n    return None\n")
    git(workspace, "add", ".")
    git(workspace, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "start")
    server.initialize([str(workspace)])
    started = server.request("thread/start", {"cwd": str(workspace), "title": "Payment bug"})
    tid, sid = started["thread"]["threadId"], started["sessionId"]

    def put(*items: dict[str, Any]) -> None:
        server.request("thread/record", {"threadId": tid, "sessionId": sid, "items": list(items)})

    put(
        {"type": "message", "id": "m1", "role": "user", "content": "fix the zebrafish payment"},
        {"type": "message", "id": "m2", "role": "assistant", "content": "Running the tests."},
        {"type": "operation", "id": "o1", "operationId": "run-1", "tool": "shell",
         "effect": "side_effect", "state": "started", "command": "pytest -q"},
        {"type": "operation", "id": "o2", "operationId": "run-1", "tool": "shell",
         "effect": "side_effect", "state": "failed", "command": "pytest -q", "exitCode": 1,
         "resultPersisted": True, "result": "FAILED test_pay.py::test_quokka - AssertionError"},
        {"type": "todos", "id": "t1", "items": [
            {"id": "1", "content": "fix the axolotl rounding", "status": "in_progress"},
            {"id": "2", "content": "add a test", "status": "pending"}]},
        {"type": "operation", "id": "o3", "operationId": "task-1", "tool": "task",
         "effect": "read", "state": "started"},
    )  # fmt: skip
    child = server.request("thread/start", {
        "cwd": str(workspace), "title": "explore", "parentThreadId": tid,
        "parentOperationId": "task-1"})  # fmt: skip
    server.request("thread/record", {
        "threadId": child["thread"]["threadId"], "sessionId": child["sessionId"], "items": [
            {"type": "message", "id": "c1", "role": "assistant",
             "content": "the narwhal module rounds twice"},
            {"type": "cost", "id": "c2", "model": "claude-sonnet-4-5", "inputTokens": 10,
             "outputTokens": 5, "usd": 0.25}]})  # fmt: skip
    server.request("thread/close", {"threadId": child["thread"]["threadId"],
                                    "sessionId": child["sessionId"]})  # fmt: skip
    put({"type": "operation", "id": "o4", "operationId": "task-1", "tool": "task",
         "effect": "read", "state": "committed", "resultPersisted": True, "result": "done",
         "childThreadId": child["thread"]["threadId"]})  # fmt: skip
    edit = server.request("fs/applyEdit", {
        "threadId": tid, "sessionId": sid, "operationId": str(uuid.uuid4()), "path": "pay.py",
        "content": "def pay():\n    return pangolin()\n"})  # fmt: skip
    assert edit["outcome"] == "applied"
    put(
        {"type": "todos", "id": "t2", "items": [
            {"id": "1", "content": "fix the axolotl rounding", "status": "completed"},
            {"id": "2", "content": "add a test", "status": "pending"}]},
        {"type": "cost", "id": "k1", "model": "claude-sonnet-4-5", "inputTokens": 1200,
         "outputTokens": 300, "usd": 1.5},
    )  # fmt: skip
    server.request("thread/close", {"threadId": tid, "sessionId": sid})
    return Recorded(tid, child["thread"]["threadId"], workspace)


@pytest.fixture
def recorded(spawn: Spawn, tmp_path: Path) -> Recorded:
    server = spawn()
    done = record(server, tmp_path / "work")
    server.shutdown()
    return done


def export(home: Path, *args: str, store: str | None = None) -> str:
    done = sessiond(home, "export", *args, store=store)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


@BOTH_STORES
def test_markdown_shows_the_edit_the_failed_command_the_todos_the_cost_and_the_sub_agent(
    home: Path, recorded: Recorded, store_url: str | None
) -> None:
    git(recorded.workspace, "checkout", "-q", "-b", "elsewhere")  # the workspace drifted
    md = export(home, recorded.tid[:8], "--format", "md", store=store_url)
    assert md.startswith("# Payment bug\n")
    assert "Redaction has already run" in md
    assert "The workspace changed since this thread ran (a resume needs review): branch: main" \
        " → elsewhere" in md  # fmt: skip
    assert "fix the zebrafish payment" in md
    failed = md.index("**✗ failed** ⚙ shell failed")
    assert "FAILED test\\_pay.py" not in md[failed:], "a result is fenced, not escaped"
    assert "FAILED test_pay.py::test_quokka - AssertionError" in md[failed:]
    assert "-    return None\n+    return pangolin()" in md, "the edit's diff, from its blobs"
    assert "  - [>] fix the axolotl rounding" in md and "  - [x] fix the axolotl" in md
    assert "claude-sonnet-4-5: 1200 in, 300 out tokens, $1.5000" in md
    # The sub-agent, quoted under the call that ran it, after that call ended
    task_ended = md.index("task committed")
    assert md.index(f"> **sub-agent thread {recorded.child}: explore**") > task_ended
    assert "> the narwhal module rounds twice" in md
    assert "$1.7500 spent (sub-agents $0.2500)" in md


def test_html_is_one_page_with_calls_collapsed_and_the_failure_marked(
    home: Path, recorded: Recorded, tmp_path: Path
) -> None:
    git(recorded.workspace, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q",
        "--allow-empty", "-m", "later")  # fmt: skip
    out = tmp_path / "thread.html"
    export(home, recorded.tid, "--format", "html", "-o", str(out))
    page = out.read_text()
    banner = '<div class="banner" role="alert">⚠ The workspace changed since this thread ran '
    assert banner + "(a resume would warn): head: " in page, "HEAD moved: a warning"
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    assert "<script src" not in page and "<link" not in page and "://" not in page
    assert "default-src 'none'" in page, "and the page may fetch nothing"
    assert "prefers-color-scheme:dark" in page and "@media print" in page
    assert '<input type="search"' in page
    assert ('<details class="e op failed"><summary><span class="bad">✗ failed</span> ⚙ shell '
            "failed") in page  # fmt: skip
    assert "FAILED test_pay.py::test_quokka" in page
    assert '<span class="add">+    return pangolin()</span>' in page
    assert '<li class="doing">[&gt;] fix the axolotl rounding</li>' in page
    assert f'<details class="sub" open><summary>sub-agent thread {recorded.child}' in page
    assert "the narwhal module rounds twice" in page
    assert "Redaction has already run" in page


def test_html_escapes_what_was_recorded(spawn: Spawn, home: Path, tmp_path: Path) -> None:
    server = spawn()
    server.initialize()
    started = server.request("thread/start", {"cwd": str(tmp_path)})
    tid, sid = started["thread"]["threadId"], started["sessionId"]
    server.request("thread/record", {"threadId": tid, "sessionId": sid, "items": [
        {"type": "message", "id": "m", "role": "user",
         "content": "<script>alert(1)</script><img src=x onerror=alert(2)>"}]})  # fmt: skip
    server.shutdown()
    page = export(home, tid, "--format", "html")
    assert "<script>alert" not in page and "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def items_of(server: ServerProcess, tid: str) -> list[dict[str, Any]]:
    return server.request("thread/read", {"threadId": tid, "limit": 10000})["items"]


@BOTH_STORES
def test_json_is_the_stored_items_and_imports_back_as_an_equal_thread(
    spawn: Spawn, home: Path, recorded: Recorded, tmp_path: Path, store_url: str | None
) -> None:
    out = tmp_path / "thread.json"
    export(home, recorded.tid, "--format", "json", "-o", str(out), store=store_url)
    data = json.loads(out.read_text())
    server = spawn()
    server.initialize()
    before = items_of(server, recorded.tid)
    child_before = items_of(server, recorded.child)
    assert data["items"] == before, "JSON is the protocol's items, as stored"
    assert data["subAgents"][0]["items"] == child_before
    assert data["thread"]["threadId"] == recorded.tid and "Redaction" in data["redacted"]
    server.request("thread/delete", {"threadId": recorded.child})
    server.request("thread/delete", {"threadId": recorded.tid})
    server.shutdown()

    back = sessiond(home, "import", "sessiond", str(out), store=store_url)
    assert back.returncode == 0, back.stderr.decode()
    assert back.stdout.decode().splitlines() == [
        f"imported thread {recorded.tid} ({len(before)} items)",
        f"imported thread {recorded.child} ({len(child_before)} items)",
    ]
    server = spawn()
    server.initialize()
    assert items_of(server, recorded.tid) == before
    assert items_of(server, recorded.child) == child_before
    (under,) = server.request("thread/list", {"parentThreadId": recorded.tid})["threads"]
    assert under["threadId"] == recorded.child
    server.shutdown()

    again = sessiond(home, "import", "sessiond", str(out), store=store_url)
    assert again.returncode == 0, again.stderr.decode()
    first, second = again.stdout.decode().splitlines()
    assert first.startswith(f"thread {recorded.tid} is stored already: imported as a copy, ")
    copy = first.split("thread ")[-1].split(" ")[0]
    child_copy = second.split("thread ")[-1].split(" ")[0]
    server = spawn()
    server.initialize()
    relinked = [{**item, "childThreadId": child_copy} if item.get("childThreadId") else item
                for item in before]  # fmt: skip
    assert items_of(server, copy) == relinked, "the same items, linked to the copied sub-agent"
    (under,) = server.request("thread/list", {"parentThreadId": copy})["threads"]
    assert under["threadId"] == child_copy, "the copy's sub-agent is the copied one"
    server.shutdown()


def test_import_refuses_what_is_not_an_export_and_writes_nothing(
    home: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "notes.json"
    bad.write_text('{"hello": 1}')
    done = sessiond(home, "import", "sessiond", str(bad))
    assert done.returncode == 2
    assert "is not a sessiond JSON export (no `sessiondExport: 1`): make one with " \
        "`sessiond export ID --format json -o FILE`" in done.stderr.decode()  # fmt: skip
    assert sessiond(home, "list", "-q").stdout == b""


def test_export_all_writes_an_index_by_folder_and_date(
    spawn: Spawn, home: Path, recorded: Recorded, tmp_path: Path
) -> None:
    server = spawn()
    server.initialize()
    (tmp_path / "other").mkdir()
    server.request("thread/start", {"cwd": str(tmp_path / "other"), "title": "Second"})
    server.shutdown()
    out = tmp_path / "archive"
    printed = export(home, "--all", str(out))
    assert printed.startswith("2 threads written under ")
    index = (out / "index.html").read_text()
    assert index.index(str(recorded.workspace)) != -1 and str(tmp_path / "other") in index
    pages = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.html"))
    assert len(pages) == 3, pages
    for page in pages:
        if page != "index.html":
            assert f'href="{page}"' in index
            assert page.split("/")[1][:10].count("-") == 2, "named by date"
    payment = next(p for p in pages if "Payment-bug" in p)
    assert "the narwhal module rounds twice" in (out / payment).read_text()


def test_a_passphrase_is_never_taken_from_argv_and_only_html_is_encrypted(
    home: Path, recorded: Recorded, tmp_path: Path
) -> None:
    secret = tmp_path / "pass"
    secret.write_text("correct horse battery\n")
    done = sessiond(home, "export", recorded.tid, "--format", "md", "--passphrase-file",
                    str(secret))  # fmt: skip
    assert done.returncode == 2 and b"only html is encrypted" in done.stderr
    done = sessiond(home, "export", recorded.tid, "--format", "html", "--passphrase",
                    "correct horse battery")  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == b"sessiond: a passphrase is never taken on the command line (every " \
        b"local user reads argv): use --passphrase-file FILE or --encrypt\n"  # fmt: skip
    done = sessiond(home, "export", recorded.tid, "--format", "html", "--encrypt")
    assert done.returncode == 2 and b"use --passphrase-file FILE" in done.stderr


def export_rpc(server: ServerProcess, tid: str, **params: Any) -> tuple[bytes, list[dict]]:
    """thread/export read to its end: the document and every answer."""
    answers = [server.request("thread/export", {"threadId": tid, **params})]
    while answers[-1]["nextCursor"] is not None:
        answers.append(server.request("thread/export", {
            "threadId": tid, **params, "cursor": answers[-1]["nextCursor"]}))  # fmt: skip
    return "".join(a["data"] for a in answers).encode(), answers


@BOTH_STORES
def test_thread_export_answers_the_document_in_parts_and_leaves_no_spool(
    spawn: Spawn, home: Path, tmp_path: Path, store_url: str | None
) -> None:
    server = spawn(args=["--max-frame", "8192"])  # parts of at most 1 KiB
    done = record(server, tmp_path / "work")
    md, answers = export_rpc(server, done.tid, format="md")
    assert len(answers) > 1, "a part is at most an eighth of the frame limit"
    assert {a["mediaType"] for a in answers} == {"text/markdown"}
    assert answers[0]["fileName"] == f"Payment-bug-{done.tid[:8]}.md"
    assert answers[0]["size"] == len(md)
    assert md.decode() == export(home, done.tid, "--format", "md", store=store_url), "the CLI's"
    data, _ = export_rpc(server, done.tid, format="json")
    assert json.loads(data)["items"] == items_of(server, done.tid)
    assert list((home / "exports").iterdir()) == [], "each spool removed once read"
    with pytest.raises(RpcError) as gone:
        server.request("thread/export", {"threadId": done.tid, "format": "md",
                                         "cursor": answers[1]["nextCursor"] or "x"})  # fmt: skip
    assert gone.value.kind == "InvalidParams"
    with pytest.raises(RpcError) as missing:
        server.request("thread/export", {"threadId": str(uuid.uuid4())})
    assert missing.value.kind == "ThreadNotFound"
    with pytest.raises(RpcError) as plain:
        server.request("thread/export", {"threadId": done.tid, "format": "md",
                                         "passphrase": "correct horse"})  # fmt: skip
    assert plain.value.kind == "InvalidParams"
    server.shutdown()


def _exporters(home: Path) -> list[int]:
    """Pids of `sessiond export` processes writing into this data dir's spool."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"export" in argv and str(home / "exports").encode() in b" ".join(argv):
            found.append(int(entry.name))
    return found


def test_an_export_dies_with_a_killed_server_and_its_spool_is_swept_later(
    spawn: Spawn, home: Path, tmp_path: Path
) -> None:
    from bench.export import write_thread

    thread_id = write_thread(home, 100_000)  # long enough to be caught in the middle
    server = spawn()
    server.initialize()
    server.request_async("thread/export", {"threadId": thread_id, "format": "html"})
    (writer,) = eventually(lambda: _exporters(home) or None, "the export's writer")
    server.kill9()
    eventually(lambda: writer not in _exporters(home), "the writer gone with the server")

    # Killed, not finished: it never renamed its document into place (a finished one would
    # have), only its temporary file is left, for the sweep
    left = sorted((home / "exports").iterdir())
    assert all(p.name.startswith(".") and p.name.endswith(".tmp") for p in left), left
    stale = home / "exports" / ("0" * 32)
    stale.write_text("an export nobody read to its end")
    os.utime(stale, (0, 0))  # left an hour ago and more
    again = spawn()
    again.initialize()
    started = again.request("thread/start", {"cwd": str(tmp_path), "title": "short"})
    data, _ = export_rpc(again, started["thread"]["threadId"], format="md")
    assert data.startswith(b"# short\n")
    assert not stale.exists(), "a spool file over an hour old is swept by the next export"
    again.shutdown()
