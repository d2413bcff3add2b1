-- sessiond on PostgreSQL, schema 1: threads, their items, snapshots, blobs, lock holders.
-- Applied by sessiond itself on first use (restore/stores/migrations.py), in one transaction.

-- One row per thread: the listing row (kept current in the same transaction as the items
-- it summarizes) plus the repository the thread is bound to.
CREATE TABLE sessiond_threads (
    thread_id uuid PRIMARY KEY,
    archived boolean NOT NULL DEFAULT false,
    title text,
    preview text NOT NULL DEFAULT '',
    cwd text,
    workspace_folder text,
    branch text,
    head_sha text,
    repo_id text,                   -- root commit and origin URL (restore/environment.py)
    repo_path text,                 -- cwd relative to the repository root ('' at the root)
    created_at text,
    updated_at text NOT NULL DEFAULT '',
    item_count integer NOT NULL DEFAULT 0,
    forked_from jsonb,
    cost_usd double precision NOT NULL DEFAULT 0,
    origin jsonb,
    last_seq bigint NOT NULL DEFAULT 0,
    latest_session_id text
);
CREATE INDEX sessiond_threads_by_recency
    ON sessiond_threads (archived, updated_at DESC, thread_id DESC);
CREATE INDEX sessiond_threads_by_cwd
    ON sessiond_threads (cwd COLLATE "C", archived, updated_at DESC, thread_id DESC);
CREATE INDEX sessiond_threads_by_repo
    ON sessiond_threads (repo_id, archived, updated_at DESC, thread_id DESC);

-- The records, exactly as the JSONL lines of the embedded store (without the newline):
-- seq per thread and item-id idempotency are constraints, not conventions.
CREATE TABLE sessiond_items (
    thread_id uuid NOT NULL REFERENCES sessiond_threads ON DELETE CASCADE,
    seq bigint NOT NULL CHECK (seq > 0),
    item_id text NOT NULL,
    line text NOT NULL,
    PRIMARY KEY (thread_id, seq),
    UNIQUE (thread_id, item_id)
);

-- Derived and deletable, as on disk: a bad or missing snapshot means a full replay.
CREATE TABLE sessiond_snapshots (
    thread_id uuid PRIMARY KEY REFERENCES sessiond_threads ON DELETE CASCADE,
    body bytea NOT NULL
);

CREATE TABLE sessiond_blobs (
    sha256 text PRIMARY KEY CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    data bytea NOT NULL
);

-- Who holds a thread's advisory lock, for other machines' ThreadBusy errors. A row is
-- trusted only while its backend still holds the lock (checked against pg_locks).
CREATE TABLE sessiond_holders (
    thread_id uuid PRIMARY KEY,
    holder text NOT NULL,
    backend_pid integer NOT NULL
);
