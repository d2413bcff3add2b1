"""A server's searches run in a process of their own (restore/stores/embedded/search_child.py),
so their catch-up and query take no CPU from the recording threads: started by the first
search and never at startup, without the store's credentials, in sessiond's own code
directory; replaced when killed, the search it died in answered all the same; gone with its
server, whether the server shuts down or is killed."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from restore.stores.embedded.search_child import CODE_ROOT
from tests.faults.helpers import record, start
from tests.support.items import message
from tests.support.processes import alive
from tests.support.rpc_client import ServerProcess
from tests.support.wait import eventually

CHILD_MODULE = b"restore.stores.embedded.search_child_main"


def search_processes(server: ServerProcess) -> list[int]:
    """The server's children running the search (from /proc, as `ps` would show them)."""
    found = []
    for task in Path(f"/proc/{server.proc.pid}/task").iterdir():
        for pid in (task / "children").read_text().split():
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except FileNotFoundError:
                continue
            if CHILD_MODULE in argv and alive(int(pid)):
                found.append(int(pid))
    return found


def environment_of(pid: int) -> dict[str, str]:
    pairs = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(p.decode().partition("=")[::2] for p in pairs if p)


def found_seqs(server: ServerProcess, query: str) -> set[int]:
    return {hit["seq"] for hit in server.request("thread/search", {"query": query})["hits"]}


def test_searches_run_in_one_process_of_their_own_started_by_the_first(
    spawn: Any, tmp_path: Path
) -> None:
    secrets = {"PGPASSWORD": "hunter2-not-for-children", "PGPASSFILE": str(tmp_path / "pgpass")}
    server = spawn(env=secrets)
    server.initialize()
    workspace = tmp_path / "w"
    tid, sid = start(server, workspace)
    first = record(server, tid, sid, message("a narwhal surfaced"))
    assert search_processes(server) == []  # never at startup, nor for a record
    assert found_seqs(server, "narwhal") == {first["firstSeq"]}
    [child] = search_processes(server)
    env = environment_of(child)
    assert "PGPASSWORD" not in env and "PGPASSFILE" not in env
    assert Path(os.readlink(f"/proc/{child}/cwd")) == CODE_ROOT  # not the client's folder
    second = record(server, tid, sid, message("a second narwhal"))
    assert found_seqs(server, "narwhal") == {first["firstSeq"], second["firstSeq"]}
    assert search_processes(server) == [child]  # the same one, kept


def test_a_search_process_killed_mid_search_still_answers_and_is_replaced(
    spawn: Any, tmp_path: Path
) -> None:
    pause = tmp_path / "pause"
    pause.mkdir()
    server = spawn(env={"SESSIOND_PAUSE_AT": f"thread-search:{pause}"})
    server.initialize()
    tid, sid = start(server, tmp_path / "w")
    answer = record(server, tid, sid, message("an axolotl in the tank"))
    searching = server.request_async("thread/search", {"query": "axolotl"})
    reached = pause / "thread-search.reached"
    eventually(reached.exists, "the search under way in its process")
    [child] = search_processes(server)
    reached.unlink()
    os.kill(child, signal.SIGKILL)
    eventually(reached.exists, "the same search under way in the server itself")
    assert search_processes(server) == []
    (pause / "thread-search.go").touch()
    hits = server.response(searching)["result"]["hits"]
    assert [hit["seq"] for hit in hits] == [answer["firstSeq"]]
    assert "the search process exited (code -9)" in server.stderr()
    assert found_seqs(server, "axolotl") == {answer["firstSeq"]}  # the next search: a new one
    [replacement] = search_processes(server)
    assert replacement != child


@pytest.mark.parametrize("how", ["shutdown", "kill -9"])
def test_no_search_process_outlives_its_server(spawn: Any, tmp_path: Path, how: str) -> None:
    server = spawn()
    server.initialize()
    tid, sid = start(server, tmp_path / "w")
    record(server, tid, sid, message("a pangolin"))
    assert found_seqs(server, "pangolin")
    [child] = search_processes(server)
    if how == "shutdown":
        assert server.shutdown() == 0
    else:
        server.kill9()
    eventually(lambda: not alive(child), "the search process gone with its server")
