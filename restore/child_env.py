"""The environment every child process gets, and the check a store URL on a command line
must pass: no credential of the store ever leaves sessiond.

sessiond may be given the shared store as `SESSIOND_STORE=postgresql://user:PW@…`, and
libpq reads `PGPASSWORD` (or the files `PGPASSFILE` / `PGSERVICEFILE` name) for the same
login. A hook, git, the ACP agent and everything they start (tool shells, MCP servers) run
with the user's rights but act on what an agent says: a prompt-injected agent that read
that login could read, rewrite and delete every thread of the team. So every child starts
from sessiond's environment without those variables (`child_environment`), and a password
on the command line, which every local user sees in `ps` and a child in
`/proc/$PPID/cmdline`, is refused (`argv_password_refusal`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import parse_qs, urlsplit

STORE_CREDENTIALS = ("SESSIOND_STORE", "PGPASSWORD", "PGPASSFILE", "PGSERVICEFILE")
"""The store URL itself (it may hold the password), libpq's password, and the files it
reads passwords from: a child's own `psql` would log in with them without asking."""


def child_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """sessiond's environment without the store's credentials, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in STORE_CREDENTIALS}
    env.update(extra or {})
    return env


def has_password(url: str) -> bool:
    """Whether a `postgresql://` URL carries a password (in its user info or its query)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ":" in url.partition("@")[0].rpartition("//")[2]
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    return ":" in userinfo or "password" in parse_qs(parts.query)


def argv_password_refusal(option: str) -> str:
    """What to say when `option` (`--store`, `--to`) was given a URL with a password."""
    return (
        f"{option} URL holds a password, which every local user sees in the process list: "
        "keep it in a password file (~/.pgpass, or the file PGPASSFILE names), in a pg "
        "service file (postgresql:///?service=NAME), or pass the whole URL in the "
        "SESSIOND_STORE environment variable instead"
    )
