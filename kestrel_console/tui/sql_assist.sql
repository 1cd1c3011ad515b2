-- name: schema_names
-- The tables and views a query of the SQL screen names (the search_path is the Kestrel
-- schema), not the history's partitions, with their columns in order.
SELECT c.relname AS table_name, a.attname AS column_name
  FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace
  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
 WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'p', 'v', 'm') AND NOT c.relispartition
 ORDER BY c.relname, a.attnum;
