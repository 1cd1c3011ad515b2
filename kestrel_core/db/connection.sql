-- db/connection.py: the connection a client opens itself, and its settings.

-- name: set_setting
-- Each of a connection's settings, set once it opened ({name} an identifier, {value} a literal,
-- both composed by connection.py).
SET {name} = {value};
