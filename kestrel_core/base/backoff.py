"""Exponential backoff, one policy for every retry loop (database reconnects, claims, steps)."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    """``initial * factor**n`` seconds before retry ``n`` (0-based), at most ``cap``.

    ``jitter`` is the fraction the delay may shrink at random (0.5: between half and all of it),
    so workers that failed together do not retry together.
    """

    initial: float
    factor: float = 2.0
    cap: float = float("inf")
    jitter: float = 0.0

    def delay(self, retry: int) -> float:
        """The pause before retry number ``retry`` (0 for the first)."""
        # The exponent is bounded so a long outage cannot overflow the float.
        base = min(self.cap, self.initial * self.factor ** min(max(retry, 0), 64))
        if self.jitter:
            base *= random.uniform(1.0 - self.jitter, 1.0)
        return base
