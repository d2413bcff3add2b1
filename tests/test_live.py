"""Live: sessions imported as they are written (`import --watch`, `serve --follow`), and a
thread recorded by one sessiond process showing up in another without a restart.

Real processes throughout; waits are hang guards (polled), never timing assertions.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BOTH_STORES, git
from tests.support.import_fixtures import ClaudeSession, CodexSession, Fixture, build
from tests.support.rpc_client import HANG_GUARD, REPO, ServerProcess
from tests.support.transcripts import AGENTS, Transcript, environment
from tests.support.wait import eventually
from tests.support.ws_client import WsClient, WsServerProcess
from tests.test_cli import sessiond


@pytest.fixture
def fixture(tmp_path: Path, make_repo: Callable[..., Path]) -> Fixture:
    alpha, beta = make_repo("alpha", "main"), make_repo("beta", "feature/login")
    heads = {repo: git(repo, "rev-parse", "HEAD") for repo in (alpha, beta)}
    return build(tmp_path / "sources", alpha, beta, heads)


def agent_env(fixture: Fixture) -> dict[str, str]:
    """Where the followed agents keep their sessions: CLAUDE_CONFIG_DIR and CODEX_HOME."""
    return {
        "CLAUDE_CONFIG_DIR": str(fixture.claude_root.parent),
        "CODEX_HOME": str(fixture.codex_root.parent),
    }


def listed(home: Path) -> dict[str, dict[str, Any]]:
    done = sessiond(home, "list", "--json", "--limit", "200")
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    return {row["origin"]["sessionId"]: row for row in rows if row["origin"]}


def test_import_watch_picks_up_new_and_growing_sessions(fixture: Fixture, home: Path) -> None:
    watcher = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "server.cli",
            "--home",
            str(home),
            "import",
            "claude",
            "--from",
            str(fixture.claude_root),
            "--watch",
            "--json",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert watcher.stderr is not None and watcher.stdout is not None
        assert b"watching" in watcher.stderr.readline()  # the first import is done
        summary = json.loads(watcher.stdout.readline())
        assert summary["created"] == 9
        repo = fixture.sessions[0].cwd
        new = ClaudeSession(fixture.claude_root, repo, "main")
        new.user("A session started after the import")
        new.say("Picked up live.")
        new.save()
        row = eventually(lambda: listed(home).get(new.session_id))
        assert row["title"] == "A session started after the import"
        items = row["itemCount"]
        new.say("And it grows.")
        new.save()
        eventually(lambda: listed(home)[new.session_id]["itemCount"] > items)
    finally:
        watcher.send_signal(signal.SIGINT)
        assert watcher.wait(timeout=HANG_GUARD) == 0


@BOTH_STORES  # `serve --follow` imports into a shared store too
def test_follow_starts_nothing_until_a_client_looks_at_threads(
    fixture: Fixture, spawn: Callable[..., ServerProcess], home: Path
) -> None:
    server = spawn(
        args=["--follow", "claude,codex"], env={**agent_env(fixture), "SESSIOND_DEBUG": "1"}
    )
    server.initialize()
    report = server.request("sessiond/debug")
    assert not any(m == "watchfiles" or m.startswith("watchfiles.") for m in report["modules"])
    assert not (home / "imports.sqlite3").exists() and not (home / "threads").exists()
    server.request("thread/list", {})
    started = server.wait_notification("thread/started", 9 + 5)
    assert {n["params"]["thread"]["origin"]["sessionId"] for n in started} >= {
        s.session_id for s in fixture.sessions
    }

    def progress() -> list[dict[str, Any]]:
        return [n["params"]["value"] for n in server.notifications if n["method"] == "$/progress"]

    titles = [v["title"] for v in progress() if v["kind"] == "begin"]
    assert "Importing Claude Code sessions" in titles and "Importing Codex sessions" in titles
    eventually(lambda: sum(v["kind"] == "end" for v in progress()) == len(titles))


async def test_followed_sessions_reach_every_client_as_they_are_written(
    fixture: Fixture, ws_server: Callable[..., WsServerProcess]
) -> None:
    server = ws_server("--follow", "claude,codex", env=agent_env(fixture))
    first = await WsClient.open(server.record, name="a")
    second = await WsClient.open(server.record, name="b")
    await first.request("thread/list", {})  # from here on the stores are followed

    def announced(client: WsClient, method: str, session_id: str) -> list[dict[str, Any]]:
        return [
            n["params"]["thread"]
            for n in client.notifications
            if n["method"] == method
            and (n["params"]["thread"].get("origin") or {}).get("sessionId") == session_id
        ]

    await first.wait_for(
        lambda: len([n for n in first.notifications if n["method"] == "thread/started"]) >= 14
    )
    repo = fixture.sessions[0].cwd
    claude = ClaudeSession(fixture.claude_root, repo, "main")
    claude.user("Started while the server follows")
    claude.save()
    codex = CodexSession(fixture.codex_root, repo, "main", git(repo, "rev-parse", "HEAD"))
    codex.user("A Codex session, live")
    codex.save()
    for client in (first, second):
        for session in (claude, codex):
            await client.wait_for(
                lambda c=client, s=session: announced(c, "thread/started", s.session_id)
            )
    thread = announced(second, "thread/started", claude.session_id)[0]
    await second.request("thread/subscribe", {"threadId": thread["threadId"]})
    claude.say("Growing")
    claude.save()
    for client in (first, second):
        await client.wait_for(
            lambda c=client: any(
                t["itemCount"] > thread["itemCount"]
                for t in announced(c, "thread/updated", claude.session_id)
            )
        )
    # The subscriber also gets the appended lines themselves.
    await second.wait_for(lambda: any(n["method"] == "item/recorded" for n in second.notifications))
    (recorded,) = [n["params"] for n in second.notifications if n["method"] == "item/recorded"]
    assert recorded["threadId"] == thread["threadId"]
    assert [i.get("content") for i in recorded["items"] if i["type"] == "message"] == ["Growing"]
    await asyncio.gather(first.close(), second.close())


def test_a_second_server_sees_threads_the_first_records(
    spawn: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    writer, reader = spawn(), spawn()  # two editor windows, one data dir
    writer.initialize()
    reader.initialize()
    reader.request("thread/list", {})
    started = writer.request("thread/start", {"cwd": str(tmp_path), "title": "From window one"})
    thread_id, session_id = started["thread"]["threadId"], started["sessionId"]

    def seen(method: str) -> list[dict[str, Any]]:
        return [
            n["params"]
            for n in reader.notifications
            if n["method"] == method and n["params"]["thread"]["threadId"] == thread_id
        ]

    eventually(lambda: seen("thread/started"))
    assert seen("thread/started")[0]["thread"]["title"] == "From window one"
    reader.request("thread/subscribe", {"threadId": thread_id})
    writer.request(
        "thread/record",
        {
            "threadId": thread_id,
            "sessionId": session_id,
            "items": [
                {"type": "message", "id": "m1", "role": "user", "content": "typed in window one"}
            ],
        },
    )
    eventually(lambda: any(u["thread"]["itemCount"] == 1 for u in seen("thread/updated")))
    recorded = reader.wait_notification("item/recorded")[0]["params"]
    assert recorded["threadId"] == thread_id
    assert [i["content"] for i in recorded["items"]] == ["typed in window one"]
    # The reader's own listing agrees, without a restart.
    (row,) = [t for t in reader.request("thread/list", {})["threads"] if t["threadId"] == thread_id]
    assert row["itemCount"] == 1
    writer.request("thread/delete", {"threadId": thread_id})
    eventually(
        lambda: any(
            n["params"].get("deleted")
            for n in reader.notifications
            if n["method"] == "thread/updated"
        )
    )


def test_a_follower_gets_every_append_another_process_makes_once_whoever_wrote_before(
    spawn: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    """A follows a thread B wrote before A ever looked at it (its first append after the
    subscribe used to be taken for A's first look, and lost), then the thread moves
    between the two processes: A's follower gets every item once, in seq order."""
    a, b = spawn(), spawn()  # two editor windows, one data dir
    a.initialize()
    b.initialize()
    started = b.request("thread/start", {"cwd": str(tmp_path)})
    tid, sid = started["thread"]["threadId"], started["sessionId"]
    b.request("thread/record", {"threadId": tid, "sessionId": sid, "items": [_said("before")]})
    seen_before = a.request("thread/read", {"threadId": tid})["items"][-1]["seq"]
    a.request("thread/subscribe", {"threadId": tid})
    writers = [(b, sid)]
    for turn in range(4):
        writer, session = writers[-1]
        last = writer.request(
            "thread/record",
            {"threadId": tid, "sessionId": session, "items": [_said(f"turn {turn}")]},
        )["lastSeq"]
        writer.request("thread/close", {"threadId": tid, "sessionId": session})
        other = a if writer is b else b
        resumed = other.request("thread/resume", {"threadId": tid})
        writers.append((other, resumed["session"]["sessionId"]))

    def followed() -> list[dict[str, Any]]:
        return [
            item
            for n in a.notifications
            if n["method"] == "item/recorded" and n["params"]["threadId"] == tid
            for item in n["params"]["items"]
        ]

    stored = a.request("thread/read", {"threadId": tid, "limit": 1000})["items"]
    last = stored[-1]["seq"]
    eventually(lambda: followed() and followed()[-1]["seq"] >= last)
    assert [i["seq"] for i in followed()] == [i["seq"] for i in stored if i["seq"] > seen_before]
    assert "turn 0" in [i.get("content") for i in followed()]


def _said(text: str) -> dict[str, Any]:
    return {"type": "message", "id": f"m-{text}", "role": "user", "content": text}


def test_a_server_does_not_announce_its_own_writes_twice(
    spawn: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    """Its own starts, records, archives and deletes reach its clients once: from the
    request, never again when its watcher sees the thread files change (a deleted thread
    was announced deleted up to three times, a client's tree flickering)."""
    server = spawn()
    server.initialize()
    server.request("thread/list", {})
    started = server.request("thread/start", {"cwd": str(tmp_path)})
    server.request(
        "thread/record",
        {
            "threadId": started["thread"]["threadId"],
            "sessionId": started["sessionId"],
            "items": [{"type": "message", "id": "m1", "role": "user", "content": "hello"}],
        },
    )
    gone = server.request("thread/start", {"cwd": str(tmp_path)})
    gone_id = gone["thread"]["threadId"]
    server.request("thread/close", {"threadId": gone_id, "sessionId": gone["sessionId"]})
    for method in ("thread/archive", "thread/unarchive", "thread/delete"):
        server.request(method, {"threadId": gone_id})
    other = spawn()  # a write by another process is announced: the watcher is working
    other.initialize()
    other.request("thread/start", {"cwd": str(tmp_path), "title": "elsewhere"})
    eventually(
        lambda: any(
            n["params"]["thread"].get("title") == "elsewhere"
            for n in server.notifications
            if n["method"] == "thread/started"
        )
    )
    server.request("thread/list", {})  # every notice broadcast before is read by now
    mine = [
        n
        for n in server.notifications
        if n["method"] == "thread/started"
        and n["params"]["thread"]["threadId"] == started["thread"]["threadId"]
    ]
    assert len(mine) == 1  # from thread/start itself, not again from the watcher
    told = [
        (n["method"], bool(n["params"].get("deleted")))
        for n in server.notifications
        if n["method"] in ("thread/started", "thread/updated")
        and n["params"]["thread"]["threadId"] == gone_id
    ]
    # Started; archived; unarchived; deleted: each once.
    assert told == [
        ("thread/started", False),
        ("thread/updated", False),
        ("thread/updated", False),
        ("thread/updated", True),
    ]


def test_threads_another_process_starts_in_new_shard_directories_are_announced(
    spawn: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    """A thread file lives in a shard directory named after its id; the first thread of a
    shard creates the directory and the file at once, before any watch on the directory
    exists: the watcher looks inside new shards itself. Forty at once: more than the
    watcher looks at in one store job (server/live/watch.py `LOOK_FILES`), none missed."""
    server = spawn()
    server.initialize()
    server.request("thread/list", {})
    other = spawn()
    other.initialize()

    def announced() -> set[str]:
        return {
            n["params"]["thread"]["threadId"]
            for n in server.notifications
            if n["method"] == "thread/started"
        }

    first = other.request("thread/start", {"cwd": str(tmp_path)})["thread"]["threadId"]
    eventually(lambda: first in announced())  # the watcher is in place from here on
    started = {
        other.request("thread/start", {"cwd": str(tmp_path)})["thread"]["threadId"]
        for _ in range(40)
    }
    shards = {tid[:2] for tid in started} - {first[:2]}
    assert shards, "every thread landed in the first one's shard: no new directory tried"
    eventually(lambda: started <= announced())


@pytest.mark.parametrize("agent", AGENTS)
def test_a_session_in_a_folder_new_to_a_followed_store_is_imported(
    agent: str, spawn: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    """An agent's first session in a new directory comes with a new folder (Claude Code's
    project, Codex's day, Gemini CLI's project), written before any watch on the folder
    exists: its file sends no event of its own. tests/sequences/ found such sessions never
    imported (one in five, by the race); a folder moved in whole, its session inside, is
    that race lost every time. The watcher looks inside new folders itself."""
    agents, stage = tmp_path / "agents", tmp_path / "stage"
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    Transcript(agent, agents, tmp_path / "first", 0).turn("the first session", "seen")
    server = spawn(args=["--follow", "claude,codex,gemini"], env=environment(agents))
    server.initialize()
    server.request("thread/list", {})
    server.wait_notification("thread/started")  # imported, so the watcher is in place
    moved = Transcript(agent, stage, tmp_path / "second", 24)  # another project, another day
    moved.turn("a session moved in with its folder", "seen too")
    relative = moved.path.relative_to(stage)
    folder = next(p for p in reversed(relative.parents) if not (agents / p).exists())
    (stage / folder).rename(agents / folder)
    started = server.wait_notification("thread/started", 2)
    titles = [n["params"]["thread"]["title"] for n in started]
    assert titles == ["the first session", "a session moved in with its folder"]


def test_import_watch_imports_a_session_in_a_folder_new_to_the_store(
    home: Path, tmp_path: Path
) -> None:
    """`sessiond import --watch` looks inside new folders too (the race above)."""
    agents, stage = tmp_path / "agents", tmp_path / "stage"
    (agents / "claude" / "projects").mkdir(parents=True)
    (tmp_path / "w").mkdir()
    watcher = subprocess.Popen(
        [sys.executable, "-m", "server.cli", "--home", str(home), "import", "claude",
         "--watch", "--json"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO), **environment(agents)},
    )  # fmt: skip
    try:
        assert watcher.stderr is not None
        assert b"watching" in watcher.stderr.readline()  # the watch is in place
        moved = Transcript("claude", stage, tmp_path / "w", 0)
        moved.turn("a session moved in with its folder", "seen")
        (moved.path.parent).rename(agents / "claude" / "projects" / moved.path.parent.name)
        row = eventually(lambda: listed(home).get(moved.session_id))
        assert row["title"] == "a session moved in with its folder"
    finally:
        watcher.send_signal(signal.SIGINT)
        assert watcher.wait(timeout=HANG_GUARD) == 0
