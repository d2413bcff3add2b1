-- sessiond on PostgreSQL, schema 2: who may see what, enforced by PostgreSQL itself.
--
-- Every thread records the database role that created it (`owner_role`, the role in
-- effect: `current_user`). Row-level security then decides, for every role that is not a
-- superuser or BYPASSRLS (FORCE: the tables' owner is held to it too), by the one row
-- `visibility` of `sessiond_settings`:
--   'team' (the default): every role reads every thread; only its owner writes to it,
--                         retitles, archives or deletes it;
--   'private':            a role sees only its own threads, their items and snapshots,
--                         and its own blobs.
-- Choose with, as the tables' owner (everyday roles only read this table):
--   UPDATE sessiond_settings SET value = 'private' WHERE name = 'visibility';
-- Threads and blobs stored before this migration have no owner (NULL, '') and stay
-- readable and writable by every role; give a thread one with
--   UPDATE sessiond_threads SET owner_role = 'ana' WHERE thread_id = '…';
-- The policies name tables and `current_user` directly (no function whose body a role's
-- search_path could redirect).

CREATE TABLE sessiond_settings (
    name text PRIMARY KEY,
    value text NOT NULL,
    CHECK (name <> 'visibility' OR value IN ('team', 'private'))
);
INSERT INTO sessiond_settings (name, value) VALUES ('visibility', 'team');

ALTER TABLE sessiond_threads ADD COLUMN owner_role text;
ALTER TABLE sessiond_threads ALTER COLUMN owner_role SET DEFAULT current_user;

-- Blobs are content-addressed per owner: a private role's file contents stay its own, and
-- two roles storing the same bytes each keep a row.
ALTER TABLE sessiond_blobs ADD COLUMN owner_role text NOT NULL DEFAULT '';
ALTER TABLE sessiond_blobs ALTER COLUMN owner_role SET DEFAULT current_user;
ALTER TABLE sessiond_blobs DROP CONSTRAINT sessiond_blobs_pkey;
ALTER TABLE sessiond_blobs ADD PRIMARY KEY (sha256, owner_role);

ALTER TABLE sessiond_threads ENABLE ROW LEVEL SECURITY;
ALTER TABLE sessiond_threads FORCE ROW LEVEL SECURITY;
CREATE POLICY sessiond_read ON sessiond_threads FOR SELECT USING (
    owner_role IS NULL OR owner_role = current_user
    OR NOT EXISTS (SELECT 1 FROM sessiond_settings s
                   WHERE s.name = 'visibility' AND s.value = 'private')
);
CREATE POLICY sessiond_write ON sessiond_threads FOR ALL
    USING (owner_role IS NULL OR owner_role = current_user)
    WITH CHECK (owner_role IS NULL OR owner_role = current_user);

-- Items and snapshots belong to their thread: seen where it is seen (the subquery is
-- itself held to the thread's policies), written where it may be written.
ALTER TABLE sessiond_items ENABLE ROW LEVEL SECURITY;
ALTER TABLE sessiond_items FORCE ROW LEVEL SECURITY;
CREATE POLICY sessiond_read ON sessiond_items FOR SELECT USING (
    EXISTS (SELECT 1 FROM sessiond_threads t WHERE t.thread_id = sessiond_items.thread_id)
);
CREATE POLICY sessiond_write ON sessiond_items FOR ALL
    USING (EXISTS (SELECT 1 FROM sessiond_threads t WHERE t.thread_id = sessiond_items.thread_id
                   AND (t.owner_role IS NULL OR t.owner_role = current_user)))
    WITH CHECK (EXISTS (SELECT 1 FROM sessiond_threads t
                        WHERE t.thread_id = sessiond_items.thread_id
                        AND (t.owner_role IS NULL OR t.owner_role = current_user)));

ALTER TABLE sessiond_snapshots ENABLE ROW LEVEL SECURITY;
ALTER TABLE sessiond_snapshots FORCE ROW LEVEL SECURITY;
CREATE POLICY sessiond_read ON sessiond_snapshots FOR SELECT USING (
    EXISTS (SELECT 1 FROM sessiond_threads t WHERE t.thread_id = sessiond_snapshots.thread_id)
);
CREATE POLICY sessiond_write ON sessiond_snapshots FOR ALL
    USING (EXISTS (SELECT 1 FROM sessiond_threads t
                   WHERE t.thread_id = sessiond_snapshots.thread_id
                   AND (t.owner_role IS NULL OR t.owner_role = current_user)))
    WITH CHECK (EXISTS (SELECT 1 FROM sessiond_threads t
                        WHERE t.thread_id = sessiond_snapshots.thread_id
                        AND (t.owner_role IS NULL OR t.owner_role = current_user)));

ALTER TABLE sessiond_blobs ENABLE ROW LEVEL SECURITY;
ALTER TABLE sessiond_blobs FORCE ROW LEVEL SECURITY;
CREATE POLICY sessiond_read ON sessiond_blobs FOR SELECT USING (
    owner_role = '' OR owner_role = current_user
    OR NOT EXISTS (SELECT 1 FROM sessiond_settings s
                   WHERE s.name = 'visibility' AND s.value = 'private')
);
CREATE POLICY sessiond_write ON sessiond_blobs FOR ALL
    USING (owner_role = '' OR owner_role = current_user)
    WITH CHECK (owner_role = current_user);
