-- name: database_exists
SELECT 1 FROM pg_database WHERE datname = %s;

-- name: create_database
CREATE DATABASE {};

-- name: drop_database
DROP DATABASE IF EXISTS {} WITH (FORCE);
