"""CPU accounting during a measurement: the whole machine, and given processes."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

_TICK = os.sysconf("SC_CLK_TCK")


def _machine_jiffies() -> tuple[int, int]:
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields), idle


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds used so far by a live process (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


@dataclass
class CpuMeter:
    """Start before the measurement, ``stop()`` after: machine busy fraction and process CPU."""

    pids: Sequence[int] = ()

    def __post_init__(self) -> None:
        self._total, self._idle = _machine_jiffies()
        self._proc = {pid: process_cpu_s(pid) for pid in self.pids}

    def stop(self) -> dict[str, float]:
        total, idle = _machine_jiffies()
        busy = 1.0 - (idle - self._idle) / max(1, total - self._total)
        used = sum(process_cpu_s(pid) - before for pid, before in self._proc.items())
        return {"machine_busy": round(busy, 3), "workers_cpu_s": round(used, 2)}
