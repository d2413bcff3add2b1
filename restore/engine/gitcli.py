"""git, run so that a repository cannot make sessiond execute its programs.

A repository's own configuration can name programs that plain read-only commands run:
`git status` alone starts `core.fsmonitor`, the `post-index-change` hook (from
`.git/hooks` or `core.hooksPath`) when it refreshes the index, and a `filter.<driver>.clean`
program (selected by the repository's `.gitattributes`) for every file whose stat data
changed. A folder the user opened untrusted must not run code through sessiond's probe.

So every git command here runs:
- with `GIT_OPTIONAL_LOCKS=0` (status never writes the index, so no index hook fires),
  no terminal prompt, and a timeout (a FIFO named by `core.excludesFile` or an include
  cannot hold the one store thread: git is killed and the probe says why);
- for an untrusted folder, also with configuration that overrides the repository's own
  (`GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`, which take precedence over every config file and
  are inherited by any git git starts): `core.fsmonitor=false`,
  `core.hooksPath=/dev/null`, `core.pager=cat`, `protocol.allow=never` (a partial clone's
  lazy fetch cannot start a transport: ssh, `ext::` or `core.sshCommand`), and every
  filter driver any config file defines emptied (`clean`, `smudge`, `process`, and
  `required=false`). Submodules are not entered (`--ignore-submodules=all`): their config is
  another repository's.

Why not GitPython: its persistent `cat-file` processes and its own reads of `.git` files
(a FIFO as `HEAD` blocks it) can be neither time-boxed nor given these overrides per call.
"""

from __future__ import annotations

import functools
import subprocess
import time
from dataclasses import dataclass

from restore.child_env import child_environment

GIT_TIMEOUT = 20.0
"""Seconds one git command may take before it is killed (a huge repo's status included)."""
UNTRUSTED_OVERRIDES: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.useBuiltinFSMonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("protocol.allow", "never"),
    ("diff.ignoreSubmodules", "all"),
    ("status.submoduleSummary", "false"),
)
_FILTER_KEYS = (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false"))
_OVERRIDE_PREFIXES = ("GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_")
HARDENING_VERSION = (2, 31)
"""The first git that reads GIT_CONFIG_COUNT; an older one is not run on untrusted folders."""
_ENVIRONMENT_DROPPED = (
    "GIT_EXTERNAL_DIFF",
    "GIT_PAGER",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_CONFIG_PARAMETERS",
)


@dataclass
class GitResult:
    code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.code == 0

    def first_error_line(self) -> str:
        text = self.stderr.strip() or f"git exited with {self.code}"
        return text.splitlines()[0][:300]


class Git:
    """git commands in one directory, hardened unless the folder is trusted."""

    def __init__(self, cwd: str, *, trusted: bool = False) -> None:
        self.cwd = cwd
        self.trusted = trusted
        self._env: dict[str, str] | None = None

    def trust(self, trusted: bool) -> None:
        """Decided once the repository's root is known (it must be in a trusted folder)."""
        if trusted != self.trusted:
            self.trusted, self._env = trusted, None

    def run(self, *args: str) -> GitResult:
        """`git args…` in `cwd`; a timeout or a missing git is a failed result, not a raise."""
        return self.run_all(args)[0]

    def run_all(self, *commands: tuple[str, ...]) -> list[GitResult]:
        """Several git commands at once (they only read), each answer in order; together
        they take about as long as the slowest instead of the sum."""
        if not self.trusted and _version() < HARDENING_VERSION:
            refused = GitResult(-1, "", "git is older than 2.31: not run on an untrusted folder")
            return [refused for _ in commands]
        env = self.environment()
        started: list[subprocess.Popen[bytes] | GitResult] = []
        for args in commands:
            try:
                started.append(
                    subprocess.Popen(
                        ["git", "--no-pager", *args],
                        cwd=self.cwd,
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                    )
                )
            except OSError as exc:
                started.append(GitResult(-1, "", f"cannot run git: {exc.strerror}"))
        deadline = time.monotonic() + GIT_TIMEOUT
        return [
            process if isinstance(process, GitResult) else _finish(process, args, deadline)
            for process, args in zip(started, commands, strict=True)
        ]

    def environment(self) -> dict[str, str]:
        if self._env is None:
            base = {k: v for k, v in child_environment().items() if k not in _ENVIRONMENT_DROPPED}
            base.update(GIT_OPTIONAL_LOCKS="0", GIT_TERMINAL_PROMPT="0", GIT_NO_LAZY_FETCH="1")
            if self.trusted:
                self._env = base
            else:
                # The filter drivers are listed by a git that already has the fixed overrides.
                self._env = _with_overrides(base, UNTRUSTED_OVERRIDES)
                self._env = _with_overrides(base, UNTRUSTED_OVERRIDES + self._emptied_filters())
        return self._env

    def _emptied_filters(self) -> tuple[tuple[str, str], ...]:
        """`filter.<driver>.clean|smudge|process` set to empty for every driver any config
        file defines (an empty command is no filter at all), and `required` to false (so
        status reports the file instead of failing). Reading config runs nothing."""
        listed = self.run("config", "-z", "--get-regexp", r"^filter\.")
        drivers = set()
        for entry in listed.stdout.split("\0") if listed.ok else []:
            key = entry.split("\n", 1)[0]
            section, _, rest = key.partition(".")
            driver, _, _ = rest.rpartition(".")
            if section.lower() == "filter" and driver:
                drivers.add(driver)
        return tuple(
            (f"filter.{driver}.{key}", value)
            for driver in sorted(drivers)
            for key, value in _FILTER_KEYS
        )


def _finish(process: subprocess.Popen[bytes], args: tuple[str, ...], deadline: float) -> GitResult:
    try:
        stdout, stderr = process.communicate(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return GitResult(-1, "", f"git {args[0]} did not answer within {GIT_TIMEOUT:g} s")
    return GitResult(
        process.returncode,
        stdout.decode("utf-8", errors="replace"),
        stderr.decode("utf-8", errors="replace"),
    )


@functools.cache
def _version() -> tuple[int, ...]:
    try:
        out = subprocess.run(
            ["git", "version"], capture_output=True, timeout=GIT_TIMEOUT, check=True
        ).stdout.decode()
    except (OSError, subprocess.SubprocessError):
        return (0,)
    numbers = out.split()[2].split(".")[:2] if len(out.split()) > 2 else []
    return tuple(int(n) for n in numbers if n.isdigit()) or (0,)


def _with_overrides(base: dict[str, str], overrides: tuple[tuple[str, str], ...]) -> dict[str, str]:
    env = {k: v for k, v in base.items() if not k.startswith(_OVERRIDE_PREFIXES)}
    env["GIT_CONFIG_COUNT"] = str(len(overrides))
    for number, (key, value) in enumerate(overrides):
        env[f"GIT_CONFIG_KEY_{number}"] = key
        env[f"GIT_CONFIG_VALUE_{number}"] = value
    return env
