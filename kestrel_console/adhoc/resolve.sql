-- What the names of one ad-hoc query reach in the live catalog, as the session resolves them:
-- the schemas of its search path (pg_catalog, the Kestrel schema, pg_temp), or the schema a
-- name is qualified with. One row per object: kind, schema, name, signature, and for an
-- operator the schema and name of the function it runs (for a function reached through a view
-- or policy: the schema and name of that relation). Relations are followed through views
-- (their rules) and row security policies to every function, operator and relation those
-- reach; the system's own views (pg_catalog, information_schema) are the server's, not followed.
WITH RECURSIVE path AS (
    SELECT n.oid FROM pg_namespace n WHERE n.nspname = ANY (current_schemas(true))
), system AS (
    SELECT oid FROM pg_namespace WHERE nspname IN ('pg_catalog', 'information_schema')
), links AS (  -- a relation's rules and policies, each an object of pg_depend
    SELECT ev_class AS rel, 'pg_rewrite'::regclass AS classid, oid FROM pg_rewrite
    UNION ALL
    SELECT polrelid, 'pg_policy'::regclass, oid FROM pg_policy
), reached (oid) AS (
    SELECT c.oid
      FROM unnest(%(relation_schemas)s::text[], %(relation_names)s::text[]) AS w(schema_name, rel_name)
      JOIN pg_class c ON c.relname = w.rel_name
      JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE (w.schema_name IS NULL AND n.oid IN (SELECT oid FROM path)) OR n.nspname = w.schema_name
    UNION
    SELECT d.refobjid
      FROM reached r
      JOIN pg_class c ON c.oid = r.oid AND c.relnamespace NOT IN (SELECT oid FROM system)
      JOIN links l ON l.rel = r.oid
      JOIN pg_depend d ON d.classid = l.classid AND d.objid = l.oid
     WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid <> r.oid
), dependencies AS (  -- what the rules and policies of the reached relations depend on
    SELECT d.refclassid, d.refobjid, c.oid AS via
      FROM reached r
      JOIN pg_class c ON c.oid = r.oid AND c.relnamespace NOT IN (SELECT oid FROM system)
      JOIN links l ON l.rel = r.oid
      JOIN pg_depend d ON d.classid = l.classid AND d.objid = l.oid
)
SELECT 'function', n.nspname::text, p.proname::text, p.oid::regprocedure::text, NULL::text, NULL::text
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE p.proname = ANY (%(functions)s::text[]) AND n.oid IN (SELECT oid FROM path)
UNION ALL
SELECT 'operator', n.nspname, o.oprname, o.oid::regoperator::text, fn.nspname, f.proname
  FROM pg_operator o
  JOIN pg_namespace n ON n.oid = o.oprnamespace
  LEFT JOIN pg_proc f ON f.oid = o.oprcode
  LEFT JOIN pg_namespace fn ON fn.oid = f.pronamespace
 WHERE o.oprname = ANY (%(operators)s::text[]) AND n.oid IN (SELECT oid FROM path)
UNION ALL
SELECT 'type', n.nspname, t.typname, t.oid::regtype::text, NULL, NULL
  FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
 WHERE t.typname = ANY (%(types)s::text[]) AND n.oid IN (SELECT oid FROM path)
UNION ALL
SELECT 'relation', n.nspname, c.relname, c.relkind::text, NULL, NULL
  FROM reached r JOIN pg_class c ON c.oid = r.oid JOIN pg_namespace n ON n.oid = c.relnamespace
UNION ALL
SELECT 'reached function', n.nspname, p.proname, p.oid::regprocedure::text, vn.nspname, v.relname
  FROM dependencies d
  JOIN pg_proc p ON p.oid = d.refobjid
  JOIN pg_namespace n ON n.oid = p.pronamespace
  JOIN pg_class v ON v.oid = d.via JOIN pg_namespace vn ON vn.oid = v.relnamespace
 WHERE d.refclassid = 'pg_proc'::regclass
UNION ALL
SELECT 'reached function', n.nspname, p.proname, p.oid::regprocedure::text, vn.nspname, v.relname
  FROM dependencies d
  JOIN pg_operator o ON o.oid = d.refobjid
  JOIN pg_proc p ON p.oid = o.oprcode
  JOIN pg_namespace n ON n.oid = p.pronamespace
  JOIN pg_class v ON v.oid = d.via JOIN pg_namespace vn ON vn.oid = v.relnamespace
 WHERE d.refclassid = 'pg_operator'::regclass
