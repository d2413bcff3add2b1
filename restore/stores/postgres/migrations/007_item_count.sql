-- sessiond on PostgreSQL, schema 7: `item_count` counts the conversation alone.
--
-- One definition of a thread's item count everywhere (restore/summary.py
-- CONVERSATION_TYPES: what clients record, `message` to `verifier`); before this version
-- an import's `cost_reported` records were counted too. Every row is recounted from its
-- items, whoever owns it: row-level security is lifted for this transaction alone (the
-- tables' owner applies migrations; ALTER TABLE is transactional, so it is back in force
-- at COMMIT, or never lifted if anything fails). Each line starts with the store's
-- envelope (`{"v":1,"seq":N,"ts":"…","type":"…"`), so its first `"type"` is the item's.

ALTER TABLE sessiond_threads NO FORCE ROW LEVEL SECURITY;
ALTER TABLE sessiond_items NO FORCE ROW LEVEL SECURITY;
UPDATE sessiond_threads AS t SET item_count = (
    SELECT count(*) FROM sessiond_items AS i
    WHERE i.thread_id = t.thread_id
      AND substring(i.line FROM '"type":"([a-z_]+)"') IN (
          'message', 'turn', 'operation', 'cost', 'todos', 'file_edit', 'model_override',
          'permissions', 'prompt_section', 'verifier')
);
ALTER TABLE sessiond_threads FORCE ROW LEVEL SECURITY;
ALTER TABLE sessiond_items FORCE ROW LEVEL SECURITY;
