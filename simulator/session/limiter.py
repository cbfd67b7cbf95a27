"""Run-wide admission: a request-rate cap and a max-in-flight bound.

The rate cap spaces attempts 1/rate seconds apart on the loop's clock, so any positive
rate is kept exactly — 1.5 requests/s is 1.5, and a rate split over workers (2.5 / 2 =
1.25 each) sums back to the whole. (asyncio-throttle counts whole requests per period,
which truncated fractional rates.)
"""

from __future__ import annotations

import asyncio
from types import TracebackType


class Pacer:
    """Admits one caller every `1 / rate_per_s` seconds of loop time, first come first
    served; an idle pacer admits the next caller at once (no burst is saved up)."""

    def __init__(self, rate_per_s: float) -> None:
        if not rate_per_s > 0:
            raise ValueError(f"rate must be > 0 requests/s, not {rate_per_s!r}")
        self.interval_s = 1.0 / rate_per_s
        self._next: float | None = None

    def reserve(self, now: float) -> float:
        """Pure: the time of the next free slot at or after `now`, and take it."""
        t = now if self._next is None or self._next < now else self._next
        self._next = t + self.interval_s
        return t

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        at = self.reserve(now)
        if at > now:
            await asyncio.sleep(at - now)


class Limiter:
    """`async with limiter:` around each attempt. Both limits are optional. It also
    knows when the oldest attempt now in flight was admitted (`oldest_in_flight`): a
    ramp judges a step's window only once every request sent in it has come back."""

    def __init__(self, max_in_flight: int | None, requests_per_s: float | None) -> None:
        self._sem = asyncio.Semaphore(max_in_flight) if max_in_flight else None
        self._pacer = Pacer(requests_per_s) if requests_per_s else None
        self._since: dict[asyncio.Task[object] | None, float] = {}
        self._waiting = 0       # attempts held at a limit now

    async def __aenter__(self) -> None:
        if self._pacer is not None or self._sem is not None:
            self._waiting += 1
            try:
                if self._pacer is not None:
                    await self._pacer.acquire()
                if self._sem is not None:
                    await self._sem.acquire()
            finally:
                self._waiting -= 1
        self._since[asyncio.current_task()] = asyncio.get_running_loop().time()

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        self._since.pop(asyncio.current_task(), None)
        if self._sem is not None:
            self._sem.release()

    def counts(self) -> dict[str, int]:
        """Attempts in flight and attempts waiting at a limit, now (a live view's)."""
        return {"in_flight": len(self._since), "waiting": self._waiting}

    def oldest_in_flight(self) -> float | None:
        """Loop time the oldest attempt now in flight was admitted (None: none is)."""
        return min(self._since.values(), default=None)
