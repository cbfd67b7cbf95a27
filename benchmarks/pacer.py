"""The run-wide request-rate cap: the hand-written `Pacer` beside asyncio-throttle.

Run: `python benchmarks/pacer.py` (needs `pip install asyncio-throttle`; the project no
longer depends on it). Side by side in one run, for each of a few rates: the rate each
limiter achieves over N admissions, on a real event loop (wall clock) and on the twin's
virtual-time loop (`clock.virtual.run_virtual`, where a run's clock is the loop's), and
the CPU each admission costs. A run's limiter must keep the scenario's rate exactly in
both: the in-process twin runs in virtual time, and a rate split over workers is
fractional (2.5 requests/s over 2 workers is 1.25 each).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simulator.clock.virtual import run_virtual
from simulator.session.limiter import Pacer

Acquire = Callable[[], Awaitable[None]]


def _throttle(rate: float) -> Acquire | None:
    try:
        from asyncio_throttle import Throttler
    except ImportError:
        return None
    # whole requests per period: 1.25/s can only be 1 per 1 s or 5 per 4 s
    t = Throttler(rate_limit=max(1, round(rate)), period=1.0)
    return t.acquire


def _pacer(rate: float) -> Acquire:
    return Pacer(rate).acquire


async def _measure(acquire: Acquire, n: int) -> tuple[float, float]:
    """(admissions per second of loop time, CPU µs per admission)."""
    loop = asyncio.get_running_loop()
    cpu0 = time.process_time()
    await acquire()
    t0 = loop.time()
    for _ in range(n - 1):
        await acquire()
    span = loop.time() - t0
    cpu = time.process_time() - cpu0
    return ((n - 1) / span if span > 0 else float("inf")), 1e6 * cpu / n


def row(name: str, make: Callable[[float], Acquire | None], rate: float, n: int,
        virtual: bool) -> str:
    acquire = make(rate)
    if acquire is None:
        return f"{name:<16} {rate:>7.2f}  {'virtual' if virtual else 'wall':<8} not installed"
    coro = _measure(acquire, n)
    wall0 = time.monotonic()
    got, cpu_us = run_virtual(coro) if virtual else asyncio.run(coro)
    wall = time.monotonic() - wall0
    err = 100 * (got / rate - 1)
    return (f"{name:<16} {rate:>7.2f}  {'virtual' if virtual else 'wall':<8} "
            f"{got:>10.3f}  {err:>+8.1f}%  {cpu_us:>9.1f}  {wall:>6.2f}")


def main() -> None:
    print("limiter           rate/s  loop      achieved/s     error  CPU µs/adm  wall s")
    for rate, n in ((1.25, 6), (2.5, 8), (200.0, 400)):
        for virtual in (False, True):
            for name, make in (("pacer (ours)", _pacer), ("asyncio-throttle", _throttle)):
                print(row(name, make, rate, n, virtual), flush=True)


if __name__ == "__main__":
    main()
