"""Truthful counts (issue 38 item 5): over compaction policies and context windows,
a probe's `fact_compactions_crossed` is the number of turns, since its fact entered the
context, whose rows record a compaction — the policy's or one an overflow forced — and
a fact probed as `dropped` crossed at least one.

Before: when a context overflow forced a compaction (`overflow:<policy>` on the retry
row), the probes of the facts it dropped reported `fact_compactions_crossed = 0`
(300 turns of the recall scenario with `compaction.kind=none`: 21 such probes)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.endpoints.fake import FakeEndpoint
from simulator.records.rows import TurnRecord
from simulator.scenario.model import Scenario
from simulator.session.recall import entered_turn
from tests.conftest import small_scenario
from tests.session.test_agent_unit import run_agent

PROBES = {"facts": 6, "kinds": ["user_value", "tool_value", "decision", "edited_path"],
          "plant_between": [0.0, 0.5], "every_turns": 4, "after_compaction": True,
          "at_end": True}


def policies(window: int) -> st.SearchStrategy[dict[str, Any]]:
    """Every policy, its thresholds drawn around the window (some above it: the
    overflow forces what the policy did not)."""
    t = st.integers(window // 3, window * 2)
    return st.one_of(
        st.just({"kind": "none"}),
        t.map(lambda b: {"kind": "prune", "budget_tokens": b}),
        t.map(lambda h: {"kind": "block", "high_water_tokens": h,
                         "low_water_tokens": h * 2 // 3}),
        # a summary request that overflows fails its session (only turns are forced):
        # summarize below half the window
        st.integers(window // 4, window // 2).map(
            lambda h: {"kind": "summarize", "threshold_tokens": h, "summary_max_tokens": 80,
                       "keep_messages": 2}),
        t.map(lambda h: {"kind": "clear_tool_results", "trigger_tokens": h, "keep_last": 1}))


def compacted_turns(rows: list[TurnRecord]) -> set[int]:
    """Turns whose turn or summary rows record a compaction (policy or forced)."""
    return {r.turn_index for r in rows if r.request_kind in ("turn", "summary")
            and r.compaction is not None}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(3000, 12000).flatmap(
    lambda w: st.tuples(st.just(w), policies(w), st.integers(0, 2**16))))
@pytest.mark.slow
def test_crossed_compactions_agree_with_the_events_and_retention(
        case: tuple[int, dict[str, Any], int]) -> None:
    window, policy, seed = case
    s = Scenario.model_validate(small_scenario(
        turns=30, seed=seed, context_window_tokens=window, compaction=policy,
        probes=PROBES, retry={"max_attempts": 8}))
    _, rec, _ = run_agent(s, FakeEndpoint(context_window=window))
    compacted = compacted_turns(rec.rows)
    probes = [r for r in rec.rows if r.request_kind == "probe"]
    for p in probes:
        assert p.fact_kind is not None and p.fact_turn is not None
        first = entered_turn(p.fact_kind, p.fact_turn)   # type: ignore[arg-type]
        want = sum(1 for t in compacted if first <= t <= p.turn_index)
        assert p.fact_compactions_crossed == want, (policy, window, p)
        if p.fact_retained == "dropped":
            assert want >= 1, (policy, window, p)


def test_an_overflow_forced_compaction_is_crossed() -> None:
    """The issue's case, small: no policy, a window the session outgrows."""
    s = Scenario.model_validate(small_scenario(
        turns=30, context_window_tokens=3500, compaction={"kind": "none"}, probes=PROBES,
        retry={"max_attempts": 8}))
    _, rec, _ = run_agent(s, FakeEndpoint(context_window=3500))
    forced = {r.turn_index for r in rec.rows if str(r.compaction).startswith("overflow")}
    assert forced
    dropped = [r for r in rec.rows if r.request_kind == "probe" and r.fact_retained == "dropped"]
    assert dropped and all((r.fact_compactions_crossed or 0) >= 1 for r in dropped)
