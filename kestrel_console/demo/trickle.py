"""Enqueues demo workflows: a seed burst of quick ones at start, then a steady random trickle.

Inputs look like what real callers send (alert ids, provisioning requests, commits). Incidents
of severity ``critical`` are left for a human by the bot operator, so some approvals always
wait for you.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from kestrel_core import Kestrel, KestrelError

from .background import BackgroundLoop
from .workflows import CI_PIPELINE, PROVISION, REMEDIATE

Event = Callable[[str], None]

SEED_PACE = 0.05  # seed steps take 10-150 ms, so the console has history within seconds
WEIGHTS = {REMEDIATE: 3, PROVISION: 3, CI_PIPELINE: 4}

_SERVICES = ("checkout", "payments-api", "search", "image-resizer", "auth", "notifications")
_CLUSTERS = ("prod-eu-1", "prod-us-2", "prod-ap-1")
_TEAMS = ("payments", "search", "identity", "data-platform", "growth")
_KINDS = (("postgres", "db.m6g.large"), ("redis", "cache.r6g.large"), ("vm", "m6i.xlarge"), ("kafka", "kafka.m5.large"))
_REPOS = ("platform/api", "platform/web", "payments/ledger", "search/indexer")
_AUTHORS = ("alice", "bob", "chen", "dara", "emeka", "farah")
_BRANCHES = ("main", "main", "feature/faster-search", "fix/refund-rounding", "deps/bump-psycopg")


def incident_input(rng: random.Random, pace: float = 1.0, severity: str | None = None) -> dict[str, Any]:
    service = rng.choice(_SERVICES)
    return {
        "alert_id": f"INC-{rng.randint(1000, 9999)}",
        "severity": severity or rng.choices(["warning", "major", "critical"], [4, 4, 2])[0],
        "service": service,
        "cluster": rng.choice(_CLUSTERS),
        "namespace": "prod",
        "version": f"v2.{rng.randint(10, 19)}.{rng.randint(0, 9)}",
        "summary": rng.choice(["HighErrorRate", "LatencySLOBreach", "PodCrashLooping", "DiskPressure"]),
        "cooldown_s": round(rng.uniform(3, 8) * max(pace, 0.2), 1),
        "pace": pace,
    }


def provisioning_input(rng: random.Random, pace: float = 1.0) -> dict[str, Any]:
    kind, size = rng.choice(_KINDS)
    return {
        "request_id": f"REQ-{rng.randint(10000, 99999)}",
        "team": rng.choice(_TEAMS),
        "env": rng.choice(["staging", "staging", "prod"]),
        "kind": kind,
        "size": size,
        "requested_by": rng.choice(_AUTHORS),
        "dns_wait_s": round(rng.uniform(3, 10) * max(pace, 0.2), 1),
        "pace": pace,
    }


def ci_input(rng: random.Random, pace: float = 1.0) -> dict[str, Any]:
    return {
        "repo": rng.choice(_REPOS),
        "branch": rng.choice(_BRANCHES),
        "commit": f"{rng.getrandbits(28):07x}",
        "author": rng.choice(_AUTHORS),
        "trigger": rng.choice(["push", "push", "pull_request", "schedule"]),
        "pace": pace,
    }


def random_workflow(rng: random.Random, pace: float = 1.0) -> tuple[str, dict[str, Any]]:
    """One workflow name and input, drawn with the demo's weights."""
    name = rng.choices(list(WEIGHTS), list(WEIGHTS.values()))[0]
    make = {REMEDIATE: incident_input, PROVISION: provisioning_input, CI_PIPELINE: ci_input}[name]
    return name, make(rng, pace)


def describe(name: str, payload: dict[str, Any]) -> str:
    """A few words naming what one demo input is about."""
    if name == REMEDIATE:
        return f"{payload['alert_id']} {payload['severity']} on {payload['service']}"
    if name == PROVISION:
        return f"{payload['request_id']} {payload['kind']} for {payload['team']} ({payload['env']})"
    return f"{payload['repo']}@{payload['commit']} on {payload['branch']}"


def seed(app: Kestrel, rng: random.Random, on_event: Event) -> list[int]:
    """Enqueue a burst of quick workflows (history for the console); returns their ids.

    Always includes critical incidents (left for a human), warnings the bot decides, quick
    provisioning and CI runs, and two builds scheduled a little later.
    """
    ids: list[int] = []
    batches: list[tuple[str, list[dict[str, Any]]]] = [
        (
            REMEDIATE,
            [
                incident_input(rng, SEED_PACE, severity)
                for severity in ("critical", "critical", "critical", "warning", "warning", "major", "major")
            ],
        ),
        (PROVISION, [provisioning_input(rng, SEED_PACE) for _ in range(5)]),
        (CI_PIPELINE, [ci_input(rng, SEED_PACE) for _ in range(8)]),
    ]
    for name, inputs in batches:
        ids += app.enqueue_many(name, inputs)
    later = [ci_input(rng, SEED_PACE) | {"trigger": "schedule"} for _ in range(2)]
    ids += app.enqueue_many(CI_PIPELINE, later, delay=timedelta(seconds=rng.uniform(45, 90)))
    on_event(f"seeded {len(ids)} quick workflows (ids {min(ids)}-{max(ids)})")
    return ids


class Trickle(BackgroundLoop):
    """A thread enqueuing random demo workflows at about ``rate_per_min`` (Poisson arrivals)."""

    thread_name = "kestrel-demo-trickle"

    def __init__(self, app: Kestrel, rate_per_min: float, rng: random.Random, on_event: Event) -> None:
        super().__init__(app, on_event)
        self.rate_per_min = rate_per_min
        self.rng = rng
        self.enqueued = 0

    def start(self) -> Trickle:
        return super().start() if self.rate_per_min > 0 else self

    def _run(self) -> None:
        mean_gap = 60.0 / self.rate_per_min
        while not self._stop.wait(self.rng.expovariate(1.0 / mean_gap)):
            name, payload = random_workflow(self.rng)
            try:
                eid = self.app.enqueue(name, payload)
            except KestrelError as exc:
                self.on_event(f"enqueue failed: {exc}")
                continue
            self.enqueued += 1
            self.on_event(f"enqueued #{eid} {name}: {describe(name, payload)}")
