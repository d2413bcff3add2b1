-- sessiond on PostgreSQL, schema 6: under `private`, a thread's notifications reach only
-- its own role.
--
-- LISTEN needs no privilege: any login to the database may listen on any channel it can
-- name. Before this version every commit notified channel `sessiond` with the thread's
-- id and event, so under `private` any role learnt every other role's thread ids and when
-- each was started, written, deleted. Now each role has a channel of its own, named by
-- 122 random bits (gen_random_uuid: PostgreSQL's strong random source), kept in a row
-- only that role reads; under `private` a commit notifies the writer's own channel
-- (restore/stores/postgres/channels.py), which no other role can name. Under `team`
-- (every role reads every thread) notifications stay on `sessiond`.
--
-- Each role makes its row itself, at its first connection (so no one has to grant
-- anything for it: SELECT, INSERT and DELETE go to PUBLIC, the policy keeps a role to
-- its own one row, even the tables' owner (FORCE), and the CHECK keeps every name of one
-- shape: never `sessiond`, nothing to quote). A name a role gave away is replaced by that
-- role deleting its row (`DELETE FROM sessiond_channels`) and restarting its sessiond
-- processes: the first to connect makes a new one.

CREATE TABLE sessiond_channels (
    owner_role text PRIMARY KEY DEFAULT current_user,
    channel text NOT NULL
        DEFAULT 'sessiond_' || replace(gen_random_uuid()::text, '-', '')
        CHECK (channel ~ '^sessiond_[0-9a-f]{32}$')
);

ALTER TABLE sessiond_channels ENABLE ROW LEVEL SECURITY;
ALTER TABLE sessiond_channels FORCE ROW LEVEL SECURITY;
CREATE POLICY sessiond_own ON sessiond_channels FOR ALL
    USING (owner_role = current_user)
    WITH CHECK (owner_role = current_user);
GRANT SELECT, INSERT, DELETE ON sessiond_channels TO PUBLIC;
