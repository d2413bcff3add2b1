"""Fixtures: a data dir per test, real server processes, real git repos."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import disks, pg_cluster
from tests.support.leftovers import PLUGIN, Leftovers
from tests.support.rpc_client import ServerProcess
from tests.support.ws_client import WsServerProcess

BOTH_STORES = pytest.mark.parametrize("store_url", ["embedded", "postgres"], indirect=True)
"""Run a test module against both stores: `pytestmark = BOTH_STORES`."""
SHARED_STORE = pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
"""Run a test against the shared store only (what it holds exists only there)."""


def pytest_configure(config: pytest.Config) -> None:
    """Nothing a test starts outlives the run, nothing reaches past 127.0.0.1
    (tests/support/leftovers.py)."""
    config.pluginmanager.register(Leftovers(), PLUGIN)


SHARD_ENV = "SESSIOND_TEST_SHARD"
"""`postgres`: only the tests that use the run's PostgreSQL cluster; `rest`: the others.
scripts/test runs the two at once, the first in one process (some of its tests stop and
restart the cluster, which no other test's database would survive), the second on
pytest-xdist's workers."""


def uses_the_cluster(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    return "postgres" in getattr(item, "fixturenames", ()) or (
        callspec is not None and "postgres" in callspec.id
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    shard = os.environ.get(SHARD_ENV)
    if shard not in ("postgres", "rest"):
        return
    keep = [item for item in items if uses_the_cluster(item) == (shard == "postgres")]
    config.hook.pytest_deselected(items=[item for item in items if item not in keep])
    items[:] = keep


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture(scope="session")
def postgres() -> Iterator[pg_cluster.Cluster]:
    """The PostgreSQL cluster of this run: CI's (`$SESSIOND_TEST_PG`), else our own,
    started here the same way (initdb + pg_ctl, socket only) and removed at the end."""
    if root := os.environ.get(pg_cluster.ENV):
        yield pg_cluster.Cluster.load(root)
        return
    cluster = pg_cluster.create(tempfile.mkdtemp(prefix="sessiond-pg-"))
    try:
        yield cluster
    finally:
        pg_cluster.destroy(cluster.root)


@pytest.fixture
def store_url(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """The store a test's servers use: None (embedded) unless parametrized `postgres`,
    which gets a fresh database of its own, dropped afterwards."""
    if getattr(request, "param", "embedded") == "embedded":
        yield None
        return
    cluster: pg_cluster.Cluster = request.getfixturevalue("postgres")
    if not cluster.running():  # a test that stopped it failed before starting it again
        cluster.start()
    name = pg_cluster.fresh_database(cluster.url())
    try:
        yield cluster.url(name)
    finally:
        if not cluster.running():
            cluster.start()
        pg_cluster.drop_database(cluster.url(), name)


@pytest.fixture
def spawn(home: Path, store_url: str | None) -> Iterator[Callable[..., ServerProcess]]:
    """Start servers on the test's data dir (and store); every one is killed at the end."""
    started: list[ServerProcess] = []

    def start(**kwargs: object) -> ServerProcess:
        if store_url is not None:
            env = {"SESSIOND_STORE": store_url, **(kwargs.pop("env", None) or {})}  # type: ignore[dict-item]
            kwargs["env"] = env
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


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 512 KiB filesystem (tests/support/disks.py); skipped, saying why, unless root."""
    with disks.small_disk(tmp_path) as mount_point:
        yield mount_point
