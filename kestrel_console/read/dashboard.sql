-- The dashboard's one statement, composed in dashboard.py from the parts' own SQL (overview.sql,
-- workers.sql) on the live rows of live_rows.sql.

-- name: part_rows
-- One CTE per part: its rows numbered (``ord``) in its order.
p_{name} AS (SELECT x.*, row_number() OVER ({window}) AS ord FROM ({rows}) AS x)

-- name: window_order
-- Ordered inside only for a LIMIT; ``ord`` numbers the rows in the part's order.
ORDER BY {order}

-- name: slot_column
-- A column of the part in its typed slot of the wide row.
p.{column}::{type} AS {slot}

-- name: slot_null
-- A slot the part does not use.
NULL::{type} AS {slot}

-- name: part_select
-- A part's rows in the wide row type, named by the part.
SELECT {part} AS part, p.ord AS ord, {values} FROM p_{name} AS p

-- name: union_all
UNION ALL

-- name: dashboard_live
-- The live CTEs (each read once), the parts' own CTEs and rows, then every part's rows in one
-- wide row type, each part's rows in its order.
WITH {ctes}
{selects}
ORDER BY part, ord;
