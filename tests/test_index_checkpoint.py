"""The listing index's WAL is checkpointed when the server pauses, not in a request.

SQLite checkpoints a WAL in the transaction that takes it past `wal_autocheckpoint`
pages; at its default (1,000) every ~50th `thread/continue` reset paid ~8 ms for it. The
server's store worker runs the checkpoint once no request came for `IDLE_SECONDS`
(server/worker.py), and SQLite's own only past `WAL_BOUND_PAGES`. What a person can see of
it: after a pause, the index file itself holds what was written, with no WAL beside it.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

from restore.home.layout import Layout
from tests.support.rpc_client import ServerProcess
from tests.support.wait import eventually


def titles_in_the_file_alone(index: Path, copy: Path) -> set[str]:
    """The titles a copy of the index file lists without its WAL: what was checkpointed."""
    shutil.copyfile(index, copy)
    conn = sqlite3.connect(copy)
    try:
        return {title for (title,) in conn.execute("SELECT title FROM threads") if title}
    except sqlite3.DatabaseError:  # the table itself is still in the WAL
        return set()
    finally:
        conn.close()


def test_after_a_pause_the_index_file_itself_holds_the_rows(
    spawn: Callable[..., ServerProcess], home: Path, tmp_path: Path
) -> None:
    server = spawn()
    server.initialize()
    server.request("thread/list", {})  # the index, built
    titles = {f"written before the pause {n}" for n in range(3)}
    for title in sorted(titles):
        server.request("thread/start", {"cwd": str(tmp_path), "title": title})
    index = Layout(home).index_path
    found = eventually(
        lambda: titles <= titles_in_the_file_alone(index, tmp_path / "copy.sqlite3"),
        "the index's WAL checkpointed once the server paused",
    )
    assert found
    assert server.request("thread/list", {})["threads"]  # the server goes on as before
