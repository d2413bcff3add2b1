-- sessiond on PostgreSQL, schema 3: sub-agent threads under their parent.
-- A child names the thread whose tool call started it (and that call); listings show
-- top-level threads (parent_thread_id IS NULL) or one thread's children, and count them.
-- Existing rows are top-level threads: nothing to backfill (a database holds no
-- sub-agent thread before this version).

ALTER TABLE sessiond_threads ADD COLUMN parent_thread_id uuid;
ALTER TABLE sessiond_threads ADD COLUMN parent_operation_id text;
CREATE INDEX sessiond_threads_by_parent
    ON sessiond_threads (parent_thread_id, archived, updated_at DESC, thread_id DESC);
