"""A throwaway PostgreSQL cluster for tests, CI and benchmarks: initdb + pg_ctl, socket only.

CI (`.ci/run`) starts one and exports its directory as `SESSIOND_TEST_PG`; a developer's
`./scripts/test` has none, so the test fixture starts its own the same way. Either way the
PostgreSQL tests run, never skip. The server runs as an unprivileged user (initdb refuses
root, and CI runs as root), listens on a Unix socket in the cluster's own directory only (no
TCP port to collide with), and trusts local connections: it lives as long as one run.

    python -m tests.support.pg_cluster start DIR   # prints the admin URL
    python -m tests.support.pg_cluster stop DIR
"""

from __future__ import annotations

import glob
import json
import os
import pwd
import shutil
import subprocess
import sys
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import quote

ENV = "SESSIOND_TEST_PG"
PORT = 5432  # names the socket file only: the cluster listens on no TCP port
SUPERUSER = "sessiond"


def bindir() -> Path:
    """The newest PostgreSQL server binaries on this machine (Debian keeps them off PATH)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version_key)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb is None:
        raise RuntimeError("PostgreSQL server binaries not found: apt-get install postgresql")
    return Path(initdb).parent


def _version_key(path: str) -> int:
    part = Path(path).parent.parent.name
    return int(part) if part.isdigit() else 0


def _run_as() -> str | None:
    """The user the server runs as: ourselves, unless we are root (then `postgres`/`nobody`)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise RuntimeError("running as root and no unprivileged user to run PostgreSQL as")


@dataclass
class Cluster:
    root: str
    bindir: str
    user: str | None

    @property
    def data(self) -> Path:
        return Path(self.root) / "data"

    @property
    def socket_dir(self) -> Path:
        return Path(self.root) / "socket"

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@/{dbname}?host={quote(str(self.socket_dir), safe='')}"

    def _cmd(self, *args: str) -> list[str]:
        command = [str(Path(self.bindir) / args[0]), *args[1:]]
        if self.user is not None:
            return ["runuser", "-u", self.user, "--", *command]
        return command

    def _run(self, *args: str) -> None:
        result = subprocess.run(self._cmd(*args), capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise RuntimeError(f"{args[0]} failed: {result.stdout}{result.stderr}")

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(Path(self.root) / "server.log"),
                  "-w", "-t", "60", "start")  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def running(self) -> bool:
        result = subprocess.run(self._cmd("pg_ctl", "-D", str(self.data), "status"),
                                capture_output=True, timeout=30)  # fmt: skip
        return result.returncode == 0

    def save(self) -> None:
        (Path(self.root) / "cluster.json").write_text(json.dumps(asdict(self)))

    @classmethod
    def load(cls, root: str | Path) -> Cluster:
        return cls(**json.loads((Path(root) / "cluster.json").read_text()))


def create(root: str | Path) -> Cluster:
    """initdb a new cluster under `root` (made if missing) and start it."""
    root = Path(root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(str(root), str(bindir()), _run_as())
    cluster.socket_dir.mkdir(exist_ok=True)
    if cluster.user is not None:
        entry = pwd.getpwnam(cluster.user)
        for path in (root, cluster.socket_dir):
            os.chown(path, entry.pw_uid, entry.pw_gid)
        root.chmod(0o755)  # the test process (root) only needs to reach the socket
    cluster._run("initdb", "-D", str(cluster.data), "-U", SUPERUSER, "--auth=trust",
                 "-E", "UTF8", "--locale=C.UTF-8", "--no-instructions")  # fmt: skip
    settings = {
        "listen_addresses": "''",
        "port": str(PORT),
        "unix_socket_directories": f"'{cluster.socket_dir}'",
        "max_connections": "200",
        "shared_buffers": "128MB",
        "log_min_messages": "warning",
    }
    conf = cluster.data / "postgresql.conf"
    extra = "".join(f"{key} = {value}\n" for key, value in settings.items())
    if cluster.user is not None:
        _append_as(cluster, conf, extra)
    else:
        with conf.open("a") as handle:
            handle.write(extra)
    cluster.save()
    cluster.start()
    return cluster


def _append_as(cluster: Cluster, path: Path, text: str) -> None:
    subprocess.run(["runuser", "-u", str(cluster.user), "--", "tee", "-a", str(path)],
                   input=text.encode(), check=True, capture_output=True)  # fmt: skip


def destroy(root: str | Path) -> None:
    cluster = Cluster.load(root)
    if cluster.running():
        cluster.stop("immediate")
    shutil.rmtree(cluster.root, ignore_errors=True)


def fresh_database(admin_url: str, prefix: str = "t") -> str:
    """A new empty database on the cluster; its name."""
    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name


def drop_database(admin_url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print("usage: python -m tests.support.pg_cluster start|stop DIR", file=sys.stderr)
        return 2
    if argv[0] == "start":
        print(create(argv[1]).root)
    else:
        destroy(argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
