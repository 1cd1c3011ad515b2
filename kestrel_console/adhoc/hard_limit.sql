-- name: terminate
SELECT pg_terminate_backend(%s);
