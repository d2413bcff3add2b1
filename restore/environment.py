"""Where a thread runs: probe the current cwd/repo/branch/HEAD and compare with the record.

GitPython is imported on first use only (sessiond promises no warmup), and each Repo is
closed after the probe so no git subprocess or file handle outlives the request.
"""

from __future__ import annotations

import os
from typing import Any

ENVIRONMENT_FIELDS = ("cwd", "repoRoot", "branch", "headSha")


def probe(cwd: str) -> dict[str, Any]:
    """The current environment of `cwd`; repo fields are None outside a git repo."""
    found: dict[str, Any] = {
        "cwd": cwd,
        "cwdExists": os.path.isdir(cwd),
        "repoRoot": None,
        "branch": None,
        "headSha": None,
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
        head = repo.head
        found["branch"] = None if head.is_detached else head.reference.name
        try:
            found["headSha"] = head.commit.hexsha
        except ValueError:  # a repo with no commits yet
            found["headSha"] = None
    finally:
        repo.close()
    return found


def detect_drift(recorded: dict[str, Any], current: dict[str, Any]) -> list[dict[str, Any]]:
    """Differences between where the thread ran and where it would run now.

    A different place (cwd, repo, branch) blocks: the agent must not continue silently in
    the wrong workspace. HEAD moving on the same branch only warns.
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

    if recorded.get("cwd") != current.get("cwd") or not current.get("cwdExists", True):
        add("cwd", "cwd", "block")
    if recorded.get("repoRoot") != current.get("repoRoot"):
        add("repo", "repoRoot", "block")
    if recorded.get("branch") != current.get("branch"):
        add("branch", "branch", "block")
    elif recorded.get("headSha") != current.get("headSha"):
        add("head", "headSha", "warn")
    return drift
