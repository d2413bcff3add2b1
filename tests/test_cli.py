"""The `sessiond` command line on a real data dir written by a real server."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from protocol.methods import ThreadInfo
from tests.support.rpc_client import REPO, ServerProcess


def sessiond(home: Path, *args: str, stderr: int | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "server.cli", "--home", str(home), *args],
        cwd=REPO,
        capture_output=stderr is None,
        stderr=stderr,
        stdout=subprocess.PIPE if stderr is not None else None,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def test_list_and_show_print_what_the_server_recorded(
    spawn: Callable[..., ServerProcess], home: Path, tmp_path: Path
) -> None:
    server = spawn()
    server.initialize()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    started = server.request("thread/start", {"cwd": str(tmp_path / "a"), "title": "Alpha"})
    tid, sid = started["thread"]["threadId"], started["sessionId"]
    server.request(
        "thread/record",
        {
            "threadId": tid,
            "sessionId": sid,
            "items": [
                {"type": "message", "id": "m1", "role": "user", "content": "fix the payment bug"}
            ],
        },
    )
    server.request("thread/start", {"cwd": str(tmp_path / "b"), "title": "Beta"})
    server.shutdown()

    listed = sessiond(home, "list", "--cwd", str(tmp_path / "a"), "--json")
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["threadId"], r["title"], r["itemCount"]) for r in rows] == [(tid, "Alpha", 1)]
    assert list(rows[0]) == list(ThreadInfo.model_fields)  # --json is the wire's ThreadInfo
    shown = sessiond(home, "show", tid)
    assert "user:\n    fix the payment bug\n" in shown.stdout
    raw = [json.loads(line) for line in sessiond(home, "show", tid, "--json").stdout.splitlines()]
    assert [item["type"] for item in raw] == ["session_meta", "message", "lifecycle"]
    missing = sessiond(home, "show", "../etc/passwd")
    assert missing.returncode == 2
    assert missing.stderr == (
        "sessiond: InvalidId: a thread id is a UUID or its first 4 or more hex digits (as "
        "`sessiond list` and `search` print them), got '../etc/passwd'\n"
    )


def test_doctor_draws_a_progress_bar_on_a_terminal(
    spawn: Callable[..., ServerProcess], home: Path, tmp_path: Path
) -> None:
    server = spawn()
    server.initialize()
    for _ in range(3):
        server.request("thread/start", {"cwd": str(tmp_path)})
    server.shutdown()
    leader, follower = pty.openpty()
    try:
        done = sessiond(home, "doctor", stderr=follower)
        os.close(follower)
        follower = -1
        drawn = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(leader)
        if follower != -1:
            os.close(follower)
    assert done.returncode == 0, done.stdout
    assert "checked 3 thread files" in done.stdout and "clean" in done.stdout
    assert b"Checking thread files" in drawn and b"3/3" in drawn


def _record(server: ServerProcess, tid: str, sid: str, *items: dict[str, object]) -> None:
    server.request("thread/record", {"threadId": tid, "sessionId": sid, "items": list(items)})


def test_list_is_an_aligned_table_with_a_header_and_relative_times(
    spawn: Callable[..., ServerProcess], home: Path, tmp_path: Path
) -> None:
    server = spawn()
    server.initialize()
    short = server.request("thread/start", {"cwd": str(tmp_path), "title": "fix login"})
    long = server.request("thread/start", {"cwd": str(tmp_path), "title": "a much longer title"})
    _record(server, long["thread"]["threadId"], long["sessionId"],
            *({"type": "message", "id": f"m{n}", "role": "user", "content": "hi"}
              for n in range(12)))  # fmt: skip
    server.shutdown()

    done = sessiond(home, "list")
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert header.split() == ["THREAD", "UPDATED", "ITEMS", "BRANCH", "TITLE"]
    assert [row.split()[0] for row in rows] == [
        long["thread"]["threadId"],
        short["thread"]["threadId"],
    ]
    for column in ("UPDATED", "BRANCH", "TITLE"):  # every row's cell starts under its header
        start = header.index(column)
        assert all(row[start - 2 : start] == "  " and row[start] != " " for row in rows), column
    items_end = header.index("ITEMS") + len("ITEMS")
    assert [row[:items_end].split()[-1] for row in rows] == ["12", "0"]  # right-aligned
    assert all("just now" in row for row in rows)
    assert rows[0].endswith("a much longer title") and rows[1].endswith("fix login")
    ids = sessiond(home, "list", "-q").stdout.split()
    assert ids == [long["thread"]["threadId"], short["thread"]["threadId"]]


def test_relative_times_are_said_as_a_person_says_them() -> None:
    from datetime import UTC, datetime

    from server.cli.terminal import relative_time

    now = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
    said = [
        relative_time(when, now)
        for when in ("2026-03-10T11:59:30Z", "2026-03-10T11:15:00Z", "2026-03-10T09:00:00Z",
                     "2026-03-07T12:00:00Z", "2026-02-24T12:00:00Z", "2025-12-01T08:00:00Z", None)
    ]  # fmt: skip
    assert said == ["just now", "45 min ago", "3h ago", "3d ago", "2w ago", "2025-12-01", "-"]


def test_show_reads_as_a_transcript_of_roles_tools_todos_and_cost(
    spawn: Callable[..., ServerProcess], home: Path, tmp_path: Path
) -> None:
    server = spawn()
    server.initialize()
    started = server.request("thread/start", {"cwd": str(tmp_path), "title": "fix login"})
    tid, sid = started["thread"]["threadId"], started["sessionId"]
    operation = {"type": "operation", "operationId": "op1", "tool": "edit_file",
                 "effect": "side_effect", "turnId": "t1"}  # fmt: skip
    _record(
        server, tid, sid,
        {"type": "turn", "id": "t1-start", "turnId": "t1", "phase": "started"},
        {"type": "message", "id": "m1", "role": "user", "content": "the login form\nrejects me",
         "turnId": "t1"},
        {"type": "message", "id": "m1t", "role": "assistant", "thought": True,
         "content": "the hash compare looks wrong", "turnId": "t1"},
        {"type": "message", "id": "m2", "role": "assistant", "content": "Found it.",
         "turnId": "t1"},
        {**operation, "id": "op1-s", "state": "started"},
        {**operation, "id": "op1-c", "state": "committed", "resultPersisted": True,
         "result": "1 file changed"},
        {"type": "todos", "id": "td1", "items": [
            {"id": "1", "content": "write a test", "status": "completed"},
            {"id": "2", "content": "fix the hash compare", "status": "in_progress"},
            {"id": "3", "content": "ship", "status": "pending"}]},
        {"type": "cost", "id": "c1", "model": "gpt-5", "inputTokens": 1200, "outputTokens": 300,
         "usd": 0.0123, "turnId": "t1"},
        {"type": "turn", "id": "t1-end", "turnId": "t1", "phase": "completed"},
    )  # fmt: skip
    server.shutdown()

    shown = sessiond(home, "show", tid)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == f"thread {tid}: fix login"
    assert lines[1].startswith("── session ") and "startup (user)" in lines[1]
    body = "\n".join(lines[2:])
    assert body.startswith(
        "user:\n    the login form\n    rejects me\n"
        "assistant (thinking):\n    the hash compare looks wrong\nassistant:\n    Found it.\n"
        "    ⚙ edit_file started (side_effect, operation op1)\n"
        "    ⚙ edit_file committed (side_effect, operation op1): 1 file changed\n"
        "    todos:\n      [x] write a test\n      [>] fix the hash compare\n      [ ] ship\n"
        "    $ gpt-5: 1200 in, 300 out tokens, $0.0123 (thread so far $0.0123)\n"
    ), body
    assert lines[-2].endswith("ended (shutdown) ──")
    assert lines[-1] == "9 items · 3 messages · $0.0123 spent"  # the conversation's, as list says
    (row,) = [json.loads(line) for line in sessiond(home, "list", "--json").stdout.splitlines()]
    assert row["itemCount"] == 9


def test_recorded_escape_sequences_are_shown_not_sent_to_the_terminal(
    spawn: Callable[..., ServerProcess], home: Path, tmp_path: Path
) -> None:
    server = spawn()
    server.initialize()
    evil = "\x1b]0;owned\x07\x1b[2J\u202etxt.exe"
    started = server.request("thread/start", {"cwd": str(tmp_path), "title": evil})
    tid, sid = started["thread"]["threadId"], started["sessionId"]
    _record(server, tid, sid, {"type": "message", "id": "m", "role": "user", "content": evil})
    server.shutdown()
    for args in (["list"], ["show", tid]):
        out = sessiond(home, *args).stdout
        assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out, args
        assert "\\x1b]0;owned\\x07\\x1b[2J\\u202etxt.exe" in out, args


def test_home_is_accepted_before_or_after_the_subcommand(
    spawn: Callable[..., ServerProcess], home: Path, tmp_path: Path
) -> None:
    server = spawn()
    server.initialize()
    tid = server.request("thread/start", {"cwd": str(tmp_path)})["thread"]["threadId"]
    server.shutdown()
    env = {**os.environ, "PYTHONPATH": str(REPO), "SESSIOND_HOME": str(tmp_path / "elsewhere")}
    for args in (
        ["--home", str(home), "list", "-q"],
        ["list", "--home", str(home), "-q"],
        ["list", "-q", f"--home={home}"],
    ):
        done = subprocess.run([sys.executable, "-m", "server.cli", *args], cwd=REPO,
                              capture_output=True, text=True, env=env)  # fmt: skip
        assert (done.returncode, done.stdout) == (0, f"{tid}\n"), (args, done.stderr)
    shown = subprocess.run([sys.executable, "-m", "server.cli", "show", tid, "--home", str(home)],
                           cwd=REPO, capture_output=True, text=True, env=env)  # fmt: skip
    assert shown.returncode == 0, shown.stderr


def test_version_is_printed_and_matches_what_initialize_says(
    spawn: Callable[..., ServerProcess],
) -> None:
    done = subprocess.run([sys.executable, "-m", "server.cli", "--version"], cwd=REPO,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    version = spawn().initialize()["serverInfo"]["version"]
    assert done.stdout == f"sessiond {version} (protocol 1)\n"


def test_doctor_counts_in_good_english(
    spawn: Callable[..., ServerProcess], home: Path, tmp_path: Path
) -> None:
    server = spawn()
    server.initialize()
    server.request("thread/start", {"cwd": str(tmp_path)})
    server.shutdown()
    done = sessiond(home, "doctor")
    assert done.stdout.splitlines()[0] == "checked 1 thread file, 2 records"
    assert "index: opened, 1 thread" in done.stdout


def test_client_errors_are_one_readable_line(ws_server: Callable[..., object], home: Path) -> None:
    running = ws_server()
    missing = "7f9a3c1e-0000-4000-8000-000000000001"
    done = sessiond(home, "client", "--port", str(running.record["port"]), "resume", missing)
    assert done.returncode == 2
    assert done.stderr == f"sessiond: ThreadNotFound: no thread {missing}\n"
    gone = sessiond(home, "client", "--port", "1", "list")
    assert gone.returncode == 2 and gone.stderr.count("\n") == 1
    assert gone.stderr.startswith("sessiond: no running sessiond on port 1")


def test_client_takes_a_prefix_and_its_options_say_what_they_do(
    ws_server: Callable[..., object], home: Path
) -> None:
    """`sessiond client resume|record` take the prefix a person copied, resolved by the
    server it talks to (`thread/resolve`: its store, whichever it is)."""
    from tests.test_cli_threads import _hand_written

    home.chmod(0o700)
    for thread_id, title in (("abcd0000-0000-4000-8000-000000000001", "first"),
                             ("abcd0000-0000-4000-8000-000000000002", "second"),
                             ("abce0000-0000-4000-8000-000000000003", "third")):  # fmt: skip
        _hand_written(home, thread_id, title)
    port = str(ws_server().record["port"])  # type: ignore[attr-defined]
    recorded = sessiond(home, "client", "--port", port, "record", "ABCE", "--message", "hello")
    assert recorded.returncode == 0, recorded.stderr
    assert json.loads(recorded.stdout)["duplicates"] == 0
    resumed = sessiond(home, "client", "--port", port, "resume", "abce")
    report = json.loads(resumed.stdout)
    assert report["thread"]["threadId"] == "abce0000-0000-4000-8000-000000000003"
    assert [m["content"] for m in report["messages"]["items"]] == ["hello"]
    both = sessiond(home, "client", "--port", port, "resume", "abcd")
    assert (both.returncode, both.stdout) == (2, "")
    assert both.stderr == (
        "sessiond: InvalidId: abcd is the start of 2 thread ids: "
        "abcd0000-0000-4000-8000-000000000001 (first), abcd0000-0000-4000-8000-000000000002 "
        "(second); type more of the one you mean\n"
    )
    none = sessiond(home, "client", "--port", port, "record", "abcf", "--message", "x")
    assert none.stderr == "sessiond: ThreadNotFound: no thread id starts with abcf\n"
    for action, option, said in (("resume", "--accept-drift", "open a session though the "
                                  "workspace drifted"), ("record", "--message", "the message's "
                                  "content")):  # fmt: skip
        usage = " ".join(sessiond(home, "client", action, "--help").stdout.split())
        assert f"{option}" in usage and said in usage, usage


def test_serve_help_says_what_ws_does_alone_and_with_stdio() -> None:
    done = subprocess.run([sys.executable, "-m", "server.cli", "serve", "--help"], cwd=REPO,
                          capture_output=True, text=True)  # fmt: skip
    text = " ".join(done.stdout.split())
    assert "--ws [HOST:]PORT serve WebSocket clients on a loopback address" in text
    assert "also" not in text
    assert "with --ws, both" in text


def test_info_logs_are_sessiond_s_own_not_its_dependencies(
    ws_server: Callable[..., object], home: Path
) -> None:
    import asyncio

    from tests.support.ws_client import WsClient

    running = ws_server(env={"SESSIOND_LOG": "INFO"})

    async def come_and_go() -> None:
        client = await WsClient.open(running.record)
        await client.request("thread/list", {})
        await client.close()

    asyncio.run(come_and_go())
    running.proc.terminate()
    running.proc.wait()
    logged = [line for line in running.stderr().splitlines() if line[:2] == "20"]
    assert any("sessiond.ws INFO WebSocket client" in line for line in logged), logged
    assert all(line.split()[2].startswith("sessiond") for line in logged), logged


def test_a_wrong_log_level_is_one_line() -> None:
    done = subprocess.run([sys.executable, "-m", "server.cli", "list"], cwd=REPO,
                          capture_output=True, text=True,
                          env={**os.environ, "SESSIOND_LOG": "loud"})  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (
        "sessiond: SESSIOND_LOG must be one of DEBUG, INFO, WARNING, ERROR, not 'LOUD'\n"
    )


def test_a_reader_that_stops_early_gets_no_error_message(
    spawn: Callable[..., ServerProcess], home: Path, tmp_path: Path
) -> None:
    """`sessiond show ID | head`: more than a pipe holds, and the reader leaves."""
    server = spawn()
    server.initialize()
    started = server.request("thread/start", {"cwd": str(tmp_path)})
    tid, sid = started["thread"]["threadId"], started["sessionId"]
    _record(server, tid, sid, *({"type": "message", "id": f"m{n}", "role": "user",
                                 "content": "x" * 200} for n in range(1000)))  # fmt: skip
    server.shutdown()
    shown = subprocess.Popen(
        [sys.executable, "-m", "server.cli", "--home", str(home), "show", tid],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert shown.stdout is not None and shown.stderr is not None
    assert shown.stdout.readline().startswith(b"thread ")
    shown.stdout.close()
    assert shown.wait() == 128 + 13  # as `git log | head` ends: SIGPIPE's status, silently
    assert shown.stderr.read() == b""


def test_one_item_count_everywhere_and_bookkeeping_shown_only_with_all(
    spawn: Callable[..., ServerProcess], home: Path, tmp_path: Path
) -> None:
    """Issue 35: `list` said 0 items where `show` said 2, `show` printed an import's
    `[import_checkpoint]` and `sessiond acp`'s `[acp_update]` and `[acp_session]` in the
    transcript, and an ACP thread's header had no title though `list` had one. Now one
    count (the conversation's items) in `list`, `show`, ThreadInfo; the bookkeeping only
    with `--all`; the header is the row `list` shows."""
    import asyncio

    from protocol.names import SERVER_ITEM_TYPES
    from tests.support.acp_editor import fake_agent, sessiond_acp
    from tests.support.import_fixtures import ClaudeSession

    work = tmp_path / "work"
    work.mkdir()
    claude = ClaudeSession(tmp_path / "claude", work, "main")
    claude.user("list the refunds")
    claude.bash("ls refunds", "a.json\nb.json")
    claude.say("Two refunds.")
    claude.save()
    imported = sessiond(home, "import", "claude", "--from", str(tmp_path / "claude"))
    assert imported.returncode == 0, imported.stderr

    async def acp_thread() -> None:
        async with sessiond_acp(home, fake_agent(tmp_path / "agent")) as run:
            session = (await run.conn.new_session(cwd=str(work))).session_id
            await run.conn.prompt(session_id=session, prompt=[{"type": "text", "text": "hi"}])

    asyncio.run(acp_thread())
    server = spawn()
    server.initialize()
    on_the_wire = {t["threadId"]: t for t in server.request("thread/list", {})["threads"]}
    server.shutdown()
    listed = [json.loads(line) for line in sessiond(home, "list", "--json").stdout.splitlines()]
    header, *table = sessiond(home, "list").stdout.splitlines()
    items_end = header.index("ITEMS") + len("ITEMS")
    assert len(listed) == 2 and set(on_the_wire) == {row["threadId"] for row in listed}
    for row in listed:
        tid = row["threadId"]
        raw = [json.loads(x) for x in sessiond(home, "show", tid, "--json").stdout.splitlines()]
        conversation = sum(1 for item in raw if item["type"] not in SERVER_ITEM_TYPES)
        assert conversation < len(raw)  # there is bookkeeping to leave out
        shown, everything = sessiond(home, "show", tid), sessiond(home, "show", tid, "--all")
        footer = shown.stdout.splitlines()[-1]
        assert footer.startswith(f"{conversation} items · ")
        assert everything.stdout.splitlines()[-1] == footer
        assert row["itemCount"] == on_the_wire[tid]["itemCount"] == conversation
        (line,) = [line for line in table if line.startswith(tid)]
        assert line[:items_end].split()[-1] == str(conversation)  # the ITEMS column
        bookkeeping = ("[import_checkpoint", "[acp_update", "[acp_session")
        assert not any(mark in shown.stdout for mark in bookkeeping)
        assert any(mark in everything.stdout for mark in bookkeeping)
        label = row["title"] or row["preview"]
        assert shown.stdout.startswith(f"thread {tid}: {label}\n") and line.endswith(label)
    acp = next(row for row in listed if row["origin"]["agent"] == "acp")
    assert (acp["title"], acp["preview"]) == (None, "hi")  # the header once said nothing


def test_search_takes_an_excluded_word_as_the_docs_write_it(
    spawn: Callable[..., ServerProcess], home: Path, tmp_path: Path
) -> None:
    """`sessiond search -demo` was argparse's "QUERY required"; `search deploy -staging`
    its "unrecognized arguments"; excluded words alone said nothing of how to go on."""
    server = spawn()
    server.initialize()
    for title in ("deploy staging", "deploy production"):
        server.request("thread/start", {"cwd": str(tmp_path), "title": title})
    server.shutdown()
    found = sessiond(home, "search", "deploy", "-staging")
    assert found.returncode == 0, found.stderr
    (hit,) = found.stdout.splitlines()
    assert "deploy production" in hit
    for args in (["-staging"], ["--", "-staging"], ["-staging", "-prod*"]):
        alone = sessiond(home, "search", *args)
        assert alone.returncode == 2 and alone.stdout == ""
        assert alone.stderr == (
            "sessiond: InvalidParams: query: only excluded terms: -word leaves out the records "
            "that have it; say what to find as well (deploy -staging)\n"
        ), args
    wrong = sessiond(home, "search", "deploy", "--stagin")  # a real option's typo stays one
    assert wrong.returncode == 2 and "unrecognized arguments: --stagin" in wrong.stderr
