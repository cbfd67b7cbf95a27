"""The request-rate cap keeps fractional rates exactly (issue 17 item 6), on virtual time."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from simulator.clock.virtual import run_virtual
from simulator.session.limiter import Limiter, Pacer


async def _admitted_in(limiter: Limiter, window_s: float, callers: int = 50) -> list[float]:
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    times: list[float] = []

    async def caller() -> None:
        while loop.time() - t0 < window_s:
            async with limiter:
                if loop.time() - t0 < window_s:
                    times.append(loop.time() - t0)

    await asyncio.gather(*(caller() for _ in range(callers)))
    return times


@pytest.mark.parametrize("rate", [0.25, 1.0, 1.5, 2.5, 7.3])
def test_fractional_rates_are_exact(rate: float) -> None:
    window = 100.0
    times = run_virtual(_admitted_in(Limiter(None, rate), window))
    # One admission every 1/rate s from t=0: ceil(window * rate) in [0, window).
    assert len(times) == pytest.approx(window * rate, abs=1)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) == pytest.approx(1 / rate)


def test_a_rate_split_over_workers_sums_back() -> None:
    async def workers() -> int:
        parts = await asyncio.gather(*(_admitted_in(Limiter(None, 5.0 / 4), 80.0, 10)
                                       for _ in range(4)))
        return sum(map(len, parts))

    # 5 requests/s over 80 s, whatever the split (truncating 1.25 to 1 gave 320).
    assert run_virtual(workers()) == pytest.approx(400, abs=4)


def test_pacer_reserve_is_pure_spacing() -> None:
    p = Pacer(2.0)
    assert [p.reserve(0.0) for _ in range(3)] == [0.0, 0.5, 1.0]
    assert p.reserve(10.0) == 10.0           # idle: no saved-up burst
    with pytest.raises(ValueError):
        Pacer(0.0)
