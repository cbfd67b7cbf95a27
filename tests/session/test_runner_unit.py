"""Runner on the virtual-time loop with a scripted endpoint and an in-memory recorder:
arrivals, session failures, the failed-sessions limit and the deadline."""

from __future__ import annotations

from typing import Any

import pytest

from simulator.clock.virtual import run_virtual
from simulator.endpoints.base import ErrorType
from simulator.endpoints.fake import FakeEndpoint
from simulator.scenario.model import Scenario
from simulator.session.runner import Runner, RunOutcome, arrival_offsets
from tests.conftest import small_scenario
from tests.session.test_agent_unit import MemoryRecorder


def scenario(**over: Any) -> Scenario:
    return Scenario.model_validate(small_scenario(compaction={"kind": "none"}, **over))


def run(s: Scenario, endpoint: FakeEndpoint) -> tuple[RunOutcome, MemoryRecorder]:
    rec = MemoryRecorder()
    runner = Runner(s, endpoint, rec, "r")  # type: ignore[arg-type]
    return run_virtual(runner.run()), rec


def test_every_session_runs_its_turns() -> None:
    outcome, rec = run(scenario(sessions=3, turns=4), FakeEndpoint())
    assert outcome.status == "completed" and not outcome.failed_sessions
    per = {sid: sorted(r.turn_index for r in rec.rows if r.session_id == sid)
           for sid in ("s0000", "s0001", "s0002")}
    assert all(turns == [0, 1, 2, 3] for turns in per.values())
    assert outcome.wall_window_s > 0


def test_ramp_arrivals_start_sessions_apart() -> None:
    s = scenario(sessions=3, turns=2, arrival={"pattern": "ramp", "interval_s": 50.0})
    assert arrival_offsets(s) == [0.0, 50.0, 100.0]
    _, rec = run(s, FakeEndpoint())
    first = {r.session_id: r.started_mono_s for r in rec.rows if r.turn_index == 0}
    assert [first[f"s000{i}"] for i in range(3)] == [pytest.approx(50.0 * i) for i in range(3)]


def test_poisson_arrivals_are_seeded() -> None:
    s = scenario(sessions=5, arrival={"pattern": "poisson", "rate_per_s": 0.1})
    assert arrival_offsets(s) == arrival_offsets(s)
    assert arrival_offsets(s) != arrival_offsets(s.model_copy(update={"seed": 4}))


def test_a_failed_session_is_named_and_the_others_finish() -> None:
    s = scenario(sessions=3, turns=3, retry={"max_attempts": 1},
                 limits={"max_failed_sessions_frac": 0.5})
    outcome, rec = run(s, FakeEndpoint(faults=[ErrorType.SERVER]))
    assert outcome.status == "completed" and len(outcome.failed_sessions) == 1
    assert {"session": outcome.failed_sessions[0]}.items() <= next(
        h for h in rec.history if "failed" in h).items()
    assert sum(r.ok for r in rec.rows) == 2 * 3


def test_too_many_failed_sessions_fail_the_run() -> None:
    s = scenario(sessions=2, turns=3, retry={"max_attempts": 1},
                 limits={"max_failed_sessions_frac": 0.4})
    outcome, _ = run(s, FakeEndpoint(faults=[ErrorType.SERVER]))
    assert outcome.status == "failed" and outcome.failed_sessions


def test_an_auth_error_stops_the_run() -> None:
    outcome, rec = run(scenario(sessions=2, turns=5), FakeEndpoint(faults=[ErrorType.AUTH]))
    assert outcome.status == "failed" and "auth" in outcome.reason
    assert len(rec.rows) < 10


def test_the_deadline_stops_the_run_in_virtual_time() -> None:
    s = scenario(sessions=1, turns=1000, think_time_s=10.0, deadline_s=100.0)
    outcome, rec = run(s, FakeEndpoint())
    assert outcome.deadline_reached and "deadline" in outcome.reason
    assert 0 < len(rec.rows) < 1000
    assert outcome.wall_window_s == pytest.approx(100.0, abs=1.0)


@pytest.mark.parametrize("wait_for_baseline", [True, False])
def test_the_first_request_waits_for_the_metrics_baseline(wait_for_baseline: bool) -> None:
    """A request the server counted before the scraper's first scrape is in the baseline
    and in no window (a loaded machine's vLLM run lost its first prompt that way): the
    sessions start once the baseline is taken, so the windows hold every request."""
    import asyncio

    from simulator.records.prometheus import MetricsScraper
    endpoint = FakeEndpoint()
    rows: list[dict[str, Any]] = []

    async def fetch(url: str) -> tuple[int, str]:
        await asyncio.sleep(0.5)          # the server reads its counters late
        return 200, ("# TYPE vllm:prompt_tokens counter\n"
                     f'vllm:prompt_tokens_total{{engine="0"}} {100 * len(endpoint.requests)}\n')

    scraper = MetricsScraper("http://x/metrics", 1.0, rows.extend, fetch=fetch)
    runner = Runner(scenario(sessions=2, turns=2), endpoint, MemoryRecorder(),  # type: ignore[arg-type]
                    "r", background=[scraper.run], on_finish=[scraper.stop],
                    on_start=[scraper.ready] if wait_for_baseline else None)
    assert run_virtual(runner.run()).status == "completed" and len(endpoint.requests) == 4
    windows = sum(r["value"] for r in rows if r["metric"] == "prompt_tokens")
    assert (windows == 400) is wait_for_baseline


class _Spinning(FakeEndpoint):
    """An endpoint whose reply never ends and whose work never lets virtual time move
    (always a callback ready): it sends the process a SIGTERM once it has the request."""

    async def send(self, request: Any) -> Any:
        import asyncio
        import os
        import signal
        os.kill(os.getpid(), signal.SIGTERM)
        while True:     # noqa: ASYNC110 - the point: busy at one virtual instant
            await asyncio.sleep(0)


def test_the_stop_grace_is_wall_time_when_virtual_time_stands_still() -> None:
    """A SIGTERM during a request that keeps the loop busy at one virtual instant: the
    grace (0.2 s) ends in wall time and cancels it, with no second signal. The watchdog's
    second SIGTERM (at 20 s) only bounds the test when the grace never ends."""
    import os
    import signal
    import threading
    rescued = threading.Event()

    def watchdog() -> None:
        rescued.set()
        os.kill(os.getpid(), signal.SIGTERM)

    runner = Runner(scenario(sessions=1, turns=2), _Spinning(), MemoryRecorder(),  # type: ignore[arg-type]
                    "r", stop_grace_s=0.2)
    timer = threading.Timer(20.0, watchdog)
    timer.start()
    try:
        outcome = run_virtual(runner.run())
    finally:
        timer.cancel()
    assert outcome.status == "interrupted" and "after grace" in outcome.reason
    assert not rescued.is_set()
