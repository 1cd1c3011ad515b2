-- name: set_session
-- Session settings of the Reader's connection: a bounded wait per query, read-only even
-- outside explicit transactions (a belt: every statement here only reads), no JIT and no
-- parallel workers: a refresh reads a few thousand rows in milliseconds, and a plan whose
-- estimate goes wrong on a big history would otherwise spend up to seconds compiling it, or
-- start workers (a Parallel Append over the history's ranges, slower than one process for the
-- few rows a screen reads: bench/README.md, "Console"), taken from the application's pool.
SELECT set_config('statement_timeout', %(timeout)s, false),
       set_config('default_transaction_read_only', 'on', false),
       set_config('jit', 'off', false),
       set_config('max_parallel_workers_per_gather', '0', false);

-- name: now
SELECT now() AS now;
