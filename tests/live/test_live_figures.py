"""The live figures (`live/figures.py`), pure: whole-run figures equal the summary's for
any rows, rolling windows equal a brute-force computation over the same rows (their
percentiles within a histogram bin), and the pieces a view shows (steady window, ramp
step, server gauges, measured power)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulator.analysis.steady import tokens_in_window
from simulator.analysis.summary import summarize
from simulator.live.figures import (
    HIST_RATIO,
    LiveFigures,
    SteadyPlan,
    hist_bin,
    hist_quantile,
    hist_value,
)
from simulator.records.recorder import turns_frame
from simulator.records.rows import TurnRecord

ERRORS = [None, None, None, "timeout", "cancelled", "context_overflow", "http_5xx"]


@st.composite
def rows(draw: Any, n_max: int = 40) -> list[dict[str, Any]]:
    """Rows as a run journals them: sessions, retries, summaries, probes, failures."""
    out: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, n_max))):
        kind = draw(st.sampled_from(["turn", "turn", "turn", "summary", "probe"]))
        err = draw(st.sampled_from(ERRORS))
        ok = err is None
        t0 = draw(st.floats(0, 200))
        e2e = draw(st.none() | st.floats(0.01, 40)) if not ok else draw(st.floats(0.05, 40))
        ttft = None if e2e is None or not ok else draw(st.floats(0.0, 1.0)) * e2e
        out_tok = draw(st.integers(0, 900)) if ok else None
        reported = draw(st.booleans())
        out.append(TurnRecord(
            run_id="r", session_id=f"s{draw(st.integers(0, 5)):04d}",
            turn_index=draw(st.integers(0, 8)), request_kind=kind,
            attempt=draw(st.integers(1, 3)), started_at=1e9 + t0, started_mono_s=t0,
            context_tokens_est=draw(st.integers(0, 90_000)),
            reusable_prefix_tokens=draw(st.integers(0, 80_000)), max_tokens=1000,
            turn_kind="t", think_time_s=0.0,
            cache_read_tokens=draw(st.integers(0, 50_000)) if reported else None,
            prompt_tokens=draw(st.integers(1, 90_000)) if reported else None,
            output_tokens=out_tok, ttft_s=ttft, e2e_s=e2e,
            compaction=draw(st.sampled_from([None, None, None, "block", "prune"])),
            compaction_tokens_removed=draw(st.integers(0, 9000)),
            error_type=err, ok=ok,
            fact_id=f"s0:f{i}" if kind == "probe" else None,
            fact_retained="verbatim" if kind == "probe" else None,
            probe_correct=draw(st.none() | st.booleans()) if kind == "probe" else None,
        ).to_row())
    return out


RUN_KEYS = ("sessions", "requests", "ok_turns", "failed_requests", "cancelled_requests",
            "summary_requests", "output_tokens", "wall_window_s", "aggregate_tok_s",
            "ttft_p50_s", "ttft_p95_s", "compaction_events", "compactions_by_kind",
            "errors_by_type", "server_cache_read_share", "client_reusable_share",
            "probe_requests", "probes_answered", "probe_recall")


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is None and b is None
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return bool(a == b)


@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")  # a row's repr
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows())
@pytest.mark.slow
def test_whole_run_figures_equal_the_summary_s_for_any_rows(rs: list[dict[str, Any]]) -> None:
    live = LiveFigures()
    for r in rs:
        live.add_row(r)
    mine = live.run_figures().as_summary()
    theirs = summarize(turns_frame(rs), price_per_hour=None, simulated=True)
    for key in RUN_KEYS:
        assert _same(mine[key], theirs[key]), (key, mine[key], theirs[key])


@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows(60), st.integers(5, 260), st.sampled_from([30.0, 300.0]))
def test_a_rolling_window_equals_brute_force_over_its_rows(
        rs: list[dict[str, Any]], now: int, span: float) -> None:
    """Tokens, busy time, requests and cache shares of (now − span, now] as computed
    from all rows at once; percentiles within one bin of the nearest-rank value."""
    live = LiveFigures()
    for r in rs:
        live.add_row(r)
    w = live.window(float(now), span)
    lo = max(0.0, now - span)
    df = turns_frame(rs)
    ok = df[df["ok"].astype(bool) & (df["request_kind"] != "probe")]
    tok = float(tokens_in_window(ok, lo, float(now)).sum())
    sent = ok["started_mono_s"].to_numpy(float)
    end = sent + ok["e2e_s"].fillna(0.0).to_numpy(float)
    busy = float(np.clip(np.minimum(end, now) - np.maximum(sent, lo), 0, None).sum())
    assert w.span_s == pytest.approx(now - lo)
    if w.aggregate_tok_s is not None:
        assert w.aggregate_tok_s * w.span_s == pytest.approx(tok, rel=1e-6, abs=1e-6)
    else:
        assert tok == pytest.approx(0.0, abs=1e-9)
    if busy > 0:
        assert w.concurrency is not None and w.concurrency * w.span_s == pytest.approx(
            busy, rel=1e-6)
    # requests by their end in (lo, now] (from 0 inclusive at the run's start)
    ended = ((end > lo) | (lo == 0)) & (end <= now)
    fails = df[~df["ok"].astype(bool) & (df["request_kind"] != "probe")
               & ~df["error_type"].isin(["cancelled", "context_overflow"])]
    f_end = fails["started_mono_s"].to_numpy(float) + fails["e2e_s"].fillna(0.0).to_numpy(float)
    f_in = ((f_end > lo) | (lo == 0)) & (f_end <= now)
    assert w.requests == int(ended.sum()) + int(f_in.sum())
    turn = ok[ok["request_kind"] == "turn"]
    first = turn["started_mono_s"] + turn["ttft_s"]
    t = turn["ttft_s"][((first > lo) | (lo == 0)) & (first <= now)].dropna().to_numpy(float)
    if t.size:
        exact = float(np.quantile(t, 0.5, method="inverted_cdf"))
        assert w.ttft_p50_s is not None
        if exact > 1e-4:
            assert w.ttft_p50_s == pytest.approx(exact, rel=HIST_RATIO - 1 + 1e-9)


@given(st.floats(1e-4, 1e4))
def test_a_histogram_bin_holds_its_value_within_its_width(x: float) -> None:
    assert hist_value(hist_bin(x)) == pytest.approx(x, rel=HIST_RATIO - 1)


def test_histogram_quantile_is_the_nearest_rank_bin() -> None:
    counts = np.zeros(2000, dtype=np.int64)
    for v in (0.1, 0.2, 0.3, 0.4, 10.0):
        counts[hist_bin(v)] += 1
    assert hist_quantile(counts, 0.5) == pytest.approx(0.3, rel=0.02)
    assert hist_quantile(counts, 0.95) == pytest.approx(10.0, rel=0.02)
    assert hist_quantile(np.zeros(5, dtype=np.int64), 0.5) is None


def _turn(sid: str, turn: int, t0: float, e2e: float, out: int = 10, **kw: Any) -> dict[str, Any]:
    return TurnRecord("r", sid, turn, "turn", 1, 1e9 + t0, t0, 1000 * (turn + 1), 0, 100,
                      "t", 0.0, output_tokens=out, ttft_s=0.1, e2e_s=e2e, **kw).to_row()


def test_the_steady_window_opens_when_every_session_is_past_its_first_turn() -> None:
    live = LiveFigures(SteadyPlan(sessions=2, turns=3))
    live.add_row(_turn("s0000", 0, 0.0, 2.0))
    assert "not started" in live.steady_state(2.0)
    live.add_row(_turn("s0001", 0, 1.0, 4.0))          # its first reply ends at 5.0
    assert live.steady_state(5.5) == "steady window: open since 5.0 s"
    live.add_row(_turn("s0000", 1, 6.0, 1.0))
    live.add_row(_turn("s0000", 2, 8.0, 2.0))           # s0000's last turn: ends at 10
    assert live.steady_state(11.0) == "steady window: 5.0 → 10.0 s (closed)"
    snap = live.snapshot(11.0)
    assert (snap.sessions_started, snap.sessions_done, snap.sessions_active) == (2, 1, 1)
    assert snap.context_spread == (1000, 1000, 1000, 1000)   # the live session's latest
    assert any("steady-state window opens" in e for e in snap.events)


def test_constant_load_window_and_ramp_step() -> None:
    live = LiveFigures(SteadyPlan(sessions=4, turns=50, duration_s=600, warmup_s=60,
                                  cooldown_s=30))
    live.add_row(_turn("s0000", 0, 0.0, 1.0))
    assert live.steady_state(30) == "steady window: opens at 60.0 s"
    assert live.steady_state(100) == "steady window: open since 60.0 s"
    assert live.steady_state(580) == "steady window: 60.0 → 570.0 s (closed)"
    ramp = LiveFigures(SteadyPlan(sessions=8, turns=50, ramp=True))
    ramp.add_event({"event": "ramp_hold", "step": 0, "sessions": 1, "phase": "up", "t_s": 0})
    ramp.add_event({"event": "ramp_step", "sessions": 1, "steady": True, "breached": []})
    ramp.add_event({"event": "ramp_hold", "step": 1, "sessions": 2, "phase": "up",
                    "t_s": 95.5})
    assert ramp.ramp_state() == "ramp step 2: 2 sessions (up) since 95.5 s; judged 1✓"
    assert ramp.steady_state(100) == "steady window: per ramp step"


def test_server_gauges_preemption_window_and_measured_power() -> None:
    live = LiveFigures()
    live.add_row(_turn("s0000", 0, 0.0, 10.0, out=1001))
    base = {"dialect": "vllm", "t_start_s": 0.0, "t_end_s": 5.0}
    live.add_metrics({**base, "metric": "kv_usage", "kind": "gauge", "value": 0.42})
    live.add_metrics({**base, "metric": "preemptions", "kind": "delta", "value": 3.0})
    live.add_metrics({**base, "t_start_s": 5.0, "t_end_s": 10.0, "metric": "preemptions",
                      "kind": "delta", "value": 2.0})
    # a DCGM target: 300 W over the first 4 s, 200 W over the next 6 s → 240 W mean
    g = {"dialect": "dcgm", "source": "gpu:9400/metrics", "kind": "gauge"}
    live.add_metrics({**g, "t_start_s": 0.0, "t_end_s": 4.0, "metric": "gpu_power_w",
                      "value": 300.0})
    live.add_metrics({**g, "t_start_s": 4.0, "t_end_s": 10.0, "metric": "gpu_power_w",
                      "value": 200.0})
    snap = live.snapshot(10.0)
    assert snap.server["kv_usage"] == 0.42 and snap.server["preemptions_total"] == 5.0
    assert snap.windows[0].preemptions == 5.0
    assert snap.energy is not None
    assert snap.energy["gpu_power_mean_w"] == pytest.approx(240.0)
    # 240 W × 10 s = 2400 J = 0.6667 Wh for 1001 tokens → 666.0 Wh per 1M tokens
    assert snap.energy["energy_wh_per_mtok"] == pytest.approx(240 * 10 / 3600 / 1001 * 1e6)
    assert snap.energy["energy_source"] == "measured from gpu:9400/metrics"


def test_failures_and_compactions_become_events_once() -> None:
    live = LiveFigures()
    live.add_row(_turn("s0001", 3, 1.0, 1.0, compaction="block",
                       compaction_tokens_removed=1234))
    live.add_row(_turn("s0001", 3, 2.5, 1.0, compaction="block",     # its retry
                       compaction_tokens_removed=1234))
    live.add_row(TurnRecord("r", "s0002", 4, "turn", 1, 1e9, 5.0, 10, 0, 10, "t", 0.0,
                            e2e_s=0.5, error_type="timeout", ok=False,
                            http_status=504).to_row())
    snap = live.snapshot(10.0)
    assert snap.run.compaction_events == 1 and snap.run.failed_requests == 1
    assert snap.windows[0].failures == {"timeout": 1}
    assert [e.split(" s  ", 1)[1] for e in snap.events] == [
        "s0001 turn 3: block compaction, −1,234 tokens", "s0002 turn 4: timeout (HTTP 504)"]


def test_an_old_row_outside_the_ring_counts_in_the_run_only() -> None:
    live = LiveFigures()
    live.add_row(_turn("s0000", 0, 1000.0, 1.0))
    live.add_row(_turn("s0001", 0, 10.0, 1.0))      # ended long before the ring's reach
    snap = live.snapshot(1001.0)
    assert snap.run.requests == 2 and snap.windows[1].requests == 1


def test_rebuild_replaces_rows_and_keeps_server_state() -> None:
    live = LiveFigures()
    live.add_row(_turn("s0000", 0, 0.0, 1.0))
    live.add_metrics({"t_start_s": 0, "t_end_s": 1, "metric": "kv_usage", "kind": "gauge",
                      "value": 0.1})
    live.rebuild([_turn("s0000", 0, 0.0, 1.0), _turn("s0000", 1, 2.0, 1.0)])
    assert live.run_figures().requests == 2 and live.snapshot(3.0).server["kv_usage"] == 0.1


def test_a_frame_of_rows_from_pandas_is_accepted() -> None:
    """Rows read back from parquet carry numpy scalars and NaN for missing values."""
    df = turns_frame([_turn("s0000", 0, 0.0, 1.0)])
    row = df.astype(object).where(pd.notna(df), None).iloc[0].to_dict()
    live = LiveFigures()
    live.add_row(row)
    assert live.run_figures().output_tokens == 10
