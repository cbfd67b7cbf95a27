"""Clocks: where "now" comes from.

Latencies are always computed from a monotonic clock; wall time is only a label.
The driver reads time from the running event loop, so the same agent code measures
real seconds against an HTTP server and virtual seconds against the in-process twin
(see `simulator.vtime`).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a monotonic scale (only differences are meaningful)."""
        ...

    def wall(self) -> float:
        """Unix epoch seconds, for labels."""
        ...


@dataclass
class LoopClock:
    """Reads the running loop's clock; wall time is anchored once at creation.

    Under the virtual-time loop `loop.time()` is virtual, so `wall()` advances with
    simulated time from the real start instant.
    """

    _anchor_wall: float = field(default_factory=time.time)
    _anchor_mono: float | None = None

    def monotonic(self) -> float:
        return asyncio.get_running_loop().time()

    def wall(self) -> float:
        now = self.monotonic()
        if self._anchor_mono is None:
            self._anchor_mono = now
        return self._anchor_wall + (now - self._anchor_mono)
