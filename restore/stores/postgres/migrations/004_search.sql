-- sessiond on PostgreSQL, schema 4: full-text search over every thread's records.
--
-- What of a record is searchable, and as which role, is restore/search/text.py's rule,
-- written again here in SQL (the contract tests hold the two to each other): user and
-- assistant messages, a tool call's title and command, an edited path, a todo list's
-- texts, a thread's title; at most 100,000 characters of each. Punctuation is made blank
-- before PostgreSQL's parser sees the text, so `src/foo.py` is the words src, foo, py, as
-- SQLite's unicode61 tokenizer cuts it for the embedded store; the `simple` configuration
-- lowercases and does not stem, like unicode61.
--
-- The columns are generated: every row inserted (an append, an import, a copy) is indexed
-- in its own transaction, and the existing rows are indexed by this migration. They are
-- columns of sessiond_items, so its row-level security (migration 002) decides who finds
-- what: a private thread's records are found by no other role.
-- The functions pin their search_path (pg_catalog first, then the schema they are made
-- in): a role's own search_path cannot redirect what they call.

-- A line as jsonb, which holds no NUL: each `\u0000` escape is dropped (an escaped
-- backslash, `\\`, is matched first and kept, so `\\u0000` stays the text it is).
CREATE FUNCTION sessiond_search_json(line text) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN strpos(line, '\u0000') = 0 THEN line::jsonb
                ELSE regexp_replace(line, '(\\\\)|\\u0000', '\1', 'g')::jsonb END
$$;

CREATE FUNCTION sessiond_search_parts(item jsonb) RETURNS TABLE (n bigint, part text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT e.n, e.v #>> '{}'
    FROM jsonb_array_elements(CASE
        WHEN item->>'type' = 'message' AND item->>'role' IN ('user', 'assistant') THEN
            CASE jsonb_typeof(item->'content')
                WHEN 'string' THEN jsonb_build_array(item->'content')
                WHEN 'array' THEN (
                    SELECT coalesce(jsonb_agg(p->'text' ORDER BY k), '[]'::jsonb)
                    FROM jsonb_array_elements(item->'content') WITH ORDINALITY AS x (p, k)
                    WHERE jsonb_typeof(p) = 'object' AND p->>'type' = 'text')
                ELSE '[]'::jsonb END
        WHEN item->>'type' = 'operation' THEN jsonb_build_array(item->'title', item->'command')
        WHEN item->>'type' = 'file_edit' THEN jsonb_build_array(item->'path')
        WHEN item->>'type' = 'todos' AND jsonb_typeof(item->'items') = 'array' THEN (
            SELECT coalesce(jsonb_agg(t->'content' ORDER BY k), '[]'::jsonb)
            FROM jsonb_array_elements(item->'items') WITH ORDINALITY AS x (t, k)
            WHERE jsonb_typeof(t) = 'object')
        WHEN item->>'type' IN ('thread_title', 'session_meta') THEN jsonb_build_array(item->'title')
        ELSE '[]'::jsonb END) WITH ORDINALITY AS e (v, n)
    WHERE jsonb_typeof(e.v) = 'string' AND e.v #>> '{}' <> ''
$$;

CREATE FUNCTION sessiond_search_text(line text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN btrim(t, E' \t\n\r\f\v') = '' THEN NULL ELSE left(t, 100000) END
    FROM (SELECT string_agg(part, E'\n' ORDER BY n) AS t
          FROM sessiond_search_parts(sessiond_search_json(line))) AS s
$$;

CREATE FUNCTION sessiond_search_role(line text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN sessiond_search_text(line) IS NULL THEN NULL
                WHEN j->>'type' = 'message' THEN j->>'role'
                WHEN j->>'type' = 'operation' THEN 'tool'
                WHEN j->>'type' = 'file_edit' THEN 'edit'
                WHEN j->>'type' = 'todos' THEN 'todo'
                ELSE 'title' END
    FROM (SELECT sessiond_search_json(line) AS j) AS s
$$;

CREATE FUNCTION sessiond_search_vector(line text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT to_tsvector('pg_catalog.simple'::regconfig,
                       translate(sessiond_search_text(line),
                                 '!"#$%&''()*+,-./:;<=>?@[\]^_`{|}~',
                                 '                                '))
$$;

DO $$
DECLARE
    name text;
BEGIN
    FOREACH name IN ARRAY ARRAY['sessiond_search_json(text)', 'sessiond_search_parts(jsonb)',
                                'sessiond_search_text(text)', 'sessiond_search_role(text)',
                                'sessiond_search_vector(text)']
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                       name, current_schema());
    END LOOP;
END
$$;

ALTER TABLE sessiond_items
    ADD COLUMN search_role text GENERATED ALWAYS AS (sessiond_search_role(line)) STORED,
    ADD COLUMN search_ts text GENERATED ALWAYS AS (sessiond_search_json(line)->>'ts') STORED,
    ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (sessiond_search_vector(line)) STORED;
CREATE INDEX sessiond_items_search ON sessiond_items USING gin (search_vector)
    WHERE search_vector IS NOT NULL;
