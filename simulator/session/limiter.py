"""Run-wide admission: a request-rate cap (asyncio-throttle) and a max-in-flight bound."""

from __future__ import annotations

import asyncio
from types import TracebackType

from asyncio_throttle.throttler import Throttler


class Limiter:
    """`async with limiter:` around each attempt. Both limits are optional."""

    def __init__(self, max_in_flight: int | None, requests_per_s: float | None) -> None:
        self._sem = asyncio.Semaphore(max_in_flight) if max_in_flight else None
        self._throttle = None
        if requests_per_s:
            # Throttler counts `rate_limit` requests per `period` seconds.
            if requests_per_s >= 1:
                self._throttle = Throttler(rate_limit=int(requests_per_s), period=1.0)
            else:
                self._throttle = Throttler(rate_limit=1, period=1.0 / requests_per_s)

    async def __aenter__(self) -> None:
        if self._throttle is not None:
            await self._throttle.acquire()  # type: ignore[no-untyped-call]
        if self._sem is not None:
            await self._sem.acquire()

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._sem is not None:
            self._sem.release()
