"""The HTTP endpoint: ``HOST:PORT`` parsed, a registry holding the collector, prometheus_client's
threaded server (plain text or OpenMetrics, as the scraper asks in its Accept header)."""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from typing import Any

from prometheus_client import start_http_server
from prometheus_client.registry import CollectorRegistry

from ..read.operations import OperationsReader
from ..settings import Settings
from .collector import KestrelCollector
from .defaults import DEFAULT_LISTEN, DEFAULT_TIMEOUT_S, SETTLE_S
from .report_gauges import ReportGauges

_LISTEN = re.compile(r"^(?:\[(?P<v6>[^\]]+)\]|(?P<host>[^:\[\]]*)):(?P<port>[0-9]+)$")


class BadListen(ValueError):
    """A --listen value that is not HOST:PORT (bad usage)."""


def parse_listen(text: str, option: str = "--listen") -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:9464`` for IPv6; an empty host listens everywhere) -> (host, port).
    Port 0 picks a free one."""
    match = _LISTEN.match(text.strip())
    if not match:
        raise BadListen(f"{option} {text!r}: expected HOST:PORT, e.g. {DEFAULT_LISTEN} or [::1]:9464")
    port = int(match["port"])
    if port > 65535:
        raise BadListen(f"{option} {text!r}: the port must be from 0 to 65535")
    host = match["v6"] if match["v6"] is not None else match["host"]
    return host or "0.0.0.0", port


@dataclass
class Endpoint:
    """A running endpoint: its server, where it listens, and what to close."""

    server: Any
    host: str
    port: int
    reader: OperationsReader
    reports: ReportGauges
    collector: KestrelCollector

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.reader.close()
        self.reports.close()


def build_collector(
    settings: Settings, *, timeout_s: float = DEFAULT_TIMEOUT_S, settle_s: float = SETTLE_S
) -> tuple[KestrelCollector, OperationsReader, ReportGauges]:
    """The collector on the read DSN (``--read-dsn``, a replica) when given, else the read
    login (``--reader-dsn``) when given, every read bounded by ``timeout_s``; the saved
    reports' gauges on the login ad-hoc SQL uses."""
    timeout_ms = max(1, int(timeout_s * 1000))
    reader = OperationsReader(
        settings.read_dsn or settings.adhoc_dsn, schema=settings.schema, statement_timeout_ms=timeout_ms
    )
    reports = ReportGauges(settings, timeout_ms=timeout_ms)
    return KestrelCollector(reader, reports=reports, settle_s=settle_s), reader, reports


def serve(
    settings: Settings,
    listen: str,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    settle_s: float = SETTLE_S,
    option: str = "--listen",
) -> Endpoint:
    """Start the endpoint in background threads. BadListen for a malformed address or a host
    that does not resolve; OSError when the address cannot be bound (in use, not ours)."""
    host, port = parse_listen(listen, option)
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise BadListen(f"{option} {listen!r}: unknown host {host!r} ({exc.strerror})") from None
    collector, reader, reports = build_collector(settings, timeout_s=timeout_s, settle_s=settle_s)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    try:
        server, _thread = start_http_server(port, addr=host, registry=registry)
    except BaseException:
        reader.close()
        raise
    bound = server.server_address
    return Endpoint(server, host, int(bound[1]), reader, reports, collector)
