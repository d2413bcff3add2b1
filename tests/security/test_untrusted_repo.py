"""A repository opened untrusted cannot run its own programs through sessiond.

Threat: a malicious repository the user opened (cloned, downloaded) without trusting it.
Its `.git/config` names programs that plain `git status` starts: `core.fsmonitor`, the
`post-index-change` hook under `core.hooksPath`, a `filter.<driver>.clean` program picked
by `.gitattributes`. Each would write a marker file. sessiond probes the repository on
`thread/start` and `thread/resume`; the marker must never appear, also after a client
rewrote `.git/config` through `fs/applyEdit` (the chain the issue describes).
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

from tests.conftest import git
from tests.faults.helpers import Spawn, start

EVIL_CONFIG = """
[core]
\tfsmonitor = {script}
\thooksPath = {hooks}
[filter "evil"]
\tclean = {script}
\tsmudge = {script}
"""


def _arm(repo: Path, root: Path) -> Path:
    """Point the repository's config at programs that leave `marker`; return it."""
    marker = root / "marker"
    script = root / "evil.sh"
    script.write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\ncat\n')
    script.chmod(0o755)
    hooks = root / "hooks"
    hooks.mkdir()
    (hooks / "post-index-change").write_text(f"#!/bin/sh\necho hook >> {marker}\n")
    (hooks / "post-index-change").chmod(0o755)
    (repo / ".gitattributes").write_text("* filter=evil\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-q", "-m", "attributes")
    with open(repo / ".git" / "config", "a") as config:
        config.write(EVIL_CONFIG.format(script=script, hooks=hooks))
    return marker


def _touch(repo: Path) -> None:
    """New stat data on a tracked file: status must look at its content (the clean filter)."""
    readme = repo / "README"
    stat = readme.stat()
    os.utime(readme, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))


def _trap_is_armed(repo: Path, marker: Path) -> None:
    """Plain git runs all three programs here: the test could fail."""
    _touch(repo)
    subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, check=True)
    ran = marker.read_text()
    assert "hook" in ran and "evil.sh" in ran
    marker.unlink()


def test_an_untrusted_repository_runs_none_of_its_programs_on_start_and_resume(
    spawn: Spawn, make_repo: Callable[..., Path], tmp_path: Path
) -> None:
    repo = make_repo("untrusted")
    marker = _arm(repo, tmp_path)
    _trap_is_armed(repo, marker)
    server = spawn()
    server.initialize([str(repo)], trusted=False)
    _touch(repo)
    tid, sid = start(server, repo)
    info = server.request("thread/read", {"threadId": tid})["items"][0]
    assert info["branch"] == "main" and len(info["headSha"]) == 40  # the probe still works
    assert info["repoId"].startswith(git(repo, "rev-list", "--max-parents=0", "HEAD"))
    server.request("thread/close", {"threadId": tid, "sessionId": sid})
    _touch(repo)
    assert server.request("thread/resume", {"threadId": tid})["status"] == "ready"
    assert not marker.exists(), marker.read_text()


def test_a_config_written_through_apply_edit_is_not_run_by_the_next_resume(
    spawn: Spawn, make_repo: Callable[..., Path], tmp_path: Path
) -> None:
    repo = make_repo("chained")
    marker = tmp_path / "marker"
    script = tmp_path / "evil.sh"
    script.write_text(f"#!/bin/sh\necho fsmonitor >> {marker}\n")
    script.chmod(0o755)
    server = spawn()
    server.initialize([str(repo)], trusted=False)
    tid, sid = start(server, repo)
    config = (repo / ".git" / "config").read_text() + f"[core]\n\tfsmonitor = {script}\n"
    server.request("fs/applyEdit", {"threadId": tid, "sessionId": sid,
                                    "operationId": str(uuid.uuid4()),
                                    "path": ".git/config", "content": config})  # fmt: skip
    subprocess.run(["git", "status"], cwd=repo, capture_output=True, check=True)
    assert marker.exists()  # the trap works for plain git
    marker.unlink()
    server.request("thread/close", {"threadId": tid, "sessionId": sid})
    server.request("thread/resume", {"threadId": tid})
    assert not marker.exists()


def test_a_cwd_spelled_through_a_trusted_folder_is_still_untrusted(
    spawn: Spawn, make_repo: Callable[..., Path], tmp_path: Path
) -> None:
    repo = make_repo("sibling")
    marker = _arm(repo, tmp_path)
    trusted = tmp_path / "trusted"
    trusted.mkdir()
    server = spawn()
    server.initialize([str(trusted)], trusted=True)
    _touch(repo)
    start(server, f"{trusted}/../{repo.name}")  # resolves to the untrusted repo
    assert not marker.exists()
