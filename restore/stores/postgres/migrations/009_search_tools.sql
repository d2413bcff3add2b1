-- sessiond on PostgreSQL, schema 9: what a tool did is searchable too.
--
-- Migration 004's rule (restore/search/text.py, written again here in SQL; the contract
-- tests hold the two to each other) gains a tool call's arguments as its source recorded
-- them (`input`: an imported call's, `rawInput`: an ACP call's) and what a tool gave back:
-- a message of role `tool`, an operation's `result` and `rawOutput`, an ACP call's text
-- content. Arguments and results are any JSON: their text is their strings in the order
-- `jsonb_path_query(value, 'strict $.**')` walks them. An operation with output is a hit
-- of role `output`, a message of role `tool` too; still at most 100,000 characters a record.
-- `search_role` is now set by the record's kind even where it has no text to search (no
-- `search_vector`, so never a hit).
--
-- The search columns are made again over the new functions: every record a database holds
-- is indexed again by this migration (it rewrites sessiond_items, as 004 did).

ALTER TABLE sessiond_items DROP COLUMN search_vector, DROP COLUMN search_role;
DROP FUNCTION sessiond_search_vector(text);
DROP FUNCTION sessiond_search_role(text);
DROP FUNCTION sessiond_search_text(text);
DROP FUNCTION sessiond_search_parts(jsonb);

-- The strings of a JSON value, depth first (an object's members in jsonb's key order).
CREATE FUNCTION sessiond_search_strings(value jsonb) RETURNS TABLE (k bigint, part text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT x.k, x.v #>> '{}'
    FROM jsonb_path_query(coalesce(value, 'null'::jsonb), 'strict $.**', '{}', true)
         WITH ORDINALITY AS x (v, k)
    WHERE jsonb_typeof(x.v) = 'string'
$$;

-- The record's searchable parts in order: group 0 as in migration 004 (a message's text, a
-- tool call's title and command, an edited path, todos, a title), 1-2 a call's arguments,
-- 3-5 its output (`output` when any is there).
CREATE FUNCTION sessiond_search_parts(item jsonb) RETURNS TABLE (g int, k bigint, part text)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p.g, p.k, p.part FROM (
        SELECT 0 AS g, e.n AS k, e.v #>> '{}' AS part
        FROM jsonb_array_elements(CASE
            WHEN item->>'type' = 'message' AND item->>'role' IN ('user', 'assistant', 'tool')
            THEN CASE jsonb_typeof(item->'content')
                WHEN 'string' THEN jsonb_build_array(item->'content')
                WHEN 'array' THEN (
                    SELECT coalesce(jsonb_agg(p->'text' ORDER BY k), '[]'::jsonb)
                    FROM jsonb_array_elements(item->'content') WITH ORDINALITY AS x (p, k)
                    WHERE jsonb_typeof(p) = 'object' AND p->>'type' = 'text')
                ELSE '[]'::jsonb END
            WHEN item->>'type' = 'operation'
            THEN jsonb_build_array(item->'title', item->'command')
            WHEN item->>'type' = 'file_edit' THEN jsonb_build_array(item->'path')
            WHEN item->>'type' = 'todos' AND jsonb_typeof(item->'items') = 'array' THEN (
                SELECT coalesce(jsonb_agg(t->'content' ORDER BY k), '[]'::jsonb)
                FROM jsonb_array_elements(item->'items') WITH ORDINALITY AS x (t, k)
                WHERE jsonb_typeof(t) = 'object')
            WHEN item->>'type' IN ('thread_title', 'session_meta')
            THEN jsonb_build_array(item->'title')
            ELSE '[]'::jsonb END) WITH ORDINALITY AS e (v, n)
        WHERE jsonb_typeof(e.v) = 'string'
        UNION ALL
        SELECT f.g, s.k, s.part
        FROM (VALUES (1, 'input'), (2, 'rawInput'), (3, 'result'), (4, 'rawOutput')) AS f (g, name)
        CROSS JOIN LATERAL sessiond_search_strings(item->f.name) AS s
        WHERE item->>'type' = 'operation'
        UNION ALL
        SELECT 5, x.k, x.c->'content'->>'text'
        FROM jsonb_array_elements(CASE WHEN item->>'type' = 'operation'
                                        AND jsonb_typeof(item->'content') = 'array'
                                       THEN item->'content' ELSE '[]'::jsonb END)
             WITH ORDINALITY AS x (c, k)
        WHERE jsonb_typeof(x.c) = 'object' AND x.c->>'type' = 'content'
          AND jsonb_typeof(x.c->'content') = 'object' AND x.c->'content'->>'type' = 'text'
          AND jsonb_typeof(x.c->'content'->'text') = 'string'
    ) AS p
    WHERE p.part <> ''
$$;

CREATE FUNCTION sessiond_search_text(line text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN (SELECT CASE WHEN btrim(t, E' \t\n\r\f\v') = '' THEN NULL ELSE left(t, 100000) END
        FROM (SELECT string_agg(part, E'\n' ORDER BY g, k) AS t
              FROM sessiond_search_parts(sessiond_search_json(line))) AS s);
END
$$;

-- The role by the record's kind alone, without its text (a record with none has no vector,
-- so it is never a hit, whatever its role): only an operation looks at its parts, and only
-- at its output's (the planner drops the other branches). A record's columns cost two
-- passes over its parts, not three.
CREATE FUNCTION sessiond_search_role(line text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN (SELECT CASE WHEN x.j->>'type' = 'message' AND x.j->>'role' = 'tool' THEN 'output'
                    WHEN x.j->>'type' = 'message' AND x.j->>'role' IN ('user', 'assistant')
                    THEN x.j->>'role'
                    WHEN x.j->>'type' = 'operation' AND EXISTS (
                        SELECT 1 FROM sessiond_search_parts(x.j) AS p WHERE p.g >= 3) THEN 'output'
                    WHEN x.j->>'type' = 'operation' THEN 'tool'
                    WHEN x.j->>'type' = 'file_edit' THEN 'edit'
                    WHEN x.j->>'type' = 'todos' THEN 'todo'
                    WHEN x.j->>'type' IN ('thread_title', 'session_meta') THEN 'title' END
        FROM (SELECT sessiond_search_json(line) AS j) AS x);
END
$$;

-- sessiond_search_text's text, computed here rather than called: a pinned function called
-- from a pinned function cost a record's vector twice the text's own work.
CREATE FUNCTION sessiond_search_vector(line text) RETURNS tsvector
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN (SELECT to_tsvector('pg_catalog.simple'::regconfig,
                           translate(left(s.t, 100000),
                                     '!"#$%&''()*+,-./:;<=>?@[\]^_`{|}~',
                                     '                                '))
        FROM (SELECT string_agg(part, E'\n' ORDER BY g, k) AS t
              FROM sessiond_search_parts(sessiond_search_json(line))) AS s
        WHERE btrim(s.t, E' \t\n\r\f\v') <> '');
END
$$;

-- The three functions the columns and the search call are PL/pgSQL: a session plans their
-- queries once and keeps the plans (a SQL function's body is planned again by every
-- statement that calls it, and sessiond inserts a record a statement: planning the rule's
-- queries cost a record more than computing them, 1.6 ms against 0.3).
-- They pin their search_path, as in 004: whatever
-- they call (the two helpers above too) resolves in pg_catalog and this schema. The helpers
-- are not pinned themselves, so PostgreSQL inlines them into their callers' queries (a
-- function with a SET clause is never inlined: called once a part, that doubled the cost
-- of a record's columns).
DO $$
DECLARE
    name text;
BEGIN
    FOREACH name IN ARRAY ARRAY['sessiond_search_text(text)', 'sessiond_search_role(text)',
                                'sessiond_search_vector(text)']
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                       name, current_schema());
    END LOOP;
END
$$;

ALTER TABLE sessiond_items
    ADD COLUMN search_role text GENERATED ALWAYS AS (sessiond_search_role(line)) STORED,
    ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (sessiond_search_vector(line)) STORED;
CREATE INDEX sessiond_items_search ON sessiond_items USING gin (search_vector)
    WHERE search_vector IS NOT NULL;
