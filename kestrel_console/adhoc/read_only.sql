-- name: temp_file_limit_kb
SELECT setting FROM pg_settings WHERE name = 'temp_file_limit';

-- name: begin_read_only
BEGIN READ ONLY;

-- name: set_transaction_read_only
-- On a connection that is not autocommit psycopg opens the transaction itself; this must then
-- be its first statement.
SET TRANSACTION READ ONLY;

-- name: set_limits
-- standard_conforming_strings: the guard lexes strings as Postgres does with it on.
-- search_path: pg_catalog, the Kestrel schema, pg_temp last, and nothing else (no `public`).
-- Postgres finds what a query does not qualify through it: functions called by attribute
-- notation ((x).f), overloads of an allowed name (lower(int)), operators, types and domains
-- (whose CHECK runs code). Everyone may EXECUTE a function of `public` unless its owner revoked
-- it, so with `public` on the path an admin's helper there ran through any of these, even as
-- kestrel_reader, even SECURITY DEFINER. Qualified names are the guard's to refuse.
SELECT set_config('statement_timeout', %(statement_timeout)s, true),
       set_config('idle_in_transaction_session_timeout', %(idle_timeout)s, true),
       set_config('search_path', 'pg_catalog, ' || quote_ident(%(schema)s) || ', pg_temp', true);

-- name: pin_lexing
-- What the server's lexer depends on, pinned for the transaction (SET LOCAL: the connection
-- is as it was after the rollback): the client encoding (UTF8: what the guard parsed is the
-- text's UTF-8 bytes, and every server encoding is ASCII-safe, so no character of it becomes
-- a quote or a backslash on the server), standard_conforming_strings (the guard's parser reads
-- '\' as a backslash), backslash_quote (safe_encoding, the parser's: with a UTF8 client \' is
-- then allowed in E'' strings, as the parser allows it).
SELECT set_config('client_encoding', 'UTF8', true),
       set_config('standard_conforming_strings', 'on', true),
       set_config('backslash_quote', 'safe_encoding', true),
       getdatabaseencoding()::text;

-- name: server_bytes
-- The query's text as the server holds it once converted to the database's encoding: what its
-- lexer reads (a parameter goes through the same conversion as the query text).
SELECT convert_to(%(text)s, getdatabaseencoding());

-- name: set_memory_limits
-- Run as the role the query runs as (after SET LOCAL ROLE): temp_file_limit is PGC_SUSET, so
-- only a superuser or a role granted SET on it may lower it; it stays at the server's value
-- (unlimited by default) otherwise.
-- No parallel workers: their memory is theirs, not the backend's the watchdog (backend_memory)
-- reads, and each would have work_mem of its own.
SELECT set_config('work_mem', %(work_mem)s, true),
       set_config('max_parallel_workers_per_gather', '0', true),
       CASE WHEN has_parameter_privilege('temp_file_limit', 'SET')
            THEN set_config('temp_file_limit', %(temp_file_limit)s, true) END;

-- name: columns_of
-- The columns of a query, without running it past planning (LIMIT 0).
SELECT * FROM (
{body}
) AS kestrel_q0 LIMIT 0;

-- name: sized
-- Each row measured on the server as text (what the screen or the file would hold: for a text
-- value its length, read from its header) and sent as NULLs when it is larger than the limit;
-- OFFSET 0 keeps each subquery computed once.
SELECT {cases}, kestrel_x.kestrel_row_bytes FROM (SELECT kestrel_q.*, {sizes} AS kestrel_row_bytes FROM (SELECT * FROM (
{body}
) AS kestrel_q0 OFFSET 0) AS kestrel_q({columns}) OFFSET 0) AS kestrel_x;

-- name: sized_column
-- concat(x) calls the type's output function: no cast, which an admin's CREATE CAST (a function
-- of theirs for ::text) could make run anything, as its owner. NULL is ''.
pg_catalog.octet_length(pg_catalog.concat(kestrel_q.c{i}))

-- name: sized_case
CASE WHEN kestrel_x.kestrel_row_bytes <= {limit} THEN kestrel_x.c{i} END

-- name: explain_lines
-- An EXPLAIN run by the schema's explain_lines(): each line measured on the server and sent
-- as NULL when larger than max_bytes (an EXPLAIN cannot be wrapped in a SELECT).
SELECT line AS "QUERY PLAN", bytes FROM {schema}.explain_lines(%(statement)s, %(max_bytes)s);
