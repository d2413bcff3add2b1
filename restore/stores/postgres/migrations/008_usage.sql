-- sessiond on PostgreSQL, schema 8: what each model call used, for `sessiond usage`.
--
-- A `cost` item's tokens and price, as restore/summary.py `usage_row` reads them (the
-- contract tests hold the two to each other), in a generated column of its row: every
-- item inserted (a record, an import, a copy) carries it from its own transaction, the
-- existing rows gain it here, and a usage report sums these columns without reading a
-- record again. `ms` is the call's time (epoch milliseconds, from the envelope's `ts`);
-- `input` fresh input (neither read from nor written to a cache); a model the price list
-- does not know has `priced` false and no USD. Only lines that hold `"type":"cost"` are
-- parsed (the stored line is compact JSON: a message quoting that text escapes its
-- quotes). Row-level security is the items' own (migration 002): a role sums only the
-- calls of threads it may read.

CREATE FUNCTION sessiond_usage_count(value jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN jsonb_typeof(value) = 'number' AND (value #>> '{}')::numeric > 0
                THEN trunc((value #>> '{}')::numeric)::bigint ELSE 0 END
$$;

-- The envelope's ts is ISO 8601 with its offset (restore/clock.py), so the result does
-- not depend on the session's DateStyle or TimeZone: immutable as used here.
CREATE FUNCTION sessiond_usage_of(line text) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN strpos(line, '"type":"cost"') = 0 THEN NULL ELSE (
        SELECT CASE
            WHEN j->>'type' = 'cost' AND jsonb_typeof(j->'seq') = 'number'
                 AND j->>'ts' ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$'
            THEN jsonb_build_object(
                'ms', floor(extract(epoch FROM (j->>'ts')::timestamptz) * 1000)::bigint,
                'model', coalesce(nullif(j->>'model', ''), 'unknown'),
                'input', greatest(0, sessiond_usage_count(j->'inputTokens')
                                     - sessiond_usage_count(j->'cacheReadTokens')
                                     - sessiond_usage_count(j->'cacheWriteTokens')),
                'output', sessiond_usage_count(j->'outputTokens'),
                'read', sessiond_usage_count(j->'cacheReadTokens'),
                'write', sessiond_usage_count(j->'cacheWriteTokens'),
                'usd', CASE WHEN j->'priced' = 'false'::jsonb OR jsonb_typeof(j->'usd') <> 'number'
                            THEN 0 ELSE (j->>'usd')::double precision END,
                'priced', j->'priced' IS DISTINCT FROM 'false'::jsonb)
            END
        FROM (SELECT sessiond_search_json(line) AS j) AS s) END
$$;

DO $$
DECLARE
    name text;
BEGIN
    FOREACH name IN ARRAY ARRAY['sessiond_usage_count(jsonb)', 'sessiond_usage_of(text)']
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = pg_catalog, %I, pg_temp',
                       name, current_schema());
    END LOOP;
END
$$;

ALTER TABLE sessiond_items
    ADD COLUMN usage jsonb GENERATED ALWAYS AS (sessiond_usage_of(line)) STORED;
CREATE INDEX sessiond_items_usage ON sessiond_items (((usage->>'ms')::bigint))
    WHERE usage IS NOT NULL;
