"""Where a commit's notifications go: channel `sessiond` under `team` (every role reads
every thread, so every role may hear of each), the writer role's own channel under
`private`.

LISTEN needs no privilege, so a channel hides what it carries only while no other role
can name it: each role's is named by random bits in a row only that role reads
(migration 006), and the choice is made by the database at each notification, from the
`visibility` setting as it is then (an administrator may switch it while sessiond runs).
A listener listens on both channels, so either setting reaches it.
"""

from __future__ import annotations

import logging

import psycopg
from psycopg import sql

logger = logging.getLogger("sessiond.postgres")

TEAM_CHANNEL = "sessiond"
NOTIFY = (
    "SELECT pg_notify(c.name, %s) FROM (SELECT CASE WHEN EXISTS (SELECT 1 FROM "
    "sessiond_settings s WHERE s.name = 'visibility' AND s.value = 'private') "
    f"THEN %s ELSE '{TEAM_CHANNEL}' END AS name) AS c WHERE c.name IS NOT NULL"
)
"""Parameters: the payload, then the role's own channel. Without one (None) nothing is
notified under `private`: never the team channel in its place."""


def own_channel(conn: psycopg.Connection) -> str | None:
    """This role's channel, its row made on first use (None, logged, where this role may
    not read or make it: then it hears and sends nothing under `private`)."""
    mine = "SELECT channel FROM sessiond_channels WHERE owner_role = current_user"
    try:
        found = conn.execute(mine).fetchone()
        if found is None:
            conn.execute("INSERT INTO sessiond_channels DEFAULT VALUES ON CONFLICT DO NOTHING")
            found = conn.execute(mine).fetchone()
    except psycopg.errors.InsufficientPrivilege as exc:
        logger.warning("no channel of this role's own (nothing notified under private): %s", exc)
        return None
    return None if found is None else str(found[0])


def listen(conn: psycopg.Connection, own: str | None) -> None:
    """LISTEN on the team channel and on the role's own, in one statement (both at once)."""
    names = [TEAM_CHANNEL] if own is None else [TEAM_CHANNEL, own]
    conn.execute(sql.SQL("; ").join(sql.SQL("LISTEN {}").format(sql.Identifier(n)) for n in names))
