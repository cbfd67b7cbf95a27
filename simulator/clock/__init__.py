"""Clocks: where "now" comes from.

Latencies are always computed from a monotonic clock; wall time is only a label.
The driver reads time from the running event loop, so the same agent code measures
real seconds against an HTTP server and virtual seconds against the in-process twin
(see `simulator.clock.virtual`).
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


@dataclass
class RunClock(LoopClock):
    """The one clock of a run: it stamps, sleeps, times out and converts, carrying the
    rate of the time it measures (trio's `Clock` with `rate` is the model).

    `rate` is simulated seconds per second of the loop's clock: 1 on the virtual-time
    loop (whose clock *is* simulated time) and against a real server; K against an HTTP
    twin serving at `--time-scale K`. Scenario durations (think time, arrival offsets,
    back-off, `--duration`, `deadline_s`) are simulated seconds: every wait goes through
    `wait`/`timeout`, every recorded duration through `to_sim`, so no caller ever
    multiplies or divides by a time scale itself."""

    rate: float = 1.0

    def __post_init__(self) -> None:
        if not (self.rate > 0 and self.rate < float("inf")):
            raise ValueError(f"clock rate must be a finite positive number, got {self.rate}")

    def to_loop(self, sim_s: float) -> float:
        """Simulated seconds → seconds of the loop's clock (how long to wait)."""
        return sim_s if self.rate == 1.0 else sim_s / self.rate

    def to_sim(self, loop_s: float) -> float:
        """A duration measured on the loop's clock → simulated seconds."""
        return loop_s if self.rate == 1.0 else loop_s * self.rate

    def rate_to_sim(self, per_loop_s: float) -> float:
        """A rate per second of the loop's clock → per simulated second."""
        return per_loop_s if self.rate == 1.0 else per_loop_s / self.rate

    async def wait(self, event: asyncio.Event, sim_s: float) -> bool:
        """Wait `sim_s` simulated seconds or until `event` is set; True if the event
        ended the wait (False when the time ran out first)."""
        try:
            await asyncio.wait_for(event.wait(), timeout=self.to_loop(sim_s))
        except TimeoutError:
            return False
        return True

    def timeout(self, sim_s: float | None) -> asyncio.Timeout:
        """`asyncio.timeout` for `sim_s` simulated seconds (None: no limit)."""
        return asyncio.timeout(None if sim_s is None else self.to_loop(sim_s))
