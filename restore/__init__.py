"""The durable state engine: threads kept in a store, resumed through the subsystems,
imported from other agents. Invariant: knows nothing of JSON-RPC or transports and never
imports `server` (tests/test_layers.py); the records a store keeps (the embedded store's
JSONL files, or PostgreSQL's rows) are the ground truth, and everything else here
(indexes, snapshots, offset maps, reports) is derived and may be thrown away and rebuilt.

home/ the data directory · ids, summary, access, faults, child_env · engine/ the
subsystems and the verdict · stores/ the store interface and its two backends ·
service/ what the server calls · sources/ ACP's records as items · agents/ one folder
per imported agent (its store, its records as items) · imports/ their sessions as
threads · render/ a thread as a document (docs/architecture.md, the code map).
"""
