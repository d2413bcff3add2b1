"""The environment probe outside any repository runs no git (a chat harness's folder: the
two git processes were most of a `thread/continue` resume), and says what it said before;
inside one it still asks git."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from restore.engine.environment import probe


@pytest.fixture
def counted_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`git` on PATH logging each run, then running the real one."""
    real = subprocess.run(["which", "git"], capture_output=True, text=True, check=True)
    bin_dir, log = tmp_path / "bin", tmp_path / "git.log"
    bin_dir.mkdir()
    wrapper = bin_dir / "git"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {real.stdout.strip()} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


def _runs(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_a_folder_outside_any_repository_is_probed_without_git(
    tmp_path: Path, counted_git: Path
) -> None:
    chat = tmp_path / "chat" / "deeper"
    chat.mkdir(parents=True)
    found = probe(str(chat))
    assert _runs(counted_git) == 0
    assert found["cwd"] == str(chat.resolve()) and found["cwdExists"]
    assert all(found[key] is None for key in ("repoRoot", "repoId", "branch", "headSha"))
    assert "repoError" not in found


def test_a_bare_repository_is_no_work_tree_either_way(tmp_path: Path, counted_git: Path) -> None:
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    before = _runs(counted_git)
    found = probe(str(bare))
    assert _runs(counted_git) == before
    assert found["repoRoot"] is None and "repoError" not in found


def test_inside_a_repository_git_is_asked(tmp_path: Path, counted_git: Path) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "trunk", str(repo)], check=True)
    (repo / "src").mkdir()
    before = _runs(counted_git)
    found = probe(str(repo / "src"))
    assert _runs(counted_git) > before
    assert found["repoRoot"] == str(repo.resolve()) and found["branch"] == "trunk"


def test_a_dot_git_of_any_kind_above_makes_git_ask(tmp_path: Path, counted_git: Path) -> None:
    """A `.git` file (a linked worktree's), even a broken one: git decides, as before."""
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / ".git").write_text("gitdir: /nowhere\n")
    (tmp_path / "odd" / "in").mkdir()
    probe(str(tmp_path / "odd" / "in"))
    assert _runs(counted_git) > 0


def test_an_empty_dot_git_above_is_no_repository(tmp_path: Path) -> None:
    """Codex's sandbox makes an empty `/tmp/.git` (a mount point keeping `.git` read-only)
    while its command runs. Every thread under /tmp was then "in repository /tmp" and its
    resume blocked on a drift (CI's crash loop). git takes a `.git` directory only with
    HEAD, objects and refs in it; so does the probe: an empty one is nothing, and the
    search goes on upwards, as git's does."""
    outer = tmp_path / "outer"
    (outer / ".git").mkdir(parents=True)
    (outer / "work").mkdir()
    found = probe(str(outer / "work"))
    assert (found["repoRoot"], found["branch"], found.get("repoError")) == (None, None, None)
