"""How far behind the console's read server is: a streaming replica (``--read-dsn``) answers
with what it has replayed, so every screen and report read there is that much behind.

The lag is read on the replica alone. ``now() - pg_last_xact_replay_timestamp()`` is the
usual measure, but it grows while the primary is idle (no commit to replay: the last one gets
older and older), so a replica that has replayed everything it received, with its WAL receiver
up, is 0 s behind. A replica whose receiver is down (the primary gone, the network cut) does not
know what it misses: it says "not streaming", with the age of its last replayed commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import dict_row

from kestrel_core.db import statements_beside

from .session import ReaderSession

SQL = statements_beside(__file__)

DATA_NOW = SQL.data_now.strip()  # one line: it replaces now() wherever that is written


def on_data_clock(statement: str) -> str:
    """``statement`` with each ``now()`` read as DATA_NOW (our constants only, never user text)."""
    return statement.replace("now()", DATA_NOW)


def lsn_number(lsn: str | None) -> int | None:
    """A WAL location ``'16/B374D848'`` as one comparable number."""
    if not lsn:
        return None
    high, _, low = lsn.partition("/")
    return (int(high, 16) << 32) | int(low, 16)


@dataclass(frozen=True)
class ReplicaState:
    """The read server as the console sees it: a primary (``replica`` False: nothing to wait
    for), or a standby with its lag in seconds (None: not known yet, nothing replayed)."""

    replica: bool
    lag_s: float | None = 0.0
    streaming: bool = True
    replay_lsn: str | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ReplicaState:
        if not row["in_recovery"]:
            return cls(replica=False)
        streaming = bool(row["streaming"])  # NULL: no WAL receiver at all
        age = row["last_replay_age_s"]
        lag = 0.0 if streaming and row["caught_up"] else (None if age is None else max(0.0, float(age)))
        return cls(replica=True, lag_s=lag, streaming=streaming, replay_lsn=row["replay_lsn"])

    def behind(self, max_lag_s: float) -> bool:
        """Too far behind to be taken as current: past ``max_lag_s``, unknown, or not streaming."""
        return self.replica and (not self.streaming or self.lag_s is None or self.lag_s > max_lag_s)

    def short(self) -> str:
        """For the header: 'replica lag 0.4 s', 'replica not streaming', or '' on a primary."""
        if not self.replica:
            return ""
        if not self.streaming:
            return "replica NOT STREAMING"
        return "replica lag ?" if self.lag_s is None else f"replica lag {_seconds(self.lag_s)}"

    def warning(self, max_lag_s: float) -> str:
        """What the banner says when ``behind``."""
        if not self.streaming:
            last = "" if self.lag_s is None else f" (its last replayed commit is {_seconds(self.lag_s)} old)"
            return (
                f"⚠ the read replica is not receiving WAL from the primary{last}: the screens may be "
                "behind; actions still go to the primary"
            )
        if self.lag_s is None:
            return "⚠ the read replica has replayed nothing yet: its lag is unknown; actions still go to the primary"
        return (
            f"⚠ the read replica is {_seconds(self.lag_s)} behind the primary (more than "
            f"{_seconds(max_lag_s)}): the screens show that old a state; actions still go to the primary"
        )


def _seconds(s: float) -> str:
    return f"{s:.1f} s" if s < 60 else f"{s / 60:.1f} min"


class ReplicaReads(ReaderSession):
    """``replica_state``: where this Reader reads, and how far behind it is."""

    def replica_state(self) -> ReplicaState:
        return ReplicaState.from_row(self._rows("replica_state", SQL.replica_state)[0])


def replica_state_on(conn: psycopg.Connection) -> ReplicaState:
    """``ReplicaState`` read on a plain connection (the one ad-hoc SQL runs on), outside any
    transaction it leaves open."""
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(SQL.replica_state)
        row = cur.fetchone()
    if not conn.autocommit:
        conn.rollback()
    assert row is not None  # one row, always
    return ReplicaState.from_row(row)


def describe_reads(target: str, state: ReplicaState) -> str:
    """The CLI's note on stderr: where it read, and how old that is."""
    if not state.replica:
        return f"read on {target} (--read-dsn: a primary, not a replica)"
    if not state.streaming:
        age = "" if state.lag_s is None else f" (last replayed commit {_seconds(state.lag_s)} old)"
        return f"read on the replica {target}: it is NOT receiving WAL from its primary{age}"
    lag = "unknown" if state.lag_s is None else _seconds(state.lag_s)
    return f"read on the replica {target}, {lag} behind the primary"
