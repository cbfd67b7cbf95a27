"""A probe's verdict decided early (`analysis.early_verdict`, issue 58): whenever the
rule says FAIL on the rows answered so far, the whole run's figures — the summary's
own computation over every row, in any order the rows could come — fail that SLO too;
and it does decide a run that is plainly broken long before its end."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.analysis.early_verdict import EarlyRule, bound, decided_failure
from simulator.analysis.slo import Slo, parse_slo
from simulator.analysis.summary import summarize
from simulator.records.recorder import turns_frame
from simulator.records.rows import TurnRecord

SLOS = (parse_slo("ttft_p95_s<=3"), parse_slo("decode_tok_s_median>=40"),
        parse_slo("ttft_p50_s<=1"), parse_slo("turn_tok_s_median>=20"))


def _row(i: int, ttft: float | None, decode: float | None, *, ok: bool = True,
         turn: int = 0) -> dict[str, Any]:
    return TurnRecord("r", f"s{i}", turn, "turn", 1, 0.0, float(i), 100, 0, 10, "t", 0.0,
                      output_tokens=10, ttft_s=ttft, decode_tok_s=decode,
                      turn_tok_s=decode, e2e_s=1.0, ok=ok).to_row()


def _full_fails(rows: list[dict[str, Any]], slo: Slo) -> bool:
    """The whole run's verdict as the summary computes it from its rows."""
    figures = summarize(turns_frame(rows), price_per_hour=None, simulated=True)
    return not slo.check(figures)


values = st.one_of(st.none(), st.floats(0.0, 200.0, allow_nan=False))
runs = st.lists(st.tuples(values, values, st.booleans()), min_size=1, max_size=60)


@settings(max_examples=300, deadline=None)
@given(runs, st.integers(0, len(SLOS) - 1), st.randoms(use_true_random=False))
def test_a_decided_failure_is_the_full_runs_failure(run: list[tuple[float | None,
                                                                    float | None, bool]],
                                                     k: int, rnd: Any) -> None:
    slo = SLOS[k]
    rows = [_row(i, t, d, ok=ok) for i, (t, d, ok) in enumerate(run)]
    order = list(range(len(rows)))
    rnd.shuffle(order)
    verdict = EarlyRule((slo,), len(rows), every=1).verdict()
    for n, i in enumerate(order):
        if verdict.feed(rows[i]) is not None:
            assert _full_fails(rows, slo), (verdict.decided, n)
            break


def test_a_plainly_broken_run_is_decided_early() -> None:
    rule = EarlyRule((parse_slo("ttft_p95_s<=3"),), 1000, every=1)
    verdict = rule.verdict()
    got = [verdict.feed(_row(i, 10.0, 50.0)) for i in range(100)]
    first = next(i for i, g in enumerate(got) if g is not None)
    assert first + 1 == 51          # p95 of 1,000 needs the top 50 below 3 s: 51 above
    assert got[-1] is not None and got[-1].startswith("ttft_p95_s<=3 fails")


def test_lead_in_rows_are_not_judged_and_a_request_answered_twice_stops_it() -> None:
    rule = EarlyRule((parse_slo("ttft_p95_s<=3"),), 4, lead=(2, 0), every=1)
    verdict = rule.verdict()
    assert verdict.feed(_row(0, 50.0, 1.0, turn=1)) is None    # s0 turn 1: lead-in
    assert verdict.known == {}
    assert verdict.feed(_row(1, 50.0, 1.0)) is None            # s1: judged; 3 to come
    assert verdict.feed(_row(1, 50.0, 1.0)) is None            # the same request again
    assert all(verdict.feed(_row(3, 50.0, 1.0, turn=t)) is None for t in range(4))


def test_nothing_is_decided_without_a_quantile_slo_or_with_it_met_so_far() -> None:
    assert decided_failure((parse_slo("aggregate_tok_s>=1e9"),), {"ttft_s": [1.0]}, 0) is None
    assert decided_failure((parse_slo("ttft_p95_s<=3"),), {"ttft_s": [1.0] * 50}, 50) is None
    assert bound(parse_slo("ttft_p95_s<=3"), [], 10) is None
    assert decided_failure((parse_slo("ttft_p95_s<=3"),), {"ttft_s": [9.0] * 5}, 0) \
        is not None
