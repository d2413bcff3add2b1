"""Where a thread runs: probe the current cwd/repo/branch/HEAD and compare with the record.

GitPython is imported on first use only (sessiond promises no warmup), and each Repo is
closed after the probe so no git subprocess or file handle outlives the request.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path
from typing import Any

ENVIRONMENT_FIELDS = ("cwd", "repoRoot", "repoId", "branch", "headSha", "worktree")


def probe(cwd: str) -> dict[str, Any]:
    """The current environment of `cwd`; repo fields are None outside a git repo.

    `repoId` names the repository independently of where it is checked out (root commit
    and origin URL), so "another repo at the same path" is told apart from "same repo".
    """
    found: dict[str, Any] = {
        "cwd": cwd,
        "cwdExists": os.path.isdir(cwd),
        "repoRoot": None,
        "repoId": None,
        "branch": None,
        "headSha": None,
        "worktree": None,
        "linkedWorktree": False,
        "dirty": [],
    }
    if not found["cwdExists"]:
        return found
    import git  # lazy: GitPython costs ~100 ms to import

    try:
        repo = git.Repo(cwd, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return found
    try:
        found["repoRoot"] = repo.working_tree_dir
        found["worktree"] = repo.working_tree_dir
        found["linkedWorktree"] = Path(repo.git_dir).resolve() != Path(repo.common_dir).resolve()
        head = repo.head
        found["branch"] = None if head.is_detached else head.reference.name
        status = repo.git.status("--porcelain", "--untracked-files=normal")  # fails first
        with contextlib.suppress(ValueError):  # a repo with no commits yet has no HEAD
            found["headSha"] = head.commit.hexsha
        found["repoId"] = _repo_id(repo, found["headSha"] is not None)
        found["dirty"] = [line[3:] for line in status.splitlines() if len(line) > 3][:200]
    except git.GitCommandError as exc:
        # git refused to work here (e.g. "dubious ownership" of a repo owned by another
        # user): keep what was read from the files, say why the rest is missing, never fail.
        message = str(exc.stderr or exc).strip().replace("stderr: ", "").strip("'\" ")
        found["repoError"] = next(iter(message.splitlines()), "git failed")[:300]
    finally:
        repo.close()
    return found


def _repo_id(repo: Any, has_commits: bool) -> str:
    """Root commit and origin URL: the same on every clone, whatever its path."""
    roots = repo.git.rev_list("--max-parents=0", "HEAD").split() if has_commits else []
    origin = None
    if "origin" in [remote.name for remote in repo.remotes]:
        origin = next(iter(repo.remote("origin").urls), None)
    return f"{roots[-1] if roots else 'empty'}:{origin or ''}"


def repo_identity(path: str) -> tuple[str, str] | None:
    """(repoId, repo root) of the repository containing `path`, without the status scan
    a full probe runs; None outside a repository or when git refuses it."""
    if not os.path.isdir(path):
        return None
    import git

    try:
        repo = git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None
    try:
        try:
            has_commits = repo.head.is_valid()
        except ValueError:
            has_commits = False
        root = repo.working_tree_dir
        return (_repo_id(repo, has_commits), str(root)) if root else None
    except git.GitCommandError:
        return None
    finally:
        repo.close()


def _inside(cwd: Any, root: Any) -> str | None:
    """`cwd` relative to `root` ("" at the root); None when it is not inside."""
    if not (isinstance(cwd, str) and isinstance(root, str)):
        return None
    relative = os.path.relpath(cwd, root)
    return None if relative.startswith("..") else "" if relative == "." else relative


def other_checkout(recorded: dict[str, Any], current: dict[str, Any]) -> bool:
    """Same repository (root commit and origin), same branch, same directory inside it,
    another path: a thread recorded at /home/ana/shop/api, resumed at /work/shop/api."""
    repo_id = recorded.get("repoId")
    if not repo_id or str(repo_id).startswith("empty:") or repo_id != current.get("repoId"):
        return False
    if recorded.get("repoRoot") == current.get("repoRoot") or not current.get("cwdExists", True):
        return False
    if recorded.get("branch") != current.get("branch"):
        return False  # another branch elsewhere: every difference is reported, and blocks
    here = _inside(current.get("cwd"), current.get("repoRoot"))
    return here is not None and here == _inside(recorded.get("cwd"), recorded.get("repoRoot"))


def detect_drift(recorded: dict[str, Any], current: dict[str, Any]) -> list[dict[str, Any]]:
    """Differences between where the thread ran and where it would run now.

    A different place (cwd, repo, branch, worktree) blocks: the agent must not continue
    silently in the wrong workspace. HEAD moving on the same branch only warns, and so does
    another checkout of the same repository at the same place inside it (`worktree`, with
    `reason`): a thread bound to a repository, not a path, may move between machines.
    """
    drift: list[dict[str, Any]] = []

    def add(field: str, key: str, severity: str) -> None:
        drift.append(
            {
                "field": field,
                "recorded": recorded.get(key),
                "current": current.get(key),
                "severity": severity,
            }
        )

    if other_checkout(recorded, current):
        # The same repository at the same place inside it, checked out elsewhere (another
        # machine, another clone): where the thread belongs, so it may go on, with a word.
        add("worktree", "repoRoot", "warn")
        drift[-1]["reason"] = "same repository, other checkout"
    else:
        if recorded.get("cwd") != current.get("cwd") or not current.get("cwdExists", True):
            add("cwd", "cwd", "block")
        if recorded.get("repoRoot") != current.get("repoRoot") or (
            recorded.get("repoId") and recorded.get("repoId") != current.get("repoId")
        ):
            add("repo", "repoId" if recorded.get("repoId") else "repoRoot", "block")
        if recorded.get("worktree") and recorded.get("worktree") != current.get("worktree"):
            add("worktree", "worktree", "block")
    if recorded.get("branch") != current.get("branch"):
        add("branch", "branch", "block")
    elif recorded.get("headSha") != current.get("headSha"):
        add("head", "headSha", "warn")
    return drift


class Workspace:
    """File access for validators, rooted at the thread's recorded directory."""

    def __init__(self, root: str) -> None:
        self.root = Path(root)
        self._shas: dict[str, str | None] = {}

    def resolve(self, path: str) -> Path:
        return self.root / path if not os.path.isabs(path) else Path(path)

    def file_sha(self, path: str) -> str | None:
        if path not in self._shas:
            try:
                self._shas[path] = hashlib.sha256(self.resolve(path).read_bytes()).hexdigest()
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
                self._shas[path] = None
        return self._shas[path]

    def read_text(self, path: str) -> str | None:
        try:
            return self.resolve(path).read_text(encoding="utf-8", errors="replace")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
            return None
