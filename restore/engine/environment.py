"""Where a thread runs: probe the current cwd/repo/branch/HEAD and compare with the record.

git runs through `restore.gitcli`: time-boxed, and for a folder the client did not mark
trusted, with configuration that keeps the repository from running its own programs.
Where git refuses to work (a repository owned by another user: "dubious ownership") the
branch and HEAD are read from the files, through `restore.access` (regular files only).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from protocol.errors import ProtocolError
from restore import access

if TYPE_CHECKING:
    from restore.engine.gitcli import GitResult

ENVIRONMENT_FIELDS = ("cwd", "repoRoot", "repoId", "branch", "headSha", "worktree")
_REF_LIMIT = 1 << 16
_PACKED_REFS_LIMIT = 64 << 20


def probe(cwd: str, trusted_folders: Iterable[str] = ()) -> dict[str, Any]:
    """The current environment of `cwd`; repo fields are None outside a git repo.

    `repoId` names the repository independently of where it is checked out (root commit
    and origin URL), so "another repo at the same path" is told apart from "same repo".
    git may run the repository's own programs only when both `cwd` and the repository's
    root lie in one of `trusted_folders`. An absolute `cwd` is recorded canonical (links
    and `..` resolved, as `getcwd` would say it), so `TRUSTED/../untrusted` is stored as
    where it really is, and two spellings of one place never drift from each other.
    """
    cwd = canonical(cwd)
    found: dict[str, Any] = {
        "cwd": cwd,
        "cwdExists": "\0" not in cwd and os.path.isdir(cwd),
        "repoRoot": None,
        "repoId": None,
        "branch": None,
        "headSha": None,
        "worktree": None,
        "linkedWorktree": False,
        "dirty": [],
    }
    if not found["cwdExists"] or not _under_dotgit(cwd):
        return found  # no repository can hold cwd: no git process to ask (a chat's folder)
    trusted_folders = list(trusted_folders)
    from restore.engine.gitcli import Git  # subprocess: not for a list's `canonical`

    git = Git(cwd)
    where = git.run("rev-parse", "--show-toplevel", "--absolute-git-dir", "--git-common-dir")
    lines = where.stdout.splitlines()
    if not where.ok or len(lines) != 3:
        _from_files(cwd, found, where.first_error_line())
        return found
    root, git_dir, common_dir = lines
    found["repoRoot"] = found["worktree"] = root
    common_dir = os.path.join(cwd, common_dir)
    found["linkedWorktree"] = os.path.realpath(git_dir) != os.path.realpath(common_dir)
    git.trust(access.inside_any(cwd, trusted_folders) and access.inside_any(root, trusted_folders))
    branch, status, head, roots, origin = git.run_all(
        ("symbolic-ref", "-q", "HEAD"),  # exit 1: detached
        ("status", "--porcelain", "--untracked-files=normal"),
        ("rev-parse", "-q", "--verify", "HEAD^{commit}"),  # nothing: no commit yet
        ("rev-list", "--max-parents=0", "HEAD"),  # fails too when there is no commit
        ("remote", "get-url", "origin"),  # exit 2: no such remote
    )
    ref = branch.stdout.strip()
    found["branch"] = ref.removeprefix("refs/heads/") if branch.ok and ref else None
    if not status.ok:
        # git refused to work here: keep what was read, say why the rest is missing.
        found["repoError"] = status.first_error_line()
        return found
    found["headSha"] = (head.stdout.strip() or None) if head.ok else None
    found["repoId"] = _repo_id(found["headSha"], roots, origin)
    found["dirty"] = [line[3:] for line in status.stdout.splitlines() if len(line) > 3][:200]
    return found


def _under_dotgit(cwd: str) -> bool:
    """Whether `cwd` (canonical) or a parent holds an entry named `.git`, of any kind.

    git finds a repository only through one (GIT_DIR and GIT_WORK_TREE are never passed
    on: restore/engine/gitcli.py), or in a bare repository, where it reports no work tree
    and the probe had nothing to record either. Where there is none, asking git costs
    two processes (~5 ms, most of a resume outside a repository) to learn nothing."""
    return any(os.path.lexists(os.path.join(directory, ".git")) for directory in _upwards(cwd))


def _upwards(directory: str) -> Iterator[str]:
    """`directory`, then each of its parents up to the root."""
    while True:
        yield directory
        parent = os.path.dirname(directory)
        if parent == directory:
            return
        directory = parent


def canonical(cwd: str) -> str:
    """An absolute path without NUL, resolved; anything else as it is (callers refuse it)."""
    return os.path.realpath(cwd) if os.path.isabs(cwd) and "\0" not in cwd else cwd


def _same_cwd(recorded: Any, current: Any) -> bool:
    """A cwd recorded before cwds were stored canonical is the same place when it resolves
    to the current one."""
    return recorded == current or (isinstance(recorded, str) and canonical(recorded) == current)


def _repo_id(head_sha: str | None, roots: GitResult, origin: GitResult) -> str:
    """Root commit and origin URL: the same on every clone, wherever it is checked out."""
    root_commits = roots.stdout.split() if roots.ok and head_sha else []
    origin_url = origin.stdout.strip() if origin.ok else ""
    return f"{root_commits[-1] if root_commits else 'empty'}:{origin_url}"


def repo_identity(path: str) -> tuple[str, str] | None:
    """(repoId, repo root) of the repository containing `path`, without the status scan
    a full probe runs (git untrusted: nothing of the repository's runs); None outside a
    repository or when git refuses it."""
    if "\0" in path or not os.path.isdir(path):
        return None
    from restore.engine.gitcli import Git

    git = Git(path)
    where = git.run("rev-parse", "--show-toplevel")
    root = where.stdout.strip()
    if not where.ok or not root:
        return None
    head, roots, origin = git.run_all(
        ("rev-parse", "-q", "--verify", "HEAD^{commit}"),
        ("rev-list", "--max-parents=0", "HEAD"),
        ("remote", "get-url", "origin"),
    )
    head_sha = (head.stdout.strip() or None) if head.ok else None
    return _repo_id(head_sha, roots, origin), root


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


def _from_files(cwd: str, found: dict[str, Any], error: str) -> None:
    """git would not say (not a repo, or it refused one): find `.git` and read HEAD."""
    located = _git_dir_of(cwd)
    if located is None:
        return  # not a repository: nothing to report, nothing went wrong
    root, git_dir = located
    found["repoRoot"] = found["worktree"] = root
    found["repoError"] = error
    try:
        head = (access.read_regular(os.path.join(git_dir, "HEAD"), _REF_LIMIT) or b"").decode()
    except (OSError, UnicodeDecodeError, ProtocolError):
        return
    head = head.strip()
    if head.startswith("ref: "):
        ref = head[5:].strip()
        found["branch"] = ref.removeprefix("refs/heads/")
        found["headSha"] = _ref_sha(_common_dir(git_dir), ref)
    elif len(head) in (40, 64):
        found["headSha"] = head


def _git_dir_of(cwd: str) -> tuple[str, str] | None:
    """The worktree root and git dir holding `cwd`: a `.git` directory that is a git
    directory, or a `.git` file (`gitdir: …`, a linked worktree) in `cwd` or the nearest
    parent that has one."""
    for directory in _upwards(os.path.realpath(cwd)):
        dotgit = os.path.join(directory, ".git")
        if os.path.isdir(dotgit):
            if _is_git_dir(dotgit):
                return directory, dotgit
            continue  # an empty one (Codex's sandbox mounts over /tmp/.git): git looks on
        if os.path.isfile(dotgit):
            try:
                text = (access.read_regular(dotgit, _REF_LIMIT) or b"").decode().strip()
            except (OSError, UnicodeDecodeError, ProtocolError):
                return None
            if text.startswith("gitdir: "):
                return directory, os.path.join(directory, text[8:].strip())
            return None
    return None


def _is_git_dir(path: str) -> bool:
    """What git's `is_git_directory` asks: a HEAD, and objects and refs (a linked
    worktree's git dir has those in its common dir)."""
    if not os.path.isfile(os.path.join(path, "HEAD")):
        return False
    common = _common_dir(path)
    return all(os.path.isdir(os.path.join(common, name)) for name in ("objects", "refs"))


def _common_dir(git_dir: str) -> str:
    try:
        text = (access.read_regular(os.path.join(git_dir, "commondir"), _REF_LIMIT) or b"").decode()
    except (OSError, UnicodeDecodeError, ProtocolError):
        return git_dir
    return os.path.join(git_dir, text.strip()) if text.strip() else git_dir


def _ref_sha(common_dir: str, ref: str) -> str | None:
    """A branch's commit from its loose ref file, else from `packed-refs`."""
    if ".." in ref.split("/"):
        return None
    try:
        loose = access.read_regular(os.path.join(common_dir, ref), _REF_LIMIT)
        if loose is not None:
            return loose.decode().strip() or None
        packed = access.read_regular(os.path.join(common_dir, "packed-refs"), _PACKED_REFS_LIMIT)
    except (OSError, UnicodeDecodeError, ProtocolError):
        return None
    for line in (packed or b"").decode(errors="replace").splitlines():
        sha, _, name = line.partition(" ")
        if name == ref:
            return sha
    return None


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
        if not _same_cwd(recorded.get("cwd"), current.get("cwd")) or not current.get(
            "cwdExists", True
        ):
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
    """File access for validators: only paths `restore.access` allows for the thread, and
    only regular files, read without blocking. Why a path was refused is kept, so the
    report can say it instead of "missing"."""

    def __init__(self, scope: access.Scope) -> None:
        self.scope = scope
        self._shas: dict[str, str | None] = {}
        self.refused: dict[str, str] = {}

    def _resolve(self, path: str) -> str | None:
        try:
            return self.scope.resolve(path)
        except ProtocolError as refused:
            self.refused[path] = refused.message
            return None

    def file_sha(self, path: str) -> str | None:
        if path not in self._shas:
            target = self._resolve(path)
            self._shas[path] = (
                None if target is None else self._guarded(access.sha256_regular, path, target)
            )
        return self._shas[path]

    def read_text(self, path: str) -> str | None:
        target = self._resolve(path)
        if target is None:
            return None
        data = self._guarded(access.read_regular, path, target, access.TEXT_LIMIT)
        return None if data is None else data.decode("utf-8", errors="replace")

    def why_unreadable(self, path: str) -> str | None:
        return self.refused.get(path)

    def _guarded(self, read: Any, path: str, *args: Any) -> Any:
        try:
            return read(*args)
        except ProtocolError as refused:
            self.refused[path] = refused.message
        except OSError as exc:
            self.refused[path] = f"{path}: {exc.strerror}"
        return None
