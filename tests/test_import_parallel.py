"""A batch import that parses in worker processes writes exactly what one that parses in
its own process writes: the same thread files byte for byte, the same ledger, the same
summary; also when a worker is killed, and a killed import leaves no worker behind.

Each import runs in a fresh process (tests/support/import_driver.py, or the real command line):
workers are forked only from a process with one thread.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.import_ import write_rollouts
from restore.imports.importer import PARALLEL_FROM
from restore.imports.ledger import ImportLedger
from tests.conftest import git
from tests.support.import_fixtures import Fixture, build
from tests.test_cli import REPO

AGENTS = {"claude": "claude-code", "codex": "codex"}
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="workers are forked on Linux only")


@pytest.fixture
def fixture(tmp_path: Path, make_repo: Callable[..., Path]) -> Fixture:
    alpha, beta = make_repo("alpha", "main"), make_repo("beta", "feature/login")
    heads = {repo: git(repo, "rev-parse", "HEAD") for repo in (alpha, beta)}
    built = build(tmp_path / "sources", alpha, beta, heads)
    # The same Codex session in a second file: its threads are revisions of one session,
    # so planning it must wait for the first file's thread (planned ahead, it would not).
    first = next(s.path for s in built.of("codex"))
    twin = built.codex_root / "2026" / "12" / "31" / first.name
    twin.parent.mkdir(parents=True)
    shutil.copy2(first, twin)
    return built


def import_with(home: Path, agent: str, source: Path, mode: str, *extra: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.import_driver", str(home), agent, str(source), mode,
         *extra],
        cwd=REPO, capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    assert b"Traceback" not in done.stderr, done.stderr.decode()
    answer: dict[str, Any] = orjson.loads(done.stdout)
    del answer["summary"]["seconds"]
    return answer


def written(home: Path) -> dict[str, Any]:
    """Every thread file's bytes, and the ledger's rows of both agents."""
    threads = {p.name: p.read_bytes() for p in sorted((home / "threads").rglob("*.jsonl"))}
    ledger = ImportLedger(home / "imports.sqlite3")
    try:
        rows = {agent: {source: asdict(row) for source, row in ledger.all(agent).items()}
                for agent in AGENTS.values()}  # fmt: skip
    finally:
        ledger.close()
    return {"threads": threads, "ledger": rows}


def both_ways(
    homes: tuple[Path, Path], fixture: Fixture, *extra: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Import both agents serially into one home and with workers into the other."""
    serial, parallel = {}, {}
    for agent in AGENTS:
        root = fixture.claude_root if agent == "claude" else fixture.codex_root
        serial[agent] = import_with(homes[0], agent, root, "serial", *extra)
        parallel[agent] = import_with(homes[1], agent, root, "0", *extra)
    return serial, parallel


@pytest.mark.parametrize("batch_items", [None, 3], ids=["whole-files", "flushed-in-batches"])
def test_a_parallel_import_writes_the_same_threads_and_ledger_as_a_serial_one(
    fixture: Fixture, tmp_path: Path, batch_items: int | None
) -> None:
    homes = (tmp_path / "serial", tmp_path / "parallel")
    extra = ("--batch-items", str(batch_items)) if batch_items else ()
    serial, parallel = both_ways(homes, fixture, *extra)
    for agent in AGENTS:
        assert serial[agent]["parsedByWorkers"] == 0
        summary = parallel[agent]["summary"]
        read = summary["created"] + summary["updated"] + summary["revisions"]
        assert parallel[agent]["parsedByWorkers"] >= read > 0
        assert parallel[agent]["summary"] == serial[agent]["summary"]
    assert serial["codex"]["summary"]["created"] == 6  # the twin is a revision of its own
    first = written(homes[0])
    assert first["threads"] and written(homes[1]) == first

    # Then a session grows and another is rewritten: updated (its writer is open while
    # the workers parse what follows) and a new revision, the same both ways.
    grown, rewritten = (s.path for s in fixture.of("codex")[:2])
    lines = grown.read_bytes().splitlines(keepends=True)
    with grown.open("ab") as handle:
        handle.write(b"".join(lines[-2:]))
    rewritten.write_bytes(b"".join(rewritten.read_bytes().splitlines(keepends=True)[:-3]))
    serial, parallel = both_ways(homes, fixture, *extra)
    assert serial["codex"]["summary"]["updated"] == 1
    assert serial["codex"]["summary"]["revisions"] == 1
    for agent in AGENTS:
        assert parallel[agent]["summary"] == serial[agent]["summary"]
    assert written(homes[1]) == written(homes[0]) != first


def test_killed_parse_workers_leave_their_files_to_the_importer(
    fixture: Fixture, tmp_path: Path
) -> None:
    homes = (tmp_path / "serial", tmp_path / "parallel")
    for agent, root in (("claude", fixture.claude_root), ("codex", fixture.codex_root)):
        serial = import_with(homes[0], agent, root, "serial")
        killed = import_with(homes[1], agent, root, "0", "--kill-workers")
        assert killed["killed"] >= 1
        assert killed["summary"] == serial["summary"]
    assert written(homes[1]) == written(homes[0])


def test_a_small_import_starts_no_workers(fixture: Fixture, tmp_path: Path) -> None:
    answer = import_with(tmp_path / "home", "codex", fixture.codex_root, str(PARALLEL_FROM))
    assert answer["summary"]["created"] == 6
    assert answer["parsedByWorkers"] == 0


def start_import(tmp_path: Path, sessions: int) -> subprocess.Popen[bytes]:
    """`sessiond import codex` on `sessions` generated rollouts (600: 13 MiB, worth the
    workers), with Ctrl-C's default meaning (a test run in the background may have
    inherited it ignored)."""
    source = tmp_path / "codex" / "sessions"
    if not source.exists():
        write_rollouts(tmp_path / "codex", sessions)
    return subprocess.Popen(
        [sys.executable, "-m", "server.cli", "--home", str(tmp_path / "home"), "import",
         "codex", "--from", str(source), "--json"],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip


def workers_of(importer: subprocess.Popen[bytes]) -> list[int]:
    children: list[int] = []
    while not children and importer.poll() is None:
        children = _children(importer.pid)
    assert children, "the import ended before its workers were seen"
    return children


def gone(pids: list[int]) -> bool:
    # The kernel (PR_SET_PDEATHSIG) or the importer ends them at once; the deadline only
    # turns a hang into a failure.
    deadline = time.monotonic() + 60
    while any(_running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.01)
    return not any(_running(pid) for pid in pids)


def test_a_killed_import_leaves_no_worker_behind_and_the_next_one_completes_it(
    tmp_path: Path,
) -> None:
    importer = start_import(tmp_path, 600)
    workers = workers_of(importer)
    importer.kill()
    importer.communicate()
    assert gone(workers)
    again = start_import(tmp_path, 600)
    out, err = again.communicate()
    assert again.returncode == 0, err.decode()
    summary = orjson.loads(out)
    # What the killed import wrote is found again (from the threads' checkpoints when
    # its ledger rows were never written), the rest is imported: each session once.
    assert summary["created"] + summary["unchanged"] == 600
    assert summary["created"] * 65 == summary["items"]
    threads = list((tmp_path / "home" / "threads").rglob("*.jsonl"))
    assert len(threads) == 600
    assert all(b'"import_checkpoint"' in t.read_bytes().splitlines()[-1] for t in threads)


def test_ctrl_c_stops_a_parallel_import_cleanly(tmp_path: Path) -> None:
    importer = start_import(tmp_path, 600)
    workers = workers_of(importer)
    importer.send_signal(signal.SIGINT)
    _, err = importer.communicate()
    assert importer.returncode == 130
    assert b"Traceback" not in err, err.decode()
    assert gone(workers)


def _children(pid: int) -> list[int]:
    try:
        listed = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(child) for child in listed.split()]


def _running(pid: int) -> bool:
    """Alive and not a zombie (a dead child whose exit nobody collected)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")
