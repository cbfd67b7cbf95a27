"""The run's clock converts and waits at its rate; nothing else scales time (issue 23)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from simulator.clock import RunClock
from simulator.clock.virtual import quiet_now, run_virtual


def test_conversions_at_a_rate() -> None:
    c = RunClock(rate=20.0)
    assert c.to_loop(2.0) == 0.1 and c.to_sim(0.1) == 2.0 and c.rate_to_sim(400.0) == 20.0
    one = RunClock()
    assert one.to_loop(2.5) == 2.5 and one.to_sim(2.5) == 2.5


@pytest.mark.parametrize("rate", [0.0, -1.0, float("inf"), float("nan")])
def test_a_rate_that_is_no_rate_is_refused(rate: float) -> None:
    with pytest.raises(ValueError, match="clock rate"):
        RunClock(rate=rate)


def test_waits_and_timeouts_are_simulated_seconds() -> None:
    c = RunClock(rate=20.0)

    async def main() -> tuple[float, bool, bool, float]:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        stop = asyncio.Event()
        timed_out = await c.wait(stop, 4.0)            # 4 simulated s = 0.2 loop s
        waited = loop.time() - t0
        loop.call_later(0.05, stop.set)
        stopped = await c.wait(stop, 100.0)
        t1 = loop.time()
        with pytest.raises(TimeoutError):
            async with c.timeout(10.0):               # 10 simulated s = 0.5 loop s
                await asyncio.sleep(60)
        return waited, timed_out, stopped, loop.time() - t1

    waited, timed_out, stopped, deadline = run_virtual(main())
    assert waited == pytest.approx(0.2) and not timed_out and stopped
    assert deadline == pytest.approx(0.5)


def test_quiet_now_says_whether_anything_else_can_run_at_this_instant() -> None:
    """The in-process driver skips its settling yields only when alone at an instant."""
    seen: list[tuple[str, bool]] = []
    first: list[tuple[str, bool]] = []

    async def other() -> None:
        seen.append(("other", quiet_now()))

    async def main() -> None:
        await asyncio.sleep(1.0)
        seen.append(("alone", quiet_now()))
        task = asyncio.get_running_loop().create_task(other())
        seen.append(("with a task ready", quiet_now()))
        await task
        first.extend(seen)
        seen.clear()

        async def sleeper(name: str) -> None:
            await asyncio.sleep(0.5)
            seen.append((name, quiet_now()))

        # two tasks woken at one instant: the first to run is not alone, the second is
        tasks = [asyncio.get_running_loop().create_task(sleeper(n)) for n in "ab"]
        await asyncio.sleep(1.0)
        await asyncio.gather(*tasks)

    run_virtual(main())
    assert first == [("alone", True), ("with a task ready", False), ("other", True)]
    assert [q for _, q in seen] == [False, True]
    assert asyncio.run(_quiet_on_a_real_loop()) is False


async def _quiet_on_a_real_loop() -> bool:
    return quiet_now()


def test_no_call_site_scales_time_by_hand() -> None:
    """Time scale arithmetic lives in `RunClock`: no module multiplies or divides by a
    `time_scale` (the bug was a wait that had been missed)."""
    root = Path(__file__).resolve().parents[2] / "simulator"
    pattern = re.compile(r"[*/]\s*[\w.()]*time_scale\b|\btime_scale\)?\s*[*/]")
    hits = [f"{p.relative_to(root)}:{i}" for p in root.rglob("*.py")
            if not p.is_relative_to(root / "twin")       # the twin's own simulated clock
            for i, line in enumerate(p.read_text().splitlines(), 1)
            if pattern.search(line)]
    assert hits == []
