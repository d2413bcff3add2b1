"""The shared store's password never reaches a child process or a command line.

Threat: an agent (prompt-injected, or a hook or tool it runs) reading the environment it
inherited, or `/proc/$PPID/cmdline`, to get a login to the team's database. sessiond is
given the store as `SESSIOND_STORE=postgresql://user:PW@…` (and, alike, `PGPASSWORD`);
every process it starts — a hook and what the hook starts, git and what git starts, the
ACP agent, the watchdogs — must get an environment without them. A password in `--store`
(or `migrate --to`) on the command line, which every local user sees in `ps`, is refused.
The cluster trusts local connections, so the password in the URL is never checked: the
store works, and the password is only something to look for.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import git
from tests.faults.helpers import start
from tests.support import pg_cluster
from tests.support.acp_editor import fake_agent, sessiond_acp, wait_for
from tests.support.rpc_client import REPO, ServerProcess
from tests.test_hooks import Hooks, finals

pytestmark = pytest.mark.parametrize("store_url", ["postgres"], indirect=True)


def with_password(url: str, password: str) -> str:
    return url.replace(f"{pg_cluster.SUPERUSER}@", f"{pg_cluster.SUPERUSER}:{password}@", 1)


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(entry.split("=", 1) for entry in raw.decode().split("\0") if "=" in entry)


def assert_clean(environment: dict[str, str] | str, *secrets: str, who: str) -> None:
    text = (
        environment
        if isinstance(environment, str)
        else "\n".join(f"{k}={v}" for k, v in environment.items())
    )
    assert text, f"{who}: nothing was captured"
    for secret in secrets:
        assert secret not in text, f"{who} got the store's password"
    for name in ("SESSIOND_STORE=", "PGPASSWORD="):
        assert not any(line.startswith(name) for line in text.splitlines()), (who, name)


def children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def test_no_child_of_a_server_gets_the_store_password_not_a_hook_nor_git(
    home: Path, tmp_path: Path, store_url: str, make_repo: Callable[..., Path]
) -> None:
    secret, other = f"pw-{uuid.uuid4().hex}", f"pgpw-{uuid.uuid4().hex}"
    hooks = Hooks(tmp_path)
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    # The hook, and a process the hook starts, each write the environment they got.
    command = f"env > {dumps}/hook.env; sh -c 'env > {dumps}/grandchild.env'"
    hooks.write({"SessionStart": [{"hooks": [{"type": "command", "command": command}]}]})
    # A trusted repository's fsmonitor: a program git itself starts on `git status`.
    repo = make_repo("trusted")
    monitor = tmp_path / "fsmonitor.sh"
    monitor.write_text(f"#!/bin/sh\nenv > {dumps}/git.env\n")
    monitor.chmod(0o755)
    git(repo, "config", "core.fsmonitor", str(monitor))
    server = ServerProcess(
        home,
        env={
            "SESSIOND_STORE": with_password(store_url, secret),  # allowed in the environment
            "PGPASSWORD": other,
            **hooks.env,
        },
    )
    try:
        server.initialize([str(repo)], trusted=True)
        start(server, repo)  # the store works with the URL it was given
        finals(server, 1)
        wait_dumps = [dumps / name for name in ("hook.env", "grandchild.env", "git.env")]
        for path in wait_dumps:
            assert path.exists(), f"{path.name} never ran: the test could not fail"
            assert_clean(path.read_text(), secret, other, who=path.stem)
        for pid in children_of(server.proc.pid):  # the hooks' watchdog, still running
            assert_clean(environ_of(pid), secret, other, who=f"child {pid}")
    finally:
        server.close()


async def test_the_acp_agent_and_the_watchdog_get_no_store_password(
    home: Path, tmp_path: Path, store_url: str, make_repo: Callable[..., Path]
) -> None:
    secret, other = f"pw-{uuid.uuid4().hex}", f"pgpw-{uuid.uuid4().hex}"
    repo = make_repo("repo")
    state = tmp_path / "agent"
    env = {
        **os.environ,
        "SESSIOND_STORE": with_password(store_url, secret),
        "PGPASSWORD": other,
    }
    async with sessiond_acp(home, fake_agent(state), env=env) as run:
        await run.conn.new_session(cwd=str(repo))  # recorded into the store
        await wait_for(lambda: len(children_of(run.process.pid)) >= 2, "AGENT and the watchdog")
        children = children_of(run.process.pid)
        assert secret in Path(f"/proc/{run.process.pid}/environ").read_text()  # it was given
        for pid in children:
            assert_clean(environ_of(pid), secret, other, who=f"child {pid}")


def sessiond(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "server.cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        timeout=120,
    )


def test_a_password_on_the_command_line_is_refused_with_where_to_put_it(
    home: Path, tmp_path: Path, store_url: str
) -> None:
    secret = f"pw-{uuid.uuid4().hex}"
    in_userinfo = with_password(store_url, secret)
    in_query = f"{store_url}&password={secret}"
    for argv in (
        ["--store", in_userinfo, "list"],
        ["list", "--store", in_query],
        ["migrate", "--to", in_userinfo],
        ["acp", "--store", in_userinfo, "--", "true"],
    ):
        refused = sessiond("--home", str(home), *argv)
        assert refused.returncode == 2, (argv, refused.stderr)
        [line] = refused.stderr.splitlines()
        assert secret not in refused.stderr + refused.stdout
        for pointer in ("PGPASSFILE", "service", "SESSIOND_STORE"):
            assert pointer in line, line
    # The same URL in the environment is fine, and so is a URL without a password.
    allowed = sessiond("--home", str(home), "list", env={"SESSIOND_STORE": in_userinfo})
    assert allowed.returncode == 0, allowed.stderr
    assert sessiond("--home", str(home), "--store", store_url, "list").returncode == 0
