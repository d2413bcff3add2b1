"""`sessiond mcp`, a real process over real pipes, spoken to as an agent speaks MCP: what
its tools answer from a real store, within the folders the agent was started in; paging
that says when there is more and loses nothing; a bad argument refused as an MCP tool
error naming the mend; a secret in a thread seen only redacted. And `sessiond serve`
never loads any of it."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

from restore.home.layout import Layout
from restore.service import Settings, open_service
from tests.conftest import BOTH_STORES
from tests.security.test_redaction import SECRETS
from tests.support.mcp_client import McpProcess
from tests.support.rpc_client import ServerProcess
from tests.test_cli import sessiond
from tests.test_no_warmup import loaded

TOOLS = {"search_sessions", "read_session", "list_sessions", "resume_command", "usage"}


def plant(
    home: Path, cwd: Path, texts: list[str], *, messages: int = 1, store: str | None = None
) -> list[str]:
    """Threads recorded in `cwd` through the thread service (what a server records), one
    per text, each with `messages` messages (the text in the first)."""
    cwd.mkdir(parents=True, exist_ok=True)
    service = open_service(Settings(home, store))
    ids = []
    for text in texts:
        started = service.start(cwd=str(cwd), workspace_folder=None)
        items = [{"type": "message", "id": str(uuid.uuid4()), "role": "user", "content": text}]
        items += [{"type": "message", "id": str(uuid.uuid4()), "role": "assistant",
                   "content": f"answer number {n}"} for n in range(1, messages)]  # fmt: skip
        service.record(started.summary.threadId, started.session_id, items)
        ids.append(started.summary.threadId)
    service.close_all()
    service.store.close()
    return ids


def ids_in(text: str) -> list[str]:
    return re.findall(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", text)


def cursor_in(text: str) -> str | None:
    found = re.search(r'with cursor "([^"]*)"', text)
    return found.group(1) if found else None


def test_the_tools_are_listed_read_only_with_their_arguments(home: Path, tmp_path: Path) -> None:
    with McpProcess(home, tmp_path) as mcp:
        assert mcp.initialized["serverInfo"]["name"] == "sessiond"
        tools = {tool["name"]: tool for tool in mcp.request("tools/list")["tools"]}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool["annotations"]["readOnlyHint"] is True, tool["name"]
        assert tool["description"] and "\n" not in tool["description"]
    search = tools["search_sessions"]["inputSchema"]
    assert search["required"] == ["query"]
    assert {"agent", "role", "since", "until", "cursor", "limit"} <= set(search["properties"])


def test_an_agent_sees_the_threads_of_its_folder_unless_told_otherwise(
    home: Path, tmp_path: Path
) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    (mine,) = plant(home, ours, ["the flamingo migration plan"])
    (below,) = plant(home, ours / "sub", ["flamingo again, in a subfolder"])
    (other,) = plant(home, theirs, ["the flamingo budget of another project"])
    with McpProcess(home, ours) as mcp:
        found = ids_in(mcp.text("search_sessions", query="flamingo"))
        assert sorted(set(found)) == sorted([mine, below])
        assert other not in ids_in(mcp.text("list_sessions"))
        text, error = mcp.call("read_session", thread=other)
        assert error and "no thread" in text and "flamingo" not in text
        text, error = mcp.call("read_session", thread=other[:8])  # a prefix: not found either
        assert error and "flamingo" not in text
        text, error = mcp.call("search_sessions", query="flamingo", folder=str(theirs))
        assert error and "outside the folders" in text  # an argument does not widen it
        narrowed = mcp.text("search_sessions", query="flamingo", folder=str(ours / "sub"))
        assert set(ids_in(narrowed)) == {below}
    with McpProcess(home, tmp_path, ["--all-folders"]) as mcp:
        assert {mine, below, other} <= set(ids_in(mcp.text("search_sessions", query="flamingo")))
        assert "flamingo budget" in mcp.text("read_session", thread=other)
    with McpProcess(home, tmp_path, ["--folder", str(theirs)]) as mcp:
        assert set(ids_in(mcp.text("search_sessions", query="flamingo"))) == {other}


def test_usage_counts_the_scopes_sessions_only(home: Path, tmp_path: Path) -> None:
    """The usage tool reports what `sessiond usage` does, for the threads the agent's
    listing shows: another folder's sessions are neither counted nor named, and one run
    inside the folder from a window opened elsewhere is counted as it is listed."""
    ours, theirs, elsewhere = tmp_path / "ours", tmp_path / "theirs", tmp_path / "elsewhere"
    service = open_service(Settings(home, None))
    for cwd, folder, tokens, usd in (
        (ours, None, 1000, 0.25),
        (ours / "sub", None, 500, 0.5),
        (theirs, None, 7000, 4.0),
        (ours / "deep", elsewhere, 2000, 1.0),
    ):
        cwd.mkdir(parents=True)
        started = service.start(cwd=str(cwd), workspace_folder=folder and str(folder))
        cost = {"type": "cost", "id": str(uuid.uuid4()), "model": "claude-sonnet-4-5",
                "inputTokens": tokens, "outputTokens": 10, "usd": usd}  # fmt: skip
        service.record(started.summary.threadId, started.session_id, [cost])
    service.close_all()
    service.store.close()
    with McpProcess(home, ours) as mcp:
        assert mcp.text("list_sessions").count(str(ours / "deep")) == 1
        text = mcp.text("usage", report="monthly", by="project", timezone="UTC")
        assert "3,500" in text and "$1.75" in text, text
        assert str(theirs) not in text and "7,000" not in text and "$4." not in text
        text, error = mcp.call("usage", report="hourly")
        assert error and "daily" in text, text
    with McpProcess(home, tmp_path, ["--all-folders"]) as mcp:
        text = mcp.text("usage", report="monthly", timezone="UTC")
        assert "10,500" in text and "$5.75" in text, text


def test_started_in_the_root_directory_it_answers_only_how_to_configure_it(
    home: Path, tmp_path: Path
) -> None:
    """A desktop app starts its MCP servers in `/`: that is no workspace, and "under /"
    would be every thread."""
    plant(home, tmp_path / "repo", ["the crane"])
    with McpProcess(home, Path("/")) as mcp:
        for tool, args in (("search_sessions", {"query": "crane"}), ("list_sessions", {})):
            text, error = mcp.call(tool, **args)
            assert error and "--folder DIR" in text and "--all-folders" in text, text
            assert "crane" not in text
    with McpProcess(home, Path("/"), ["--folder", str(tmp_path / "repo")]) as mcp:
        assert "the crane" in mcp.text("list_sessions")


def test_folder_and_all_folders_together_are_refused_before_it_serves(home: Path) -> None:
    done = sessiond(home, "mcp", "--folder", str(home), "--all-folders")
    assert done.returncode == 2 and "give one of them" in done.stderr, done.stderr
    assert done.stdout == ""


def test_pages_say_there_is_more_and_together_hold_every_hit_once(
    home: Path, tmp_path: Path
) -> None:
    planted = plant(home, tmp_path / "repo", [f"the pelican report {n}" for n in range(23)])
    with McpProcess(home, tmp_path / "repo") as mcp:
        seen: list[str] = []
        cursor: str | None = None
        pages = 0
        while True:
            args: dict[str, Any] = {"query": "pelican", "limit": 10}
            if cursor:
                args["cursor"] = cursor
            text = mcp.text("search_sessions", **args)
            pages += 1
            seen += [i for i in ids_in(text) if i in planted]
            cursor = cursor_in(text)
            if cursor is None:
                assert "(no more hits)" in text
                break
            assert text.startswith("10 hits")
        assert pages == 3 and sorted(seen) == sorted(planted)  # none lost, none twice
        listed: list[str] = []
        cursor = None
        while True:
            text = mcp.text("list_sessions", limit=20, **({"cursor": cursor} if cursor else {}))
            listed += ids_in(text)
            if (cursor := cursor_in(text)) is None:
                break
        assert sorted(listed) == sorted(planted)


def test_a_scope_of_several_folders_pages_through_each_once(home: Path, tmp_path: Path) -> None:
    one = plant(home, tmp_path / "one", [f"the puffin {n}" for n in range(7)])
    one += plant(home, tmp_path / "one" / "sub", ["the puffin below"])  # its folder named too
    two = plant(home, tmp_path / "two", [f"the puffin {n}" for n in range(6)])
    plant(home, tmp_path / "three", ["the puffin elsewhere"])
    folders = ["--folder", str(tmp_path / "one"), "--folder", str(tmp_path / "two"),
               "--folder", str(tmp_path / "one" / "sub")]  # fmt: skip
    with McpProcess(home, tmp_path, folders) as mcp:
        for tool, args in (("search_sessions", {"query": "puffin"}), ("list_sessions", {})):
            seen: list[str] = []
            cursor: str | None = None
            pages = 0
            while True:
                more = {"cursor": cursor} if cursor else {}
                text = mcp.text(tool, limit=5, **args, **more)
                seen += ids_in(text)
                pages += 1
                if (cursor := cursor_in(text)) is None:
                    break
            assert pages == 3 and sorted(seen) == sorted(one + two), tool  # 5, 5, 4: none twice


def test_a_thread_is_read_a_page_at_a_time_newest_first(home: Path, tmp_path: Path) -> None:
    (thread,) = plant(home, tmp_path, ["the ostrich question"], messages=30)
    with McpProcess(home, tmp_path) as mcp:
        first = mcp.text("read_session", thread=thread[:8], limit=10)
        header, page, transcript = first.split("\n", 2)
        assert "the ostrich question" in header and "seq 22-31 of 31" in page
        assert "answer number 29" in transcript and "ostrich" not in transcript
        cursor = cursor_in(first)
        assert cursor is not None
        second = mcp.text("read_session", thread=thread, limit=10, cursor=cursor)
        assert "answer number 19" in second and "answer number 29" not in second
        oldest = mcp.text("read_session", thread=thread, order="oldest", limit=5)
        assert "user:\n    the ostrich question" in oldest and "answer number 5" not in oldest


def test_bad_arguments_are_tool_errors_naming_the_mend(home: Path, tmp_path: Path) -> None:
    plant(home, tmp_path, ["the heron"])
    with McpProcess(home, tmp_path) as mcp:
        text, error = mcp.call("search_sessions", query='"the heron')
        assert error and "InvalidParams" in text and "quote" in text
        text, error = mcp.call("search_sessions", query="heron", limit=0)
        assert error and "limit" in text
        text, error = mcp.call("search_sessions", query="heron", role="nobody")
        assert error and "role" in text
        text, error = mcp.call("search_sessions", query="heron", since="last tuesday")
        assert error and "7d" in text
        text, error = mcp.call("search_sessions", query="heron", cursor="not-ours")
        assert error and "cursor" in text
        text, error = mcp.call("read_session", thread="zz")
        assert error and "thread id" in text
        text, error = mcp.call("search_sessions", query="heron", agent="nobody")
        assert error and "agent" in text and "claude-code" in text
        assert mcp.text("search_sessions", query="heron", agent="codex").startswith("0 hits")
        assert mcp.text("search_sessions", query="heron", agent="sessiond").startswith("1 hit ")


def test_a_secret_in_a_thread_comes_back_redacted(home: Path, tmp_path: Path) -> None:
    token, said = SECRETS["github-pat"]
    (thread,) = plant(home, tmp_path, [f"the kingfisher deploy: {said}"])
    with McpProcess(home, tmp_path) as mcp:
        answers = [
            mcp.text("search_sessions", query="kingfisher"),
            mcp.text("read_session", thread=thread),
            mcp.text("list_sessions"),
        ]
    for answer in answers:
        assert token not in answer and token[4:20] not in answer
    assert "[secret:github-pat:" in answers[1]


@BOTH_STORES
def test_either_store_answers_within_the_scope_and_redacted(
    home: Path, tmp_path: Path, store_url: str | None
) -> None:
    token, said = SECRETS["aws-access-token"]
    (ours,) = plant(home, tmp_path / "ours", [f"the egret keys: {said}"], store=store_url)
    (theirs,) = plant(home, tmp_path / "theirs", ["the egret of others"], store=store_url)
    env = {"SESSIOND_STORE": store_url} if store_url else {}
    with McpProcess(home, tmp_path / "ours", env=env) as mcp:
        found = mcp.text("search_sessions", query="egret")
        read = mcp.text("read_session", thread=ours)
        text, error = mcp.call("read_session", thread=theirs)
    assert ids_in(found) == [ours] and error and "egret" not in text
    assert token not in found + read and "[secret:aws-access-token:" in read


def test_resume_command_is_the_one_sessiond_resume_gives(home: Path, tmp_path: Path) -> None:
    (thread,) = plant(home, tmp_path, ["the stork"])
    with McpProcess(home, tmp_path) as mcp:
        text = mcp.text("resume_command", thread=thread[:8])
    assert text.splitlines()[0] == f"command: sessiond --home {home} resume {thread[:8]}"
    assert f"thread {thread}: the stork" in text


def test_the_tools_change_nothing_and_the_server_ends_with_its_client(
    home: Path, tmp_path: Path
) -> None:
    (thread,) = plant(home, tmp_path, ["the ibis"], messages=3)
    threads = Layout(home).threads_dir

    def files() -> dict[str, bytes]:
        return {path.name: path.read_bytes() for path in threads.rglob("*") if path.is_file()}

    before = files()
    mcp = McpProcess(home, tmp_path)
    try:
        mcp.text("search_sessions", query="ibis")
        mcp.text("list_sessions")
        mcp.text("read_session", thread=thread)
        mcp.text("resume_command", thread=thread)
    finally:
        code = mcp.close()
    assert code == 0, mcp.stderr()  # stdin closed: it left by itself
    assert files() == before


def test_serve_loads_nothing_of_mcp(spawn: Any) -> None:
    server: ServerProcess = spawn(env={"SESSIOND_DEBUG": "1"})
    server.initialize()
    server.request("thread/list", {})
    report = server.request("sessiond/debug")
    assert loaded(report, "server.handlers.handshake")  # the test sees what it asserts
    assert not loaded(report, "mcp") and not loaded(report, "server.mcp")
