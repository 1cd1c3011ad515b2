-- Kestrel schema, version 17: large payloads out of the hot row (issue 22).
--
-- A claim, a heartbeat and a completion each write a new version of the execution's row, and
-- the WAL record of a version carries the row: every inline byte of input (and, once
-- finished, output) JSON is written again at each of them. PostgreSQL compresses a row's
-- JSON and moves it to the TOAST table only down to toast_tuple_target, 2,032 bytes by
-- default: a 4 KB order compresses to ~1.2 KB and stays in the row. At 128 the toaster moves
-- input, output and error out of line whenever it runs, and a new version copies an 18-byte
-- pointer: per claimed execution with a 4 KB input, 1,438 -> 315 heap WAL bytes; per
-- heartbeat 995 -> 268 (bench/walcost.py, bench/README.md "Payloads and WAL").
--
-- The toaster runs only for a row over 2,032 bytes (TOAST_TUPLE_THRESHOLD, fixed when
-- PostgreSQL is built; toast_tuple_target does not lower it): a row whose JSON is smaller
-- keeps it inline, as before (~1.3 KB of JSON text is the edge; a completion that adds an
-- output past it moves both out). Rows written before this version keep their payloads where
-- they are (only new row images are toasted). SHARE UPDATE EXCLUSIVE: reads and writes go on.
SET lock_timeout = '5s';
ALTER TABLE {schema}.workflow_executions SET (toast_tuple_target = 128);
RESET lock_timeout;
