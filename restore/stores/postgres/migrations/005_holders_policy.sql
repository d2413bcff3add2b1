-- sessiond on PostgreSQL, schema 5: who holds a thread, held to the threads' policies.
--
-- `sessiond_holders` names the client holding a thread's lock (client name, pid, host) for
-- another machine's ThreadBusy. Before this version every role read every row (under
-- `private` too: another role's thread ids and machines) and could rename or remove any.
-- Now a row is the role's that wrote it (`owner_role`): it is read where its thread is
-- read, and written only by its own role, for a thread that role may write. One row per
-- thread and role, so a role never needs to overwrite another's (a thread stored before
-- schema 2 has no owner and may be held by any role). The rows are names of live locks
-- only (the advisory lock is the lock): those of this moment are dropped, not migrated;
-- each holder names itself again at its next open.

DELETE FROM sessiond_holders;
ALTER TABLE sessiond_holders ADD COLUMN owner_role text NOT NULL DEFAULT current_user;
ALTER TABLE sessiond_holders DROP CONSTRAINT sessiond_holders_pkey;
ALTER TABLE sessiond_holders ADD PRIMARY KEY (thread_id, owner_role);

ALTER TABLE sessiond_holders ENABLE ROW LEVEL SECURITY;
ALTER TABLE sessiond_holders FORCE ROW LEVEL SECURITY;
CREATE POLICY sessiond_read ON sessiond_holders FOR SELECT USING (
    EXISTS (SELECT 1 FROM sessiond_threads t WHERE t.thread_id = sessiond_holders.thread_id)
);
CREATE POLICY sessiond_write ON sessiond_holders FOR ALL
    USING (owner_role = current_user)
    WITH CHECK (owner_role = current_user
                AND EXISTS (SELECT 1 FROM sessiond_threads t
                            WHERE t.thread_id = sessiond_holders.thread_id
                            AND (t.owner_role IS NULL OR t.owner_role = current_user)));
