-- sessiond on PostgreSQL, schema 11: "blank" means what restore/search/text.py means by it.
--
-- A record whose searchable text is blank has none (no vector: never a hit). Migration 009
-- trimmed E' \t\n\r\f\v' to tell, but PostgreSQL's escape strings know no `\v`: it was the
-- letter v, so a tool call whose only text was "v" (or "vv") was never found here while
-- the embedded store found it, and one whose text was a vertical tab had an empty vector.
-- Both stores now call blank the six ASCII spaces: space, tab, newline, carriage return,
-- form feed, vertical tab (chr(11)); restore/search/text.py's `BLANK`, held to this by the
-- contract tests (tests/test_search_text.py, over random arguments too).
--
-- The two functions are replaced (their bodies alone change), and the records a database
-- holds that had no vector get one where they now have text.

CREATE OR REPLACE FUNCTION sessiond_search_text(line text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN (SELECT CASE WHEN btrim(t, E' \t\n\r\f\x0b') = '' THEN NULL ELSE left(t, 100000) END
        FROM (SELECT string_agg(part, E'\n' ORDER BY g, k) AS t
              FROM sessiond_search_parts(sessiond_search_json(line))) AS s);
END
$$;

CREATE OR REPLACE FUNCTION sessiond_search_vector(line text) RETURNS tsvector
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN (SELECT to_tsvector('pg_catalog.simple'::regconfig,
                           translate(left(s.t, 100000),
                                     '!"#$%&''()*+,-./:;<=>?@[\]^_`{|}~',
                                     '                                '))
        FROM (SELECT string_agg(part, E'\n' ORDER BY g, k) AS t
              FROM sessiond_search_parts(sessiond_search_json(line))) AS s
        WHERE btrim(s.t, E' \t\n\r\f\x0b') <> '');
END
$$;

-- Pinned again, as in 009 (a replaced function keeps only the settings it is given).
DO $$
DECLARE
    name text;
BEGIN
    FOREACH name IN ARRAY ARRAY['sessiond_search_text(text)', 'sessiond_search_vector(text)']
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                       name, current_schema());
    END LOOP;
END
$$;

-- Every role's records: the owner that migrates is held to the row-level policies too
-- (FORCE, migration 002), which would show it none of theirs; lifted for this statement
-- alone, in the migration's transaction.
ALTER TABLE sessiond_items NO FORCE ROW LEVEL SECURITY;
UPDATE sessiond_items SET search_vector = sessiond_search_vector(line)
WHERE search_vector IS NULL AND search_role IS NOT NULL;
ALTER TABLE sessiond_items FORCE ROW LEVEL SECURITY;
