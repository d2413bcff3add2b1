"""Fixtures: a data dir per test, real server processes, real git repos."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.rpc_client import ServerProcess
from tests.ws_client import WsServerProcess


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def spawn(home: Path) -> Iterator[Callable[..., ServerProcess]]:
    """Start servers on the test's data dir; every one is killed at the end."""
    started: list[ServerProcess] = []

    def start(**kwargs: object) -> ServerProcess:
        server = ServerProcess(home, **kwargs)  # type: ignore[arg-type]
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


@pytest.fixture
def server(spawn: Callable[..., ServerProcess]) -> ServerProcess:
    """An initialized server."""
    process = spawn()
    process.initialize()
    return process


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def make_repo(tmp_path: Path) -> Callable[[str, str], Path]:
    """A real git repo with one commit on `branch`."""

    def make(name: str, branch: str = "main") -> Path:
        repo = tmp_path / name
        repo.mkdir()
        git(repo, "init", "-q", "-b", branch)
        git(repo, "config", "user.email", "t@example.invalid")
        git(repo, "config", "user.name", "t")
        (repo / "README").write_text(name)
        git(repo, "add", ".")
        git(repo, "commit", "-q", "-m", "init")
        return repo

    return make


@pytest.fixture
def ws_server(home: Path) -> Iterator[Callable[..., WsServerProcess]]:
    """Start `sessiond serve --ws 0` servers on the test's data dir; killed at the end."""
    started: list[WsServerProcess] = []

    def start(
        *args: str, durability: str = "none", env: dict[str, str] | None = None
    ) -> WsServerProcess:
        server = WsServerProcess(home, *args, durability=durability, env=env)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()
