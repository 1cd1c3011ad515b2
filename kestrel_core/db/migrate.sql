-- db/migrate.py: Versioned schema migrations, and the schema's functions kept as code.

-- name: create_schema
CREATE SCHEMA IF NOT EXISTS {schema};

-- name: schema_fitness
-- Whether a schema is Kestrel's to use: none, or one only its owner may create
-- objects in, holding Kestrel's objects or nothing. Kestrel's SECURITY DEFINER functions resolve
-- names in it, and its grants must never reach other applications' objects ('public').
SELECT to_regclass(format('%%I.schema_migrations', n.nspname)) IS NOT NULL AS kestrel,
       ARRAY(SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee) END
               FROM aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner))) a
              WHERE a.privilege_type = 'CREATE' AND a.grantee <> n.nspowner
              ORDER BY 1) AS others_create,
       (SELECT count(*) FROM pg_class c WHERE c.relnamespace = n.oid)
       + (SELECT count(*) FROM pg_proc p WHERE p.pronamespace = n.oid)
       + (SELECT count(*) FROM pg_operator o WHERE o.oprnamespace = n.oid)
       + (SELECT count(*) FROM pg_type t
           WHERE t.typnamespace = n.oid AND t.typrelid = 0 AND t.typcategory <> 'A') AS objects
  FROM pg_namespace n WHERE n.nspname = %s;

-- name: create_versions
CREATE TABLE IF NOT EXISTS {schema}.schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: create_functions
-- Every function text ever applied (id orders them): the latest row per name is what the
-- database holds; an older one means a newer release has been here.
CREATE TABLE IF NOT EXISTS {schema}.schema_functions (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (name, checksum)
);

-- name: lock
-- One lock for every schema in the database: migrations are rare, so no need to be finer.
SELECT pg_advisory_xact_lock(hashtext('kestrel.migrate'));

-- name: try_outside_lock
-- The outside-transaction step's own lock (session level, taken with try and polled).
SELECT pg_try_advisory_lock(hashtext('kestrel.migrate.outside'));

-- name: outside_unlock
SELECT pg_advisory_unlock(hashtext('kestrel.migrate.outside'));

-- name: applied
SELECT version FROM {schema}.schema_migrations;

-- name: is_applied
SELECT 1 FROM {schema}.schema_migrations WHERE version = %s;

-- name: record
INSERT INTO {schema}.schema_migrations (version, name) VALUES (%s, %s);

-- name: versions_exist
SELECT to_regclass(%s) IS NOT NULL;

-- name: current_version
SELECT coalesce(max(version), 0) FROM {schema}.schema_migrations;

-- name: functions_applied
SELECT name, checksum FROM {schema}.schema_functions ORDER BY id;

-- name: record_function
INSERT INTO {schema}.schema_functions (name, checksum) VALUES (%s, %s);

-- name: invalid_indexes
-- A partitioned index ('I') stays invalid until every partition's index is attached: an
-- interrupted build of one is resumed, not dropped (DROP INDEX CONCURRENTLY refuses it).
SELECT c.relname FROM pg_index i
  JOIN pg_class c ON c.oid = i.indexrelid
  JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = %s AND NOT i.indisvalid AND c.relkind = 'i'
 ORDER BY 1;

-- name: is_partitioned
SELECT c.relkind = 'p' FROM pg_class c WHERE c.oid = to_regclass(%s);

-- name: partitions_without_index
-- The table's partitions (plain tables) with no index attached to the parent index yet.
SELECT c.relname FROM pg_inherits h JOIN pg_class c ON c.oid = h.inhrelid
 WHERE h.inhparent = to_regclass(%(table)s) AND c.relkind = 'r'
   AND NOT EXISTS (SELECT 1 FROM pg_index i JOIN pg_inherits ih ON ih.inhrelid = i.indexrelid
                    WHERE i.indrelid = c.oid AND ih.inhparent = to_regclass(%(index)s))
 ORDER BY 1;

-- name: index_is_valid
SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s);

-- name: partition_index
CREATE {unique}INDEX CONCURRENTLY IF NOT EXISTS {index} ON {table} {definition};

-- name: parent_index
CREATE {unique}INDEX IF NOT EXISTS {index} ON ONLY {table} {definition};

-- name: attach_index
ALTER INDEX {parent} ATTACH PARTITION {child};

-- name: parent_lock_timeout
-- The parent index's brief SHARE lock queues writers while it waits: bounded (the migration
-- fails, and the next migrate resumes it).
SET lock_timeout = '5s';

-- name: reset_lock_timeout
RESET lock_timeout;

-- name: drop_index_concurrently
DROP INDEX CONCURRENTLY IF EXISTS {index};

-- name: has_ensure_partitions
-- The history's id ranges ahead (migration 0022, schema/functions/ensure_partitions.sql): each
-- migrate makes sure of them, as each worker does every minute.
SELECT to_regprocedure(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL;

-- name: ensure_partitions
SELECT {schema}.ensure_partitions();
