"""The demo's Kestrel app: three workflows that look like the ones operators really run.

- ``remediate-incident``: root-cause analysis, a flaky fix that retries, an approval gate with
  the proposed change as details, a durable cool-down sleep, then a pull request;
- ``provision-resource``: quota check, allocation, a flaky configuration step (retries=3 with
  backoff), a durable sleep while DNS propagates, a health check;
- ``ci-pipeline``: checkout, build, test (fails now and then, no retry), deploy.

Steps sleep a random 0.2-3 s scaled by the input's ``pace`` (the seed burst uses a small pace
so the console has history at once). Everything random happens inside steps, whose outputs
are checkpointed, so a replay after a crash or a wake-up takes the same path.
"""

from __future__ import annotations

import hashlib
import random
import time
from datetime import timedelta
from typing import Any

from kestrel_core import Kestrel

REMEDIATE = "remediate-incident"
PROVISION = "provision-resource"
CI_PIPELINE = "ci-pipeline"

APPROVAL_STEP = "approve-fix"
APPROVAL_TIMEOUT = timedelta(minutes=20)  # unanswered gates time out: that outcome shows too
FLAKY_FIX_RATE = 0.3
FLAKY_CONFIGURE_RATE = 0.4
TEST_FAILURE_RATE = 0.2

_ROOT_CAUSES = (
    ("memory leak in the image resizer since {version}", "rollback", "low"),
    ("connection pool exhausted: max_connections reached on the primary", "scale-pool", "medium"),
    ("bad feature flag rollout: checkout-v2 enabled for 100% of traffic", "disable-flag", "low"),
    ("certificate expired on the internal ingress", "rotate-certificate", "medium"),
    ("disk 94% full on the write-ahead log volume", "resize-volume", "high"),
    ("noisy neighbour saturating the node's network", "drain-node", "high"),
)


def _work(pace: float, low: float = 0.2, high: float = 3.0) -> float:
    """Pretend to work for a realistic while; returns the seconds spent."""
    seconds = random.uniform(low, high) * pace
    time.sleep(seconds)
    return round(seconds, 3)


def _sha(*parts: Any) -> str:
    return hashlib.sha1(":".join(map(str, parts)).encode()).hexdigest()


def _pace(payload: dict[str, Any]) -> float:
    return float(payload.get("pace", 1.0))


# -- incident remediation ------------------------------------------------------------------


def analyse_incident(alert: dict[str, Any]) -> dict[str, Any]:
    spent = _work(_pace(alert))
    cause, action, risk = random.choice(_ROOT_CAUSES)
    return {
        "root_cause": cause.format(version=alert.get("version", "v2.14.1")),
        "proposed_action": action,
        "risk": risk,
        "confidence": round(random.uniform(0.55, 0.97), 2),
        "evidence": [
            f"{random.randint(3, 40)} OOM kills on {alert['service']} in the last 10 minutes",
            f"p99 latency {random.uniform(1.2, 9.5):.1f}s (SLO 800ms)",
            f"error rate {random.uniform(2, 35):.1f}% on {alert['service']}",
        ],
        "suspect_commit": _sha(alert["service"], alert.get("alert_id"))[:7],
        "analysis_s": spent,
    }


def prepare_fix(alert: dict[str, Any], rca: dict[str, Any]) -> dict[str, Any]:
    spent = _work(_pace(alert), 0.3, 2.0)
    if random.random() < FLAKY_FIX_RATE:
        raise TimeoutError(f"kubectl diff timed out after 30s talking to cluster {alert['cluster']}")
    return {
        "action": rca["proposed_action"],
        "target": f"deployment/{alert['service']}",
        "namespace": alert.get("namespace", "prod"),
        "cluster": alert["cluster"],
        "risk": rca["risk"],
        "change": {
            "rollback": f"image {alert['service']}:{alert.get('version', 'v2.14.1')} -> previous tag",
            "scale-pool": "pgbouncer default_pool_size 40 -> 80",
            "disable-flag": "feature flag checkout-v2: 100% -> 0%",
            "rotate-certificate": "issue a new certificate from the internal CA, reload ingress",
            "resize-volume": "WAL volume 200Gi -> 400Gi (online resize)",
            "drain-node": "cordon and drain the saturated node, reschedule 14 pods",
        }[rca["proposed_action"]],
        "dry_run": "ok",
        "prepare_s": spent,
    }


def open_pull_request(alert: dict[str, Any], fix: dict[str, Any]) -> dict[str, Any]:
    _work(_pace(alert), 0.5, 2.5)
    number = random.randint(4000, 9999)
    return {
        "url": f"https://git.example.com/platform/runbooks/pull/{number}",
        "branch": f"remediate/{alert['alert_id'].lower()}-{fix['action']}",
        "title": f"{fix['action']} {fix['target']} ({alert['alert_id']})",
        "checks": "queued",
    }


def remediate_incident(ctx: Any, alert: dict[str, Any]) -> dict[str, Any]:
    rca = ctx.step("rca", analyse_incident, alert)
    fix = ctx.step("fix", prepare_fix, alert, rca, retries=2, backoff=0.5)
    decision = ctx.wait_for_approval(
        APPROVAL_STEP,
        timeout=APPROVAL_TIMEOUT,
        details={
            "alert": alert["alert_id"],
            "severity": alert["severity"],
            "service": alert["service"],
            "summary": rca["root_cause"],
            "action": fix["action"],
            "change": fix["change"],
            "risk": fix["risk"],
            "confidence": rca["confidence"],
        },
    )
    if not decision.approved:
        return {
            "outcome": "timed out" if decision.timed_out else "rejected",
            "by": decision.by,
            "comment": decision.comment,
        }
    ctx.sleep("cool-down", timedelta(seconds=float(alert.get("cooldown_s", 5))))
    pr = ctx.step("open-pr", open_pull_request, alert, fix)
    return {"outcome": "fixed", "approved_by": decision.by, "pr": pr["url"], "action": fix["action"]}


# -- provisioning --------------------------------------------------------------------------


def check_quota(request: dict[str, Any]) -> dict[str, Any]:
    _work(_pace(request), 0.2, 0.8)
    limit = random.choice([20, 40, 80])
    return {"team": request["team"], "used": random.randint(1, limit - 1), "limit": limit, "ok": True}


def allocate(request: dict[str, Any]) -> dict[str, Any]:
    _work(_pace(request), 0.5, 3.0)
    return {
        "instance_id": "i-" + _sha(request["request_id"], "instance")[:12],
        "private_ip": f"10.{random.randint(0, 31)}.{random.randint(0, 255)}.{random.randint(2, 254)}",
        "zone": random.choice(["eu-west-1a", "eu-west-1b", "eu-west-1c"]),
        "size": request["size"],
    }


def configure(request: dict[str, Any], instance: dict[str, Any]) -> dict[str, Any]:
    _work(_pace(request), 0.3, 1.5)
    if random.random() < FLAKY_CONFIGURE_RATE:
        raise ConnectionResetError(f"ssh to {instance['private_ip']}: connection reset during key exchange")
    return {
        "playbook": f"provision-{request['kind']}.yml",
        "tasks_ok": random.randint(24, 61),
        "tasks_changed": random.randint(3, 18),
        "hostname": f"{request['kind']}-{request['env']}-{instance['instance_id'][-4:]}.internal",
    }


def health_check(request: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    _work(_pace(request), 0.2, 1.0)
    return {"host": config["hostname"], "status": "healthy", "latency_ms": random.randint(1, 40)}


def provision_resource(ctx: Any, request: dict[str, Any]) -> dict[str, Any]:
    ctx.step("check-quota", check_quota, request)
    instance = ctx.step("allocate", allocate, request)
    config = ctx.step("configure", configure, request, instance, retries=3, backoff=0.5)
    ctx.sleep("await-dns", timedelta(seconds=float(request.get("dns_wait_s", 4))))
    health = ctx.step("health-check", health_check, request, config)
    return {
        "instance_id": instance["instance_id"],
        "hostname": config["hostname"],
        "zone": instance["zone"],
        "health": health["status"],
    }


# -- CI pipeline ---------------------------------------------------------------------------


def checkout(build: dict[str, Any]) -> dict[str, Any]:
    _work(_pace(build), 0.2, 1.0)
    return {"repo": build["repo"], "commit": build["commit"], "files": random.randint(300, 4000)}


def compile_artifact(build: dict[str, Any]) -> dict[str, Any]:
    spent = _work(_pace(build), 1.0, 3.0)
    return {
        "artifact": f"registry.example.com/{build['repo']}:{build['commit']}",
        "size_mb": round(random.uniform(40, 420), 1),
        "build_s": spent,
    }


def run_tests(build: dict[str, Any]) -> dict[str, Any]:
    _work(_pace(build), 0.8, 3.0)
    total = random.randint(180, 900)
    if random.random() < TEST_FAILURE_RATE:
        failed = random.randint(1, 4)
        names = random.sample(
            [
                "test_refund_rounding",
                "test_login_rate_limit",
                "test_invoice_pdf",
                "test_webhook_retry",
                "test_currency_conversion",
            ],
            failed,
        )
        raise AssertionError(f"{failed} of {total} tests failed: {', '.join(names)}")
    return {
        "passed": total,
        "failed": 0,
        "skipped": random.randint(0, 12),
        "coverage": round(random.uniform(71, 93), 1),
    }


def deploy(build: dict[str, Any], artifact: dict[str, Any]) -> dict[str, Any]:
    _work(_pace(build), 0.5, 2.0)
    return {"environment": "staging", "image": artifact["artifact"], "replicas": random.choice([2, 3, 4])}


def ci_pipeline(ctx: Any, build: dict[str, Any]) -> dict[str, Any]:
    ctx.step("checkout", checkout, build)
    artifact = ctx.step("build", compile_artifact, build)
    tests = ctx.step("test", run_tests, build)
    result = {"commit": build["commit"], "tests_passed": tests["passed"], "artifact": artifact["artifact"]}
    if build.get("branch") == "main":
        result["deployed_to"] = ctx.step("deploy", deploy, build, artifact)["environment"]
    return result


def build_app(dsn: str, schema: str = "kestrel") -> Kestrel:
    """The demo app on ``dsn``, with its three workflows registered."""
    app = Kestrel(dsn, schema=schema, application_name="kestrel-demo")
    app.workflow(REMEDIATE)(remediate_incident)
    app.workflow(PROVISION)(provision_resource)
    app.workflow(CI_PIPELINE)(ci_pipeline)
    return app
