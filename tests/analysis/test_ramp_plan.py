"""The stepped ramp as data (`analysis/ramp.py`): its steps, the order it holds them
in (ascend, step back down, confirm; per tier), and a step's transient and window."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.analysis.ramp import (
    RampPlan,
    StepVerdict,
    Tier,
    covers,
    held_steps,
    parse_steps,
    plan_steps,
    read_ramp,
    transient_end,
    verdict_from_dict,
)
from simulator.analysis.search import SloSearch
from simulator.analysis.slo import parse_slo
from simulator.errors import InputError
from simulator.records.rows import COLUMNS

TIER = Tier("SLOs", (parse_slo("per_session_tok_s>=50"),))


def _step(i: int, n: int, phase: str, *passed: bool) -> StepVerdict:
    return StepVerdict(i, n, phase, float(i), 0.0, 1.0, True, None, tuple(passed),
                       tuple(() if p else ("x",) for p in passed))


def _run(plan: RampPlan, passes: Any) -> list[tuple[int, str]]:
    """The (count, phase) sequence the plan holds against a server where tier t
    passes at n when `passes(t, n)`."""
    done: list[StepVerdict] = []
    while (nxt := plan.next_count(done)) is not None:
        n, phase = nxt
        done.append(_step(len(done), n, phase,
                          *(passes(t, n) for t in range(len(plan.tiers)))))
        assert len(done) < 200
    return [(v.sessions, v.phase) for v in done]


def test_steps_are_parsed_in_three_forms_and_bad_ones_refused() -> None:
    assert parse_steps("1,2,4,8") == (1, 2, 4, 8)
    assert parse_steps("1*2..20") == (1, 2, 4, 8, 16, 20)
    assert parse_steps("4+4..14") == (4, 8, 12, 14)
    assert parse_steps("2*2", max_sessions=8) == (2, 4, 8)
    assert plan_steps(1, 1) == (1,)
    for bad in ("", "4,2", "0,1", "1*1..8", "1+0..8", "5*2", "x,y", "1*2..200000"):
        with pytest.raises(InputError, match="--ramp"):
            parse_steps(bad)


def test_a_ramp_without_slos_holds_every_step_once_in_order() -> None:
    assert _run(RampPlan((1, 2, 4)), lambda t, n: True) == [(1, "ramp"), (2, "ramp"),
                                                           (4, "ramp")]


def test_a_ramp_ascends_to_the_first_failure_bisects_back_down_and_confirms() -> None:
    plan = RampPlan((1, 2, 4, 8, 16), (TIER,))
    seq = _run(plan, lambda t, n: n <= 5)
    assert seq == [(1, "ramp"), (2, "ramp"), (4, "ramp"), (8, "ramp"), (6, "refine"),
                   (5, "refine"), (5, "confirm")]
    assert plan.answers([_step(i, n, p, n <= 5) for i, (n, p) in enumerate(seq)]) == [5]


def test_passing_at_the_bound_ends_at_the_bound_and_failing_first_steps_down() -> None:
    plan = RampPlan((4, 8), (TIER,))
    assert _run(plan, lambda t, n: True) == [(4, "ramp"), (8, "ramp"), (8, "confirm")]
    # a ramp started high (from the twin's answer) steps down below its first step
    assert _run(plan, lambda t, n: n <= 1) == [(4, "ramp"), (2, "refine"), (1, "refine"),
                                                (1, "confirm")]
    assert _run(plan, lambda t, n: False) == [(4, "ramp"), (2, "refine"), (1, "refine")]
    no_refine = RampPlan((1, 2, 4, 8), (TIER,), refine=False, confirm=False)
    assert _run(no_refine, lambda t, n: n <= 3) == [(1, "ramp"), (2, "ramp"), (4, "ramp")]


def test_tiers_share_the_ascent_and_each_refines_its_own_boundary() -> None:
    loose, strict = Tier("30 tok/s", TIER.slos), Tier("100 tok/s", TIER.slos)
    plan = RampPlan((1, 2, 4, 8, 16), (loose, strict), confirm=False)
    limits = (11, 3)
    seq = _run(plan, lambda t, n: n <= limits[t])
    counts = [n for n, _ in seq]
    assert counts[:5] == [1, 2, 4, 8, 16]        # the loosest tier's ascent judges both
    assert 3 in counts and 11 in counts and len(counts) == len(set(counts))
    done = [_step(i, n, p, n <= 11, n <= 3) for i, (n, p) in enumerate(seq)]
    assert plan.answers(done) == [11, 3]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 200), min_size=1, max_size=8, unique=True),
       st.integers(0, 210))
def test_the_ramp_answers_as_the_probe_search_over_the_same_steps(steps: list[int],
                                                                  limit: int) -> None:
    """Within one run the ramp reaches the answer the probe search over the same
    steps reaches, and holds no count twice (the confirm hold aside)."""
    steps = sorted(steps)
    plan = RampPlan(tuple(steps), (TIER,))
    seq = _run(plan, lambda t, n: n <= limit)
    held = [n for n, p in seq if p != "confirm"]
    assert len(held) == len(set(held))
    search = SloSearch(max(steps), tuple(steps))
    known: dict[int, bool] = {}
    while (n := search.next_probe(known)) is not None:
        known[n] = n <= limit
    done = [_step(i, n, p, n <= limit) for i, (n, p) in enumerate(seq)]
    assert plan.answers(done) == [search.bounds(known)[0]]


def _rows(*rows: tuple[str, float, float]) -> pd.DataFrame:
    """(session, sent, e2e) rows of ok turns."""
    out = []
    for sid, sent, e2e in rows:
        r: dict[str, Any] = dict.fromkeys(COLUMNS)
        r.update(session_id=sid, started_mono_s=sent, e2e_s=e2e, ok=True,
                 request_kind="turn", turn_index=0, output_tokens=10, ttft_s=0.1)
        out.append(r)
    return pd.DataFrame(out, columns=list(COLUMNS))


def test_a_steps_transient_waits_for_each_slot_and_the_retired_ones() -> None:
    # 4 slots; the step (2 sessions) started at 10 s: slot 0's first request after it
    # ended at 14 s, slot 1's (session s0005 = slot 1, round 1) at 16 s
    rows = _rows(("s0000", 5.0, 3.0), ("s0000", 11.0, 3.0), ("s0005", 12.0, 4.0))
    assert transient_end(rows, 10.0, 2, 4) == 16.0
    assert transient_end(rows, 10.0, 3, 4) is None           # slot 2 not answered yet
    retired = _rows(("s0000", 11.0, 3.0), ("s0005", 12.0, 4.0), ("s0002", 9.0, 20.0))
    assert transient_end(retired, 10.0, 2, 4, retired=[2]) == 29.0   # slot 2's last end
    assert covers(rows, 12.0, 1, 4) is False and covers(rows, 11.0, 2, 4) is True


def test_a_held_step_reads_back_as_the_verdict_it_was_written_from() -> None:
    """The `ramp` fact keeps each step as `StepVerdict.to_dict` plus `held_s`; the report
    reads it back into the same verdict (one definition of a step, no mirror)."""
    v = StepVerdict(2, 8, "ramp", 120.0, 150.0, 180.0, False, "achieved 3.0 of 8", (True, False),
                    ((), ("ttft_p95_s<=2",)))
    fact = {"steps": [{**v.to_dict(), "held_s": 60.0}, {**v.to_dict(), "held_s": None}]}
    assert held_steps(read_ramp(fact)) == [(v, 60.0), (v, None)]


def test_a_step_this_tool_did_not_write_is_refused_in_one_line() -> None:
    d = _step(0, 1, "ramp", True).to_dict()
    del d["started_s"], d["steady"]
    with pytest.raises(InputError, match="a ramp step without started_s, steady") as err:
        verdict_from_dict(d)
    assert "\n" not in str(err.value)
