"""Agent on the virtual-time loop with a scripted endpoint and an in-memory recorder:
its turn loop, retries and records, without a runner, results directory or server."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from simulator.clock import RunClock
from simulator.clock.virtual import run_virtual
from simulator.endpoints.base import ErrorType
from simulator.endpoints.fake import FakeEndpoint
from simulator.records.prefix import PrefixTracker
from simulator.records.rows import TurnRecord
from simulator.scenario.model import Scenario
from simulator.session.agent import Agent
from simulator.session.context import FatalEndpointError, RunContext, SessionFailed
from simulator.session.conversation import validate_structure
from simulator.session.limiter import Limiter
from simulator.session.prefix import build_base_prefix, tools_json
from tests.conftest import small_scenario


class MemoryRecorder:
    """What an agent writes, kept in lists (the recorder's write API, no files)."""

    def __init__(self) -> None:
        self.rows: list[TurnRecord] = []
        self.history: list[dict[str, Any]] = []

    def write(self, record: TurnRecord) -> None:
        self.rows.append(record)

    def write_history(self, row: dict[str, Any]) -> None:
        self.history.append(row)

    def write_success(self, history_row: dict[str, Any], record: TurnRecord) -> None:
        self.write_history(history_row)
        self.write(record)

    def write_metrics(self, row: dict[str, Any]) -> None:
        raise AssertionError("an agent writes no server metrics")


def scenario(**over: Any) -> Scenario:
    data = small_scenario(**over)
    return Scenario.model_validate(data)


def run_agent(s: Scenario, endpoint: FakeEndpoint) -> tuple[Agent, MemoryRecorder, float]:
    """Run one agent to its end on a virtual loop: (agent, recorder, virtual seconds)."""
    rec = MemoryRecorder()

    async def main() -> tuple[Agent, float]:
        clock = RunClock()
        base = build_base_prefix(s)
        ctx = RunContext("r", s, endpoint, rec, PrefixTracker(), clock,  # type: ignore[arg-type]
                         Limiter(None, None), base, tools_json(base), asyncio.Event(),
                         clock.monotonic())
        agent = Agent(ctx, 0, base)
        await agent.run()
        return agent, clock.monotonic() - ctx.t0

    agent, elapsed = run_virtual(main())
    return agent, rec, elapsed


def test_each_turn_is_one_request_and_one_record() -> None:
    s = scenario(turns=6, compaction={"kind": "none"})
    agent, rec, _ = run_agent(s, FakeEndpoint())
    assert [r.turn_index for r in rec.rows] == list(range(6))
    assert all(r.ok and r.attempt == 1 and r.request_kind == "turn" for r in rec.rows)
    assert [h["turn"] for h in rec.history] == list(range(6))
    assert validate_structure(agent.conv.messages) is None
    # the context only grows without compaction, and what was sent before is reusable
    ctx = [r.context_tokens_est for r in rec.rows]
    assert ctx == sorted(ctx) and rec.rows[-1].reusable_prefix_tokens > 0


def test_think_time_and_tool_latency_pass_in_virtual_time() -> None:
    answer = {"name": "answer", "weight": 1, "output_tokens": 50}
    read = {"name": "read", "weight": 1, "output_tokens": 50,
            "tool": {"kind": "read", "result_tokens": 50, "latency_s": 7.0}}
    fast = FakeEndpoint(ttft_s=0.0, tok_s=1e12)
    for template, gap in ((answer, 30.0), (read, 7.0)):   # think time, else tool latency
        s = scenario(turns=4, think_time_s=30.0, turn_templates=[template],
                     compaction={"kind": "none"})
        _, rec, elapsed = run_agent(s, fast)
        starts = [r.started_mono_s for r in rec.rows]
        assert [b - a for a, b in itertools.pairwise(starts)] == [pytest.approx(gap)] * 3
        assert elapsed == pytest.approx(3 * gap, abs=1e-3)


def test_retryable_errors_are_retried_and_every_attempt_recorded() -> None:
    s = scenario(turns=2, compaction={"kind": "none"},
                 retry={"max_attempts": 3, "backoff_s": 2.0, "jitter": 0.0})
    fake = FakeEndpoint(faults=[ErrorType.OVERLOADED, ErrorType.RATE_LIMITED])
    _, rec, _ = run_agent(s, fake)
    first = [r for r in rec.rows if r.turn_index == 0]
    assert [(r.attempt, r.ok, r.error_type) for r in first] == [
        (1, False, "overloaded"), (2, False, "rate_limited"), (3, True, None)]
    # backoff doubles: 2 s, then 4 s after the sends' own 0.05 s
    gaps = [b.started_mono_s - a.started_mono_s for a, b in itertools.pairwise(first)]
    assert gaps == [pytest.approx(2.05), pytest.approx(4.05)]


def test_a_session_fails_after_its_last_attempt() -> None:
    s = scenario(turns=3, compaction={"kind": "none"}, retry={"max_attempts": 2})
    with pytest.raises(SessionFailed, match="after 2 attempt"):
        run_agent(s, FakeEndpoint(faults=[ErrorType.SERVER, ErrorType.SERVER]))


def test_an_auth_error_is_fatal_for_the_run() -> None:
    s = scenario(turns=3, compaction={"kind": "none"})
    with pytest.raises(FatalEndpointError, match="auth"):
        run_agent(s, FakeEndpoint(faults=[ErrorType.AUTH]))


def test_context_overflow_forces_a_compaction_instead_of_failing() -> None:
    s = scenario(turns=12, context_window_tokens=3000, compaction={"kind": "block",
                 "high_water_tokens": 100_000, "low_water_tokens": 50_000})
    agent, rec, _ = run_agent(s, FakeEndpoint(context_window=3000))
    overflow = [r for r in rec.rows if r.error_type == "context_overflow"]
    assert overflow and all(r.ok for r in rec.rows if r.attempt > 1 and r.turn_index ==
                            overflow[0].turn_index)
    assert any(r.compaction for r in rec.rows)
    assert validate_structure(agent.conv.messages) is None
