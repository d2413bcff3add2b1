"""No warmup (docs/architecture.md): `initialize` reads no thread, opens no
index, loads no store driver, starts no watcher and reads no hook config. Proved from a
real server process through `sessiond/debug` (SESSIOND_DEBUG=1), which reports its modules
and open files."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.rpc_client import REPO, ServerProcess
from tests.support.wait import HANG_GUARD, eventually

Spawn = Callable[..., ServerProcess]
HOOK = Path(__file__).with_name("support") / "hook_program.py"
# Modules that are only loaded when a request needs them.
LAZY_MODULES = (
    "git",  # no Python git library: the probe runs the git command (restore/engine/gitcli.py)
    "watchfiles",
    "sqlite3",  # the thread index: thread/list
    "pydantic",  # param validation: the first request after initialize
    "restore.service",
    "restore.stores.embedded.index",
    "restore.stores",
    "psycopg",  # the PostgreSQL driver: only a postgresql:// store, at its first request
    "server.hooks",  # lifecycle hooks and their configuration
)


def loaded(report: dict[str, Any], name: str) -> bool:
    return any(module == name or module.startswith(name + ".") for module in report["modules"])


def test_initialize_loads_nothing_a_later_request_would_need(
    spawn: Spawn, home: Path, tmp_path: Path
) -> None:
    # A data dir with a thread and an index, user and trusted-workspace hook configs whose
    # hooks would leave a mark: initialize must touch none of them.
    first = spawn()
    first.initialize()
    first.request("thread/start", {"cwd": str(tmp_path)})
    first.request("thread/list", {})
    assert first.shutdown() == 0
    data_files = sorted(str(p) for p in home.rglob("*") if p.is_file())
    marker = tmp_path / "a-hook-ran"
    touch = {
        "type": "command",
        "command": f"{sys.executable} {HOOK} {tmp_path / 'log'} touch {marker}",
    }
    config = {"SessionStart": [{"hooks": [touch]}], "SessionEnd": [{"hooks": [touch]}]}
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "hooks.json").write_text(json.dumps(config))
    workspace = tmp_path / "ws"
    (workspace / ".sessiond").mkdir(parents=True)
    (workspace / ".sessiond" / "hooks.json").write_text(json.dumps(config))

    server = spawn(env={"SESSIOND_DEBUG": "1", "SESSIOND_CONFIG_HOME": str(tmp_path / "config")})
    server.initialize([str(workspace)], trusted=True)
    report = server.request("sessiond/debug")

    assert [name for name in LAZY_MODULES if loaded(report, name)] == []
    assert report["threadServiceCreated"] is False
    assert report["hooksCreated"] is False
    opened = [path for path in report["openFiles"] if path.startswith("/") and "/dev/" not in path]
    assert [path for path in opened if str(home) in path or "hooks.json" in path] == []
    assert sorted(str(p) for p in home.rglob("*") if p.is_file()) == data_files
    assert not marker.exists()

    # The same report after requests that need them: the test can see what it asserts.
    server.request("thread/list", {})
    server.request("thread/start", {"cwd": str(workspace)})
    after = server.request("sessiond/debug")
    assert loaded(after, "sqlite3") and loaded(after, "restore.service")
    assert not loaded(after, "psycopg")  # the embedded store never imports the driver
    assert loaded(after, "server.hooks.lifecycle") and after["hooksCreated"] is True
    # The hook config was live all along: now it ran.
    eventually(marker.exists, "the SessionStart hook ran")


def test_the_debug_method_exists_only_when_asked_for(server: ServerProcess) -> None:
    reply = server.response(server.request_async("sessiond/debug"))
    assert reply["error"]["data"]["kind"] == "MethodNotFound"


# Modules a window's first `thread/list` does not need (issue 26): the resume engine, the
# judge and the git runner come with the first resume or start.
NOT_FOR_A_LIST = ("restore.service.resume", "restore.engine.judge", "restore.engine.gitcli")


def test_a_list_loads_neither_the_resume_engine_nor_git(spawn: Spawn, tmp_path: Path) -> None:
    # A repository: a resume outside one runs no git at all (restore/engine/environment.py).
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    first = spawn()
    first.initialize()
    tid = first.request("thread/start", {"cwd": str(tmp_path)})["thread"]["threadId"]
    assert first.shutdown() == 0

    server = spawn(env={"SESSIOND_DEBUG": "1"})
    server.initialize([str(tmp_path)], trusted=True)
    assert [t["threadId"] for t in server.request("thread/list", {})["threads"]] == [tid]
    report = server.request("sessiond/debug")
    assert [name for name in NOT_FOR_A_LIST if loaded(report, name)] == []

    server.request("thread/resume", {"threadId": tid})
    after = server.request("sessiond/debug")
    assert [name for name in NOT_FOR_A_LIST if loaded(after, name)] == list(NOT_FOR_A_LIST)


# --- what a spawn imports before its first answer (issue 40) --------------------------------
# A window, an ACP editor and every command a person types wait for the imports of a fresh
# process. Each first answer below must not import these (each is measured in
# docs/benchmarks.md, "Opening a window from spawn").
NOT_FOR_THE_VERSION = (
    "argparse",  # the command line's parser tree: `--version` is answered before it
    "logging",
    "dataclasses",
    "inspect",
    "typing",
    "pathlib",
    "asyncio",
    "server.config",
)
NOT_BEFORE_INITIALIZE = (
    "argparse",  # `serve --stdio` is read without it (server/cli/quick.py)
    "gettext",
    "shutil",  # argparse's help formatter imports it, and it bz2, lzma and zlib
    "logging.handlers",
    "pathlib",
    "hashlib",
    "restore.home",  # the data directory is looked at by the first request that needs it
    "restore.engine.subsystems",  # `initialize` names them (restore.engine), imports none
    "server.cli.commands",
    "server.cli.client",
    "tomllib",
)
NOT_FOR_A_FIRST_PAGE = (
    "argparse",
    "shutil",
    "tomllib",  # redaction's rules are read by the first record, not by a listing
    "regex",
    "ahocorasick",
    "hyperscan",
    "restore.redaction.rules",
    "restore.redaction.engine",
    "restore.stores.embedded.search_child",  # and multiprocessing: the first search's
    "restore.imports",  # the watcher's importers: only with `serve --follow`
    "restore.agents.registry",  # and through it every agent's parser
    "pydantic",
)
NOT_FOR_A_COMMAND = (  # the registry allowed: a search hit says how to resume it
    *(name for name in NOT_FOR_A_FIRST_PAGE if name != "restore.agents.registry"),
    "gettext",
    "multiprocessing",
    "asyncio",  # the offline commands run no event loop
    "watchfiles",
)

NOT_FOR_A_USAGE_REPORT = (  # the index file answers (restore/usage/index_file.py)
    *NOT_FOR_A_COMMAND,
    "restore.stores",  # the store interface, its backends and their dataclasses
    "restore.home.state",
    "restore.engine",
    "restore.service",
    "logging.handlers",
    "pathlib",
)


NOT_FOR_AN_ACP_INITIALIZE = (
    "argparse",
    "gettext",
    "shutil",
    "logging.handlers",
    "server.cli.commands",
    "server.cli.client",
    "tomllib",
    "sqlite3",  # sessions are recorded from the first `session/new` on, not before
    "restore.stores",
    "restore.redaction.engine",
    "regex",
    "hyperscan",
    "pydantic",
)


def _importtime(*args: str, stdin: bytes = b"") -> set[str]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        input=stdin, capture_output=True, cwd=REPO, timeout=HANG_GUARD,
        env={**os.environ, "PYTHONPATH": str(REPO), "SESSIOND_DURABILITY": "fsync"},
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr.decode()[-2000:]
    lines = done.stderr.decode().splitlines()
    return {line.rsplit("|", 1)[1].strip() for line in lines if line.startswith("import time:")}


def imported(*args: str, stdin: bytes = b"") -> set[str]:
    """Every module a real `sessiond ARGS` process imported (`python -X importtime`)."""
    return _importtime("-m", "server.cli", *args, stdin=stdin)


@functools.cache
def at_start() -> frozenset[str]:
    """What this environment's interpreter imports for `python -c pass` (its site
    packages' .pth files may import some, as an editable install's does): not sessiond's."""
    return frozenset(_importtime("-c", "pass"))


def denied(modules: set[str] | list[str], names: tuple[str, ...]) -> list[str]:
    report = {"modules": sorted(set(modules) - at_start())}
    return [name for name in names if loaded(report, name)]


def test_the_version_is_printed_before_anything_is_imported(home: Path) -> None:
    modules = imported("--version")
    assert denied(modules, NOT_FOR_THE_VERSION) == []
    assert "server.cli.main" in modules  # the test sees what it asserts


def test_initialize_imports_nothing_its_answer_does_not_need(spawn: Spawn) -> None:
    server = spawn(env={"SESSIOND_DEBUG": "1"})
    server.initialize()
    report = server.request("sessiond/debug")
    assert denied(report["modules"], NOT_BEFORE_INITIALIZE) == []
    assert loaded(report, "asyncio") and loaded(report, "server.handlers.handshake")


def _a_thread(spawn: Spawn, tmp_path: Path) -> Any:
    first = spawn()
    first.initialize()
    started = first.request("thread/start", {"cwd": str(tmp_path)})
    thread_id, session = started["thread"]["threadId"], started["sessionId"]
    item = {"type": "message", "id": str(uuid.uuid4()), "role": "user", "content": "flaky test"}
    first.request("thread/record", {"threadId": thread_id, "sessionId": session, "items": [item]})
    assert first.shutdown() == 0
    return thread_id


def test_a_first_page_makes_no_redactor_and_starts_no_search_process(
    spawn: Spawn, tmp_path: Path
) -> None:
    """Redaction's rules (hundreds of patterns, parsed and compiled) are the first record's
    to make, the search process the first search's."""
    thread_id = _a_thread(spawn, tmp_path)
    server = spawn(env={"SESSIOND_DEBUG": "1"})
    server.initialize([str(tmp_path)], trusted=True)
    assert [t["threadId"] for t in server.request("thread/list", {})["threads"]] == [thread_id]
    report = server.request("sessiond/debug")
    assert denied(report["modules"], NOT_FOR_A_FIRST_PAGE) == []

    session = server.request("thread/resume", {"threadId": thread_id})["session"]["sessionId"]
    item = {"type": "message", "id": str(uuid.uuid4()), "role": "user", "content": "again"}
    server.request("thread/record", {"threadId": thread_id, "sessionId": session, "items": [item]})
    server.request("thread/search", {"query": "flaky"})
    after = server.request("sessiond/debug")
    assert loaded(after, "restore.redaction.engine")
    assert loaded(after, "restore.stores.embedded.search_child")


def test_list_show_and_search_import_only_what_their_answer_needs(
    spawn: Spawn, home: Path, tmp_path: Path
) -> None:
    thread_id = _a_thread(spawn, tmp_path)
    for args in (["list"], ["list", "--json", "--limit", "5"], ["show", thread_id],
                 ["search", "flaky"]):  # fmt: skip
        modules = imported("--home", str(home), *args)
        assert denied(modules, NOT_FOR_A_COMMAND) == [], args
        assert "restore.stores.embedded.index" in modules, args


def test_a_usage_report_imports_no_store(spawn: Spawn, home: Path, tmp_path: Path) -> None:
    """`sessiond usage` over an index that needs no catching up (its shard directories an
    hour old, as a store open recorded them) reads the index file alone."""
    _a_thread(spawn, tmp_path)
    hour_ago = time.time() - 3600
    for shard in (home / "threads").iterdir():
        os.utime(shard, (hour_ago, hour_ago))
    imported("--home", str(home), "list")  # a store open: it records them
    for args in (["usage"], ["usage", "session", "--by", "project", "--json"]):
        modules = imported("--home", str(home), *args)
        assert denied(modules, NOT_FOR_A_USAGE_REPORT) == [], args
        assert "restore.usage.index_file" in modules, args


def test_an_acp_editor_s_initialize_imports_no_store(tmp_path: Path, home: Path) -> None:
    """`sessiond acp -- AGENT`: the agent's answer to `initialize` is relayed before any
    store, parser tree or redaction rule is imported."""
    agent = [sys.executable, str(REPO / "tests" / "support" / "acp_agent.py"), "--caps",
             "resume", "--state", str(tmp_path / "agent")]  # fmt: skip
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": 1, "clientCapabilities": {}}}  # fmt: skip
    modules = imported("--home", str(home), "acp", "--", *agent,
                       stdin=json.dumps(hello).encode() + b"\n")  # fmt: skip
    assert denied(modules, NOT_FOR_AN_ACP_INITIALIZE) == []
    assert "server.acp.proxy" in modules


# --- a stdio spawn's `initialize`, answered before the server is imported ------------------
NOT_BEFORE_AN_EARLY_ANSWER = (
    *NOT_BEFORE_INITIALIZE,
    "asyncio",  # the server's event loop, and with it ssl, socket, subprocess, concurrent
    "orjson",  # which imports dataclasses, inspect, uuid and datetime as it loads
    "dataclasses",
    "inspect",
    "pydantic",
    "sqlite3",
    "server.app",
    "server.rpc.dispatch",
    "restore.stores",
)
FIRST_WRITE = """
import os, sys
real_write = os.write
def write(fd, data):  # the modules loaded when the first answer is written
    if fd == 1 and not hasattr(write, "modules"):
        write.modules = sorted(sys.modules)
        sys.stderr.write("MODULES " + " ".join(write.modules) + "\\n")
        sys.stderr.flush()
    return real_write(fd, data)
os.write = write
sys.argv = ["sessiond", "serve", "--stdio"]
from server.cli.main import main
sys.exit(main())
"""


def _initialize_line(request_id: int, folders: list[str]) -> bytes:
    params = {"workspaceFolders": [{"path": path} for path in folders], "clientInfo": {"name": "t"}}
    message = {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}
    return json.dumps(message).encode() + b"\n"


def _served(stdin: bytes, home: Path, code: str | None = None) -> tuple[list[Any], str]:
    """A real `sessiond serve --stdio` given `stdin` then end of input: its answers in order
    and its stderr."""
    argv = ["-c", code] if code else ["-m", "server.cli", "serve", "--stdio"]
    done = subprocess.run(
        [sys.executable, *argv], input=stdin, capture_output=True, cwd=REPO, timeout=HANG_GUARD,
        env={**os.environ, "PYTHONPATH": str(REPO), "SESSIOND_HOME": str(home)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return [json.loads(line) for line in done.stdout.splitlines()], done.stderr.decode()


def test_a_stdio_spawn_answers_initialize_before_it_imports_the_server(
    home: Path, tmp_path: Path
) -> None:
    """An editor window waits for this answer: it is written before asyncio, orjson and the
    server are imported (server/transport/early.py), and it is the answer the server gives."""
    answers, stderr = _served(_initialize_line(1, [str(tmp_path)]), home, FIRST_WRITE)
    modules = next(line for line in stderr.splitlines() if line.startswith("MODULES "))
    assert denied(modules.split()[1:], NOT_BEFORE_AN_EARLY_ANSWER) == []
    assert "server.handlers.handshake" in modules  # the test sees what it asserts
    # A first line that is not a message leaves every byte to the server itself, which
    # answers `initialize` after it as it always has: the same answer.
    late, _ = _served(b"hello\n" + _initialize_line(1, [str(tmp_path)]), home)
    assert late[0]["error"]["data"]["kind"] == "ParseError"
    assert answers[0] == late[1] and answers[0]["result"]["serverInfo"]["name"] == "sessiond"


def test_requests_right_behind_an_early_initialize_are_all_answered(
    home: Path, tmp_path: Path
) -> None:
    """A script pipes its requests at once: the ones read with `initialize` and the ones
    still in the pipe are the server's, each answered, on the folders `initialize` named."""
    folder = tmp_path / "shop"
    folder.mkdir()
    start = {"jsonrpc": "2.0", "id": 2, "method": "thread/start", "params": {"cwd": str(folder)}}
    listing = {"jsonrpc": "2.0", "id": 3, "method": "thread/list",
               "params": {"workspaceFolder": str(folder)}}  # fmt: skip
    again = {"jsonrpc": "2.0", "id": 4, "method": "initialize", "params": {}}
    stdin = _initialize_line(1, [str(folder)]) + b"".join(
        json.dumps(message).encode() + b"\n" for message in (start, listing, again)
    )
    answers, _ = _served(stdin, home)
    by_id = {answer["id"]: answer for answer in answers if "id" in answer}
    assert sorted(by_id) == [1, 2, 3, 4]
    thread_id = by_id[2]["result"]["thread"]["threadId"]
    assert [t["threadId"] for t in by_id[3]["result"]["threads"]] == [thread_id]
    assert by_id[4]["error"]["message"] == "initialize was already called"


def test_an_early_initialize_keeps_the_clients_framing_and_refuses_what_the_server_refuses(
    home: Path,
) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": "a", "method": "initialize", "params": {}})
    framed = f"Content-Length: {len(body)}\r\n\r\n{body}".encode()
    done = subprocess.run(
        [sys.executable, "-m", "server.cli", "serve", "--stdio"], input=framed,
        capture_output=True, cwd=REPO, timeout=HANG_GUARD,
        env={**os.environ, "PYTHONPATH": str(REPO), "SESSIOND_HOME": str(home)},
    )  # fmt: skip
    assert done.stdout.startswith(b"Content-Length: ")
    assert json.loads(done.stdout.split(b"\r\n\r\n", 1)[1])["id"] == "a"
    # A bad folder list is the server's to refuse, with the error it always gave.
    bad = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"workspaceFolders": 3}}
    answers, _ = _served(json.dumps(bad).encode() + b"\n", home)
    assert answers[0]["error"]["data"]["kind"] == "InvalidParams"
