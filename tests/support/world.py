"""One person's sessiond, for tests that use it as a person does over weeks: a data
directory (and a PostgreSQL database, for the shared store), the agents' session stores
beside it, the servers started on it over real pipes and the `sessiond` command line run
on it, each a real process. Every process started here is ended by `close()`, and every
word a process said on stderr is kept for a look for StorageError."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support import pg_cluster
from tests.support.rpc_client import REPO, ServerProcess
from tests.support.transcripts import environment
from tests.support.wait import HANG_GUARD

CRASH_POINT = "record.before_ack"
"""Where an armed server kills itself: a record written, its answer not yet sent
(restore/faults.py)."""
FORBIDDEN = ("StorageError", "Traceback")
"""Words no process may ever say here: a store that failed a request, a bug."""


class World:
    """A data directory, its store and the processes on it."""

    def __init__(self, root: Path, cluster: pg_cluster.Cluster | None = None) -> None:
        self.root = root
        self.home = root / "home"
        self.home.mkdir(parents=True)
        self.agents = root / "agents"
        for store in ("claude/projects", "codex/sessions", "gemini/.gemini/tmp"):
            (self.agents / store).mkdir(parents=True)  # each agent installed, no session yet
        self.work = root / "work"
        self.work.mkdir()
        self.crash_dir = root / "crash"
        self.crash_dir.mkdir()
        self.cluster = cluster
        self.database: str | None = None
        self.store_url: str | None = None
        if cluster is not None:
            if not cluster.running():
                cluster.start()
            self.database = pg_cluster.fresh_database(cluster.url())
            self.store_url = cluster.url(self.database)
        self.env = {**environment(self.agents), "SESSIOND_CRASH_AT":
                    f"{CRASH_POINT}:{self.crash_dir}"}  # fmt: skip
        self.started: list[ServerProcess] = []

    # --- servers ---------------------------------------------------------------------------

    def serve(self, *, follow: bool = False) -> ServerProcess:
        """A server on the data dir (`--follow claude,codex,gemini` when `follow`),
        initialized with the work folder open."""
        env = dict(self.env)
        if self.store_url is not None:
            env["SESSIOND_STORE"] = self.store_url
        args = ["--follow", "claude,codex,gemini"] if follow else []
        server = ServerProcess(self.home, args=args, env=env)
        self.started.append(server)
        server.initialize([str(self.work)])
        return server

    def arm_crash(self, armed: bool) -> None:
        """Every server of this world dies at its next record's CRASH_POINT, or none does."""
        mark = self.crash_dir / f"{CRASH_POINT}.armed"
        if armed:
            mark.touch()
        else:
            mark.unlink(missing_ok=True)

    # --- the command line ------------------------------------------------------------------

    def cli(self, *args: str, codes: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
        """`sessiond --home H [--store URL] ARGS` as its own process; its exit code must be
        one of `codes`, and it may say nothing FORBIDDEN."""
        store = ["--store", self.store_url] if self.store_url is not None else []
        done = subprocess.run(
            [sys.executable, "-m", "server.cli", "--home", str(self.home), *store, *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            env={**os.environ, **self.env, "PYTHONPATH": str(REPO)},
            timeout=HANG_GUARD,
        )
        said = [word for word in FORBIDDEN if word in done.stderr]
        assert not said, f"`sessiond {' '.join(args)}` said {said}: {done.stderr[-4000:]}"
        assert done.returncode in codes, (
            f"`sessiond {' '.join(args)}` exited {done.returncode}: {done.stderr[-4000:]}"
        )
        return done

    # --- what every process said -----------------------------------------------------------

    def forbidden_said(self) -> list[str]:
        """Every server's stderr that holds a FORBIDDEN word, with the word's line."""
        found = []
        for server in self.started:
            for line in server.stderr_path.read_text(errors="replace").splitlines():
                if any(word in line for word in FORBIDDEN):
                    found.append(f"{server.stderr_path.name}: {line}")
        return found

    def close(self) -> None:
        """End every process (kill, wait), drop the database."""
        for server in self.started:
            server.close()
        if self.cluster is not None and self.database is not None:
            if not self.cluster.running():
                self.cluster.start()
            pg_cluster.drop_database(self.cluster.url(), self.database)
            self.database = None
