"""The endpoint's defaults, apart from prometheus_client: the CLI's options name them, and every
``kestrel-console`` command builds its options at start-up."""

from __future__ import annotations

DEFAULT_LISTEN = "127.0.0.1:9464"  # loopback: a network-wide endpoint is a choice to make
DEFAULT_TIMEOUT_S = 5.0  # under Prometheus's default scrape_timeout (10 s)
# Seconds a finish waits before it is counted: the transactions that finished something before
# now() - SETTLE_S have committed (a finish is one short transaction), so none is skipped.
SETTLE_S = 15.0
