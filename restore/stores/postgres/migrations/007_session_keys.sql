-- sessiond on PostgreSQL, schema 7: session keys and the threads a reset links.
-- A thread may belong to a session key (`thread/start {sessionKey}`, `thread/continue`);
-- a reset starts a thread that names the one it replaces (`previous_thread_id`, with why:
-- `reset_reason`), and the replaced one names it back once its `thread_successor` item is
-- written (`next_thread_id`). A key's current thread is found in
-- `sessiond_threads_by_key`, and who replaced whom in `sessiond_threads_by_previous`;
-- both hold keyed threads only. Existing rows have no key: nothing to backfill (no
-- thread had one before this version). Row-level security is the table's, unchanged: a
-- role finds a key's threads where it may read them (under `private`: its own).

ALTER TABLE sessiond_threads ADD COLUMN session_key text;
ALTER TABLE sessiond_threads ADD COLUMN previous_thread_id uuid;
ALTER TABLE sessiond_threads ADD COLUMN next_thread_id uuid;
ALTER TABLE sessiond_threads ADD COLUMN reset_reason text;
CREATE INDEX sessiond_threads_by_key
    ON sessiond_threads (session_key COLLATE "C", archived, updated_at DESC, thread_id DESC)
    WHERE session_key IS NOT NULL;
CREATE INDEX sessiond_threads_by_previous
    ON sessiond_threads (previous_thread_id)
    WHERE previous_thread_id IS NOT NULL;
