"""The data directory as a new user meets it: a file, unreadable, not creatable, read-only.

Every filesystem failure reaches a client as a typed StorageError (or StorageFull) naming
the path, never -32603; the command line says it in one line with exit code 2; and a
read-only home (a backup, another machine's data) is served read-only rather than refused.
Read-only and unreadable directories are made for real (tests/support/confine.py), not faked with
permission bits root would ignore.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import confine
from tests.support.rpc_client import REPO, RpcError, ServerProcess


def sessiond(
    home: Path, *args: str, prefix: list[str] | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*(prefix or []), sys.executable, "-m", "server.cli", *args, "--home", str(home)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def _storage_error(server: ServerProcess, method: str, params: dict[str, object]) -> RpcError:
    with pytest.raises(RpcError) as caught:
        server.request(method, params)
    assert caught.value.kind == "StorageError", caught.value.message
    assert caught.value.code == -32019
    return caught.value


def _tree_digest(home: Path) -> dict[str, str]:
    return {
        str(path.relative_to(home)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(home.rglob("*"))
        if path.is_file()
    }


def test_home_that_is_a_file_is_a_typed_storage_error_on_every_request(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.write_text("not a directory")
    server = ServerProcess(home)
    try:
        server.initialize()  # touches nothing: no warmup, so it still answers
        for method, params in (
            ("thread/list", {}),
            ("thread/start", {"cwd": str(tmp_path)}),
            ("thread/read", {"threadId": "7f9a3c1e-0000-4000-8000-000000000001"}),
        ):
            error = _storage_error(server, method, params)
            assert error.message == f"{home} is not a directory"
            assert error.data["path"] == str(home)
        home.unlink()  # the user fixes it: the next request uses the directory
        assert server.request("thread/list", {})["threads"] == []
        assert home.is_dir()
    finally:
        server.close()


def test_home_that_cannot_be_created_names_the_path(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    home = tmp_path / "file" / "home"
    done = sessiond(home, "list")
    assert done.returncode == 2
    assert done.stderr == f"sessiond: StorageError: cannot use {home}: Not a directory\n"


@pytest.mark.parametrize(
    "command",
    [["list"], ["show", "7f9a3c1e-0000-4000-8000-000000000001"], ["doctor"],
     ["serve", "--ws", "0"], ["resume", "7f9a"], ["delete", "7f9a", "--yes"],
     ["import", "claude"], ["client", "--spawn", "list"], ["client", "list"]],
)  # fmt: skip
def test_cli_says_a_home_that_is_a_file_in_one_line_with_exit_code_2(
    tmp_path: Path, command: list[str]
) -> None:
    home = tmp_path / "home"
    home.write_text("x")
    done = sessiond(home, *command)
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"sessiond: StorageError: {home} is not a directory\n"
    assert done.stdout == ""


def test_unreadable_home_is_one_line_and_a_typed_error_on_the_wire(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "threads").mkdir(parents=True)
    with confine.unreadable(home) as prefix:
        done = sessiond(home, "list", prefix=prefix)
        assert done.returncode == 2
        assert done.stderr == f"sessiond: StorageError: cannot read {home}: Permission denied\n"
        server = ServerProcess(home, prefix=prefix)
        try:
            server.initialize()
            error = _storage_error(server, "thread/list", {})
            assert error.data["path"] == str(home)
        finally:
            server.close()


def test_an_index_sqlite_cannot_open_is_a_storage_error_naming_the_index(
    home: Path, tmp_path: Path
) -> None:
    _record_a_thread(home, tmp_path)
    index = home / "index.sqlite3"
    with confine.unreadable(index) as prefix:  # mode 000, binding root too
        server = ServerProcess(home, prefix=prefix)
        try:
            server.initialize()
            error = _storage_error(server, "thread/list", {})
        finally:
            server.close()
    assert error.data["path"] == str(index)
    assert "-32603" not in error.message and "OperationalError" not in error.message
    assert index.stat().st_size > 0  # left as it was: a permission says nothing of its contents


def _record_a_thread(home: Path, cwd: Path) -> str:
    server = ServerProcess(home)
    try:
        server.initialize()
        started = server.request("thread/start", {"cwd": str(cwd), "title": "backup"})
        tid, sid = started["thread"]["threadId"], started["sessionId"]
        item = {"type": "message", "id": "m1", "role": "user", "content": "fix the payment bug"}
        server.request("thread/record", {"threadId": tid, "sessionId": sid, "items": [item]})
        server.shutdown()
    finally:
        server.close()
    return tid


def test_read_only_home_lists_reads_searches_and_resumes_as_a_report(tmp_path: Path) -> None:
    home = tmp_path / "home"
    tid = _record_a_thread(home, tmp_path)
    before = _tree_digest(home)
    with confine.read_only(home) as prefix:
        server = ServerProcess(home, prefix=prefix)
        try:
            server.initialize()
            listed = server.request("thread/list", {})["threads"]
            assert [(t["threadId"], t["title"], t["itemCount"]) for t in listed] == [
                (tid, "backup", 1)
            ]
            items = server.request("thread/read", {"threadId": tid})["items"]
            assert [i.get("content") for i in items if i["type"] == "message"] == [
                "fix the payment bug"
            ]
            # Searched in the index in memory, on the store thread (its only connection).
            found = server.request("thread/search", {"query": "payment"})
            assert [(h["threadId"], h["role"]) for h in found["hits"]] == [(tid, "user")]
            report = server.request("thread/resume", {"threadId": tid, "cwd": str(tmp_path)})
            assert report["session"]["sessionId"] is None
            assert report["status"] == "needs_review" and report["environment"]["drift"] == []
            assert report["readOnly"]["path"] == str(home) and report["readOnly"]["reason"]
            assert len(report["subsystems"]) == 11
            assert [m["content"] for m in report["messages"]["items"]] == ["fix the payment bug"]

            session = "00000000-0000-4000-8000-000000000000"
            for method, params in (
                ("thread/start", {"cwd": str(tmp_path)}),
                ("thread/setTitle", {"threadId": tid, "title": "renamed"}),
                ("thread/archive", {"threadId": tid}),
                ("thread/delete", {"threadId": tid}),
                ("thread/record", {"threadId": tid, "sessionId": session,
                                   "items": [{"type": "message", "id": "m2", "role": "user",
                                              "content": "x"}]}),
            ):  # fmt: skip
                error = _storage_error(server, method, params)
                assert str(home) in error.message and "read-only" in error.message
                assert error.data == {"kind": "StorageError", "path": str(home), "readOnly": True}
        finally:
            server.close()
        listed = sessiond(home, "list", "-q", prefix=prefix)
        assert (listed.returncode, listed.stdout) == (0, f"{tid}\n"), listed.stderr
        checked = sessiond(home, "doctor", prefix=prefix)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "checked 1 thread file, 3 records" in checked.stdout
        assert "index: built in memory (read-only data directory), 1 thread" in checked.stdout
        repair = sessiond(home, "doctor", "--repair", prefix=prefix)
        assert repair.returncode == 2 and "read-only" in repair.stderr
        # Its ledger lives there whatever the store: said as every other write says it
        # (it was `imports.sqlite3: Read-only file system`).
        imported = sessiond(home, "import", "claude", "--from", str(tmp_path), prefix=prefix)
        assert imported.returncode == 2 and imported.stderr.count("\n") == 1, imported.stderr
        assert imported.stderr.startswith(f"sessiond: StorageError: the data directory {home} is")
        assert imported.stderr.endswith("): nothing can be imported into it\n")
        websocket = sessiond(home, "serve", "--ws", "0", prefix=prefix)
        assert websocket.returncode == 2 and websocket.stderr.count("\n") == 1
        assert websocket.stderr.endswith("serve this one with --stdio\n")
        missing = sessiond(home / "not-yet", "list", prefix=prefix)
        assert missing.returncode == 2
        assert missing.stderr.startswith(f"sessiond: StorageError: cannot create {home}/not-yet:")
    assert _tree_digest(home) == before  # nothing was written, not even the index
