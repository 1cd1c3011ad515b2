-- name: resolve_names
-- What the names of one ad-hoc query reach in the live catalog, as the session resolves them:
-- the schemas of its search path (pg_catalog, the Kestrel schema, pg_temp), or the schema a
-- name is qualified with. One row per object: kind, schema, name, signature, and for an
-- operator the schema and name of the function it runs; for a view outside the system's
-- schemas its definition, and for a table its row security policies' USING expressions (both
-- as SQL text, deparsed for this search path: checked in turn like a query). The last column
-- says whether the object is built in (its oid, and its function's, below FirstNormalObjectId,
-- 16384: what initdb made; an admin's object in pg_catalog or information_schema is not). And
-- every cast that is not built in and calls a function, when the query names its source or
-- target type or the cast may apply implicitly (in a comparison, an assignment).
WITH path AS (
    SELECT n.oid FROM pg_namespace n WHERE n.nspname = ANY (current_schemas(true))
), relations AS (
    SELECT c.oid, c.relkind, c.relname, n.nspname
      FROM unnest(%(relation_schemas)s::text[], %(relation_names)s::text[]) AS w(schema_name, rel_name)
      JOIN pg_class c ON c.relname = w.rel_name
      JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE (w.schema_name IS NULL AND n.oid IN (SELECT oid FROM path)) OR n.nspname = w.schema_name
)
SELECT 'function', n.nspname::text, p.proname::text, p.oid::regprocedure::text, NULL::text, NULL::text,
       p.oid < 16384
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE p.proname = ANY (%(functions)s::text[]) AND n.oid IN (SELECT oid FROM path)
UNION ALL
SELECT 'operator', n.nspname, o.oprname, o.oid::regoperator::text, fn.nspname, f.proname,
       o.oid < 16384 AND coalesce(f.oid < 16384, true)
  FROM pg_operator o
  JOIN pg_namespace n ON n.oid = o.oprnamespace
  LEFT JOIN pg_proc f ON f.oid = o.oprcode
  LEFT JOIN pg_namespace fn ON fn.oid = f.pronamespace
 WHERE o.oprname = ANY (%(operators)s::text[]) AND n.oid IN (SELECT oid FROM path)
UNION ALL
SELECT 'type', n.nspname, t.typname, t.oid::regtype::text, NULL, NULL, t.oid < 16384
  FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
 WHERE t.typname = ANY (%(types)s::text[]) AND n.oid IN (SELECT oid FROM path)
UNION ALL
SELECT 'relation', r.nspname, r.relname, r.relkind::text,
       CASE WHEN r.relkind = 'v' AND (r.nspname NOT IN ('pg_catalog', 'information_schema') OR r.oid >= 16384)
            THEN pg_get_viewdef(r.oid) END,
       NULL, r.oid < 16384
  FROM relations r
UNION ALL
SELECT 'policy', r.nspname, r.relname, pol.polname::text, pg_get_expr(pol.polqual, pol.polrelid), NULL, false
  FROM relations r JOIN pg_policy pol ON pol.polrelid = r.oid
 WHERE (r.nspname NOT IN ('pg_catalog', 'information_schema') OR r.oid >= 16384) AND pol.polqual IS NOT NULL
UNION ALL
SELECT 'cast', fn.nspname, f.proname, format('%%s AS %%s', c.castsource::regtype, c.casttarget::regtype), NULL, NULL,
       false
  FROM pg_cast c
  JOIN pg_proc f ON f.oid = c.castfunc
  JOIN pg_namespace fn ON fn.oid = f.pronamespace
  JOIN pg_type s ON s.oid = c.castsource
  JOIN pg_type d ON d.oid = c.casttarget
 WHERE (c.oid >= 16384 OR f.oid >= 16384)
   AND (c.castcontext <> 'e' OR s.typname = ANY (%(types)s::text[]) OR d.typname = ANY (%(types)s::text[]))

-- name: policy_query
-- A table's row security policy (its USING expression, deparsed by the server) as a query the
-- guard checks like the operator's own: what reading the table runs. Never sent to the server.
SELECT ({expression});
