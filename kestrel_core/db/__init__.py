"""Talking to PostgreSQL: connections and pools and the errors a person can read, passwords
masked by ``base.masking`` (``connection``), the engine's SQL rendered for one schema
(``statements``), which errors mean the database is away (``outage``), versioned migrations
and the schema's functions kept as code (``migrate``, ``migrations/NNNN_name.sql``,
``schema/functions/<name>.sql``), and the least-privilege roles (``roles``).

May import: base.
"""
