"""Gemini CLI's session store as `sessiond import gemini` finds and reads it, on a session
the real gemini-cli 0.38.2 wrote (tests/compat/fixtures/; tests/compat/test_gemini.py runs
the current CLI itself): where the store is, which files are sessions, and the faults a
store can hold. Real `sessiond` processes, real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.rpc_client import REPO

LEGACY = REPO / "tests/compat/fixtures/gemini-0.38.2-session-2026-12-01T11-57-695ae3ca.json"
SESSION_ID = "695ae3ca-cfc4-4d60-849f-4ddb023d0a7d"


def store(root: Path, repo: Path, text: str | None = None, *, marker: bool = True) -> Path:
    """A Gemini home under `root` (`.gemini/tmp/repo/chats/`) holding the 0.38.2 session,
    for a project at `repo`; returns the session file."""
    project = root / ".gemini" / "tmp" / "repo"
    (project / "chats").mkdir(parents=True, exist_ok=True)
    (root / ".gemini" / "projects.json").write_text(json.dumps({"projects": {str(repo): "repo"}}))
    if marker:
        (project / ".project_root").write_text(str(repo))
    session = project / "chats" / "session-2026-12-01T11-57-695ae3ca.json"
    written = LEGACY.read_text().replace("@ROOT@", str(root))  # as that run left its paths
    session.write_text(text if text is not None else written)
    return session


def sessiond(home: Path, *args: str, **env: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "server.cli", "--home", str(home), *args, "--json"],
        cwd=REPO, capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[0])


def listed(home: Path) -> list[dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "server.cli", "--home", str(home), "list", "--json"],
        cwd=REPO, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_the_store_is_where_gemini_keeps_it_and_the_cwd_is_the_projects_root(
    tmp_path: Path,
) -> None:
    # $GEMINI_CLI_HOME stands for the home directory (Gemini CLI's homedir()): the store is
    # its .gemini/tmp. The session names no directory (0.38 recorded no primed context):
    # the project's root comes from the store, its marker first, else projects.json.
    gemini_home, repo = tmp_path / "gemini-home", tmp_path / "repo"
    repo.mkdir()
    store(gemini_home, repo, marker=False)
    summary = sessiond(tmp_path / "sd", "import", "gemini", GEMINI_CLI_HOME=str(gemini_home))
    assert (summary["root"], summary["created"]) == (str(gemini_home / ".gemini" / "tmp"), 1)
    (thread,) = listed(tmp_path / "sd")
    assert (thread["cwd"], thread["origin"]["sessionId"]) == (str(repo), SESSION_ID)


def test_a_half_written_gemini_document_is_read_once_it_is_whole(tmp_path: Path) -> None:
    # Up to 0.38 each change rewrote the whole document: caught mid-write it is not JSON.
    repo, whole = tmp_path / "repo", LEGACY.read_text().replace("@ROOT@", str(tmp_path))
    session = store(tmp_path, repo, whole[: len(whole) // 2])
    home, source = tmp_path / "sd", str(tmp_path / ".gemini" / "tmp")
    cut = sessiond(home, "import", "gemini", "--from", source)
    assert (cut["created"], cut["empty"], cut["skippedLines"]) == (0, 1, 1)
    assert cut["problems"][0]["skipped"][0]["reason"] == "invalid_json"
    assert listed(home) == []
    session.write_text(whole)
    done = sessiond(home, "import", "gemini", "--from", source)
    assert (done["created"], done["skippedLines"], done["unmapped"]) == (1, 0, {})
    (thread,) = listed(home)
    assert thread["title"] == "[[write]] write notes, edit them, then run a command"
    assert sessiond(home, "import", "gemini", "--from", source)["unchanged"] == 1


def test_a_session_id_that_is_not_a_plain_name_is_never_imported(tmp_path: Path) -> None:
    # The session id becomes the handoff's argument (`gemini --resume ID`) and a thread's
    # identity: one that could pass for an option or shell syntax is not taken in.
    crafted = LEGACY.read_text().replace(SESSION_ID, "--yolo $(touch pwned)")
    store(tmp_path, tmp_path / "repo", crafted)
    summary = sessiond(tmp_path / "sd", "import", "gemini", "--from",
                       str(tmp_path / ".gemini" / "tmp"))  # fmt: skip
    assert (summary["created"], summary["empty"]) == (0, 1)
    assert listed(tmp_path / "sd") == []
    assert not (REPO / "pwned").exists() and not (tmp_path / "pwned").exists()


def test_a_large_file_with_no_session_id_is_reported_as_a_skipped_line_not_dropped(
    tmp_path: Path,
) -> None:
    """Issue 35: 20 MB of junk where a session file is looked for was one more "empty"
    session, its bytes dropped without a word; a file still being written (short: its id
    comes first) stays "empty" until the id is there."""
    session = store(tmp_path, tmp_path / "repo", "x" * 20_000_000)
    (session.parent / "session-2026-12-01T12-00-abcd1234.json").write_text('{"sessi')
    summary = sessiond(tmp_path / "sd", "import", "gemini", "--from",
                       str(tmp_path / ".gemini" / "tmp"))  # fmt: skip
    assert (summary["created"], summary["empty"], summary["skippedLines"]) == (0, 2, 1)
    junk, written = sorted(summary["problems"], key=lambda problem: -len(problem["skipped"]))
    assert junk["path"] == str(session)
    assert junk["reason"] == (
        "no session id (a plain name) in its first 4096 bytes, so no session: 20,000,000 "
        "bytes not read"
    )
    assert [(s["lineNo"], s["reason"], s["preview"]) for s in junk["skipped"]] == [
        (1, "no_session_id", "x" * 80)
    ]
    assert (written["reason"], written["skipped"]) == ("no session id (a plain name) in it yet", [])
    assert listed(tmp_path / "sd") == []
