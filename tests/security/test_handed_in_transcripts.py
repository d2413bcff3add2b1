"""A transcripts folder someone hands you (`import --from DIR`, or the agents' own folders
under `serve --follow`) can neither pull your files into a thread nor take the importer
down.

Threats: a link `x.jsonl -> ~/.ssh/id_rsa` (or a folder link to somewhere else) among the
sessions: whatever is behind it would become a thread (skipped-line previews included),
which on a shared store the whole team reads; a 2 GB sparse file or a 500 MB line, which
the importer used to hold whole (4.1 GB RSS and `MemoryError`: exit 1, a traceback, no
summary, nothing else imported). Links are never followed and are reported; a file or a
line over its byte budget is skipped with a reason and the rest of the run goes on, in
memory that stays bounded: measured here from /proc of the real importer or server.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from tests.faults.helpers import Spawn
from tests.support.import_fixtures import ClaudeSession, CodexSession, encoded_project
from tests.support.rpc_client import HANG_GUARD, REPO, ServerProcess

SECRET = f"SECRET-{uuid.uuid4().hex}"
MIB = 1 << 20
RSS_BOUND = 256 * MIB
"""Peak resident memory the importer may reach on these files: far below the 500 MB line
or the 2 GB file it used to hold whole (its own baseline is ~60 MiB)."""


def secret_file(root: Path, cwd: Path) -> Path:
    """A private file that is itself a valid transcript: imported, were it followed."""
    private = ClaudeSession(root / "private", cwd, "main")
    private.user(f"my key is {SECRET}")
    private.raw(f"-----BEGIN OPENSSH PRIVATE KEY----- {SECRET}\n".encode())
    private.save()
    return private.path


def home_holds(home: Path, marker: str) -> list[Path]:
    return [p for p in home.rglob("*") if p.is_file() and marker.encode() in p.read_bytes()]


def test_links_in_a_handed_in_folder_are_reported_and_nothing_behind_them_is_read(
    home: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    projects = tmp_path / "handed" / "claude"
    real = ClaudeSession(projects, work, "main")
    real.user("a real session")
    real.save()
    project = real.path.parent
    behind = secret_file(tmp_path / "mine", work)
    file_link = project / f"{uuid.uuid4()}.jsonl"
    file_link.symlink_to(behind)
    folder_link = projects / encoded_project(tmp_path / "elsewhere")
    folder_link.symlink_to(behind.parent, target_is_directory=True)
    rollouts = tmp_path / "handed" / "codex" / "sessions"
    rollout = CodexSession(rollouts, work, "main", "0" * 40)
    rollout.user("a real rollout")
    rollout.save()
    rollout_link = rollout.path.with_name(f"rollout-2026-05-04T09-30-00-{uuid.uuid4()}.jsonl")
    rollout_link.symlink_to(behind)
    day_link = rollout.path.parent.parent / "05"
    day_link.symlink_to(behind.parent, target_is_directory=True)
    gemini = tmp_path / "handed" / "gemini" / "tmp"  # <project>/chats/session-*.jsonl
    (gemini / "project" / "chats").mkdir(parents=True)
    chat_link = gemini / "project" / "chats" / "session-2026-05-04T09-30-5e1d2c3b.jsonl"
    chat_link.symlink_to(behind)
    project_link = gemini / "elsewhere"
    project_link.symlink_to(behind.parent, target_is_directory=True)
    reported: dict[str, str] = {}
    for agent, root in (("claude", projects), ("codex", rollouts), ("gemini", gemini)):
        done = subprocess.run(
            [sys.executable, "-m", "server.cli", "--home", str(home), "import", agent,
             "--from", str(root), "--json"],
            cwd=REPO, capture_output=True, text=True, timeout=HANG_GUARD,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        assert summary["created"] == (0 if agent == "gemini" else 1), summary
        reported |= {p["path"]: p["status"] for p in summary["problems"]}
        assert SECRET not in done.stdout + done.stderr
    links = (file_link, folder_link, rollout_link, day_link, chat_link, project_link)
    expected = {str(p): "symlink" for p in links}
    assert reported == expected
    assert home_holds(home, SECRET) == []


def test_links_created_while_following_are_never_imported(
    spawn: Spawn, home: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    config = tmp_path / "claude-config"
    projects = config / "projects"
    first = ClaudeSession(projects, work, "main")
    first.user("there before the server looked")
    first.save()
    server = spawn(args=["--follow", "claude"], env={"CLAUDE_CONFIG_DIR": str(config)})
    server.initialize()
    server.request("thread/list", {})
    server.wait_notification("thread/started")  # the first import is done: now watching
    behind = secret_file(tmp_path / "mine", work)
    (first.path.parent / f"{uuid.uuid4()}.jsonl").symlink_to(behind)
    linked_folder = projects / encoded_project(tmp_path / "elsewhere")
    linked_folder.symlink_to(behind.parent, target_is_directory=True)
    later = ClaudeSession(behind.parent.parent, work, "main")  # written behind the folder link
    later.session_id = str(uuid.uuid4())
    later.path = behind.parent / f"{later.session_id}.jsonl"
    later.user(f"written behind the link {SECRET}")
    later.save()
    last = ClaudeSession(projects, work, "main")
    last.user("written after the links")
    last.save()
    started = server.wait_notification("thread/started", 2)
    origins = [n["params"]["thread"]["origin"]["sessionId"] for n in started]
    assert origins == [first.session_id, last.session_id]
    assert len(server.request("thread/list", {})["threads"]) == 2
    assert home_holds(home, SECRET) == []
    assert "symlink" in server.stderr_path.read_text()  # said in the log, not silently


def huge_sessions(projects: Path, work: Path) -> dict[str, Any]:
    """A normal session, a 2 GB sparse file, and a session with a 500 MB line between two
    ordinary ones (sparse too: the line's bytes are a hole in the file)."""
    normal = ClaudeSession(projects, work, "main")
    normal.user("an ordinary session")
    normal.say("with its answer")
    normal.save()
    sparse = ClaudeSession(projects, work, "main")
    sparse.user("the first line of a 2 GB file")
    sparse.save()
    os.truncate(sparse.path, 2 << 30)
    long_line = ClaudeSession(projects, work, "main")
    long_line.user("before the huge line")
    long_line.save()
    after = ClaudeSession(projects, work, "main", session_id=long_line.session_id)
    after.parent = long_line.parent
    after.lines = []
    after.say("after the huge line")
    with open(long_line.path, "r+b") as handle:
        handle.seek(0, os.SEEK_END)
        handle.write(b'{"type":"user","message":{"content":"')
        handle.seek(500 * MIB, os.SEEK_CUR)
        handle.write(b'"}}\n' + after.data())
    return {"normal": normal, "sparse": sparse, "long_line": long_line}


def _limit_address_space() -> None:
    """So that a regression fails this test with MemoryError instead of taking the shared
    machine's memory: 4 GiB of address space, far above what the importer needs."""
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def peak_rss_of(argv: list[str], env: dict[str, str], out: Path) -> tuple[int, int]:
    """Run a command to its end; (its exit code, its peak resident bytes): VmHWM read from
    /proc while it runs, and the kernel's ru_maxrss once it is gone (a peak after the last
    read counts too)."""
    with open(out, "wb") as stdout, open(out.with_suffix(".err"), "wb") as stderr:
        process = subprocess.Popen(argv, cwd=REPO, env=env, stdout=stdout, stderr=stderr,
                                   preexec_fn=_limit_address_space)  # fmt: skip
        peak_kib = 0
        deadline = time.monotonic() + 10 * HANG_GUARD
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                process.returncode = os.waitstatus_to_exitcode(status)
                return process.returncode, max(peak_kib, usage.ru_maxrss) * 1024
            peak_kib = max(peak_kib, vm_hwm_kib(process.pid))
            assert time.monotonic() < deadline, "the import never ended"
            time.sleep(0.02)


def vm_hwm_kib(pid: int) -> int:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def test_a_huge_file_and_a_huge_line_are_skipped_and_the_rest_imported_in_bounded_memory(
    home: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    projects = tmp_path / "claude" / "projects"
    sessions = huge_sessions(projects, work)
    out = tmp_path / "import.json"
    code, peak = peak_rss_of(
        [sys.executable, "-m", "server.cli", "--home", str(home), "import", "claude", "--from",
         str(projects), "--json"],
        {**os.environ, "PYTHONPATH": str(REPO)}, out,
    )  # fmt: skip
    errors = out.with_suffix(".err").read_text()
    assert code == 0 and "Traceback" not in errors, errors
    assert peak < RSS_BOUND, f"peak RSS {peak / MIB:.0f} MiB"
    summary = json.loads(out.read_text())
    assert summary["created"] == 2  # the normal session and the one with the long line
    problems = {Path(p["path"]).stem: p for p in summary["problems"]}
    too_large = problems[sessions["sparse"].session_id]
    assert too_large["status"] == "too-large" and "GiB" in too_large["reason"]
    [long] = problems[sessions["long_line"].session_id]["skipped"]
    assert long["reason"] == "too_long" and long["lineNo"] == 3
    server = ServerProcess(home)
    try:
        server.initialize()
        rows = server.request("thread/list", {})["threads"]
        threads = {t["origin"]["sessionId"]: t["threadId"] for t in rows}
        assert set(threads) == {sessions["normal"].session_id, sessions["long_line"].session_id}
        report = server.request(
            "thread/resume", {"threadId": threads[sessions["long_line"].session_id]}
        )
        texts = [m["content"] for m in report["messages"]["items"]]
        assert texts == ["before the huge line", "after the huge line"]
    finally:
        server.close()


def test_serve_follow_survives_a_huge_file_and_line_and_keeps_importing(
    spawn: Spawn, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    config = tmp_path / "claude-config"
    first = ClaudeSession(config / "projects", work, "main")
    first.user("there before the server looked")
    first.save()
    server = spawn(args=["--follow", "claude"], env={"CLAUDE_CONFIG_DIR": str(config)})
    server.initialize()
    server.request("thread/list", {})
    server.wait_notification("thread/started")  # the first import is done: now watching
    sessions = huge_sessions(config / "projects", work)
    wanted = {first.session_id, sessions["normal"].session_id, sessions["long_line"].session_id}
    deadline = time.monotonic() + 10 * HANG_GUARD

    def messages_of(session_id: str) -> list[str]:
        rows = server.request("thread/list", {})["threads"]
        [tid] = [t["threadId"] for t in rows if t["origin"]["sessionId"] == session_id] or [None]
        if tid is None:
            return []
        report = server.request("thread/resume", {"threadId": tid})
        return [m["content"] for m in report["messages"]["items"]]

    while messages_of(sessions["long_line"].session_id) != [
        "before the huge line", "after the huge line"
    ] or not messages_of(sessions["normal"].session_id):  # fmt: skip
        assert server.proc.poll() is None, server.stderr_path.read_text()[-3000:]
        assert time.monotonic() < deadline, "never imported"
        time.sleep(0.2)
    listed = {t["origin"]["sessionId"] for t in server.request("thread/list", {})["threads"]}
    assert listed == wanted
    peak = vm_hwm_kib(server.proc.pid) * 1024
    assert peak < RSS_BOUND, f"the server's peak RSS {peak / MIB:.0f} MiB"
    log = server.stderr_path.read_text()
    assert "too-large" in log and "Traceback" not in log


def test_a_line_nested_past_what_a_thread_holds_is_skipped_and_the_session_imported(
    home: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    projects = tmp_path / "claude" / "projects"
    session = ClaudeSession(projects, work, "main")
    session.user("before the deep line")
    deep: Any = "bottom"
    for _ in range(300):
        deep = {"a": deep}
    call = {"type": "tool_use", "id": "toolu_deep", "name": "Bash", "input": {"deep": deep}}
    entry = session._entry("assistant", {"role": "assistant", "model": session.model,
                                         "content": [call]})  # fmt: skip
    session.raw((json.dumps(entry) + "\n").encode())  # orjson itself stops at 255 levels
    session.say("after the deep line")
    session.save()
    done = subprocess.run(
        [sys.executable, "-m", "server.cli", "--home", str(home), "import", "claude", "--from",
         str(projects), "--json"],
        cwd=REPO, capture_output=True, text=True, timeout=HANG_GUARD,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    summary = json.loads(done.stdout)
    assert summary["created"] == 1
    [problem] = summary["problems"]
    assert [(s["lineNo"], s["reason"]) for s in problem["skipped"]] == [(3, "mapping_failed")]


def test_escape_sequences_in_a_handed_in_folders_names_are_shown_not_sent(
    home: Path, tmp_path: Path
) -> None:
    """Issue 34: `sessiond import` printed the names of a handed-in folder as they were,
    so a directory or file named with terminal escapes (retitle the window, clear the
    screen, reorder a line with a bidi override) acted on the person's terminal. Every
    name is printed through server/cli/terminal.py's `safe`, as `list` and `show` are."""
    work = tmp_path / "work"
    work.mkdir()
    hostile = "\x1b]0;pwned\x07\x1b[2J\u202etxt.exe"
    projects = tmp_path / f"handed{hostile}" / "claude"
    real = ClaudeSession(projects, work, "main")
    real.user("a real session")
    real.raw(b"{not json at all\n")  # a skipped line: its file is named in the summary
    real.save()
    project = real.path.parent.rename(real.path.parent.with_name(f"p{hostile}"))
    (project / f"{uuid.uuid4()}.jsonl").symlink_to(tmp_path / "nowhere")  # reported by name
    done = subprocess.run(
        [sys.executable, "-m", "server.cli", "--home", str(home), "import", "claude",
         "--from", str(projects)],
        cwd=REPO, capture_output=True, text=True, timeout=HANG_GUARD,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown = done.stdout + done.stderr
    assert "symlink" in shown and "skipped" in shown  # the names were printed ...
    for control in ("\x1b", "\x07", "\u202e"):
        assert control not in shown, repr(shown)  # ... never sent
    assert "\\x1b]0;pwned\\x07" in shown  # shown as escapes, for the person to see
