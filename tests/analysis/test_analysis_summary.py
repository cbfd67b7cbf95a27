"""Summary maths on hand-made turns tables with answers worked out by hand."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.analysis.steady import config_from_manifest
from simulator.analysis.summary import summarize, summarize_run
from simulator.records.manifest import Manifest
from simulator.records.rows import COLUMNS, TurnRecord
from simulator.report.console import format_summary


def rec(session: str, turn: int, start: float, e2e: float | None, out: int | None, *,
        ttft: float | None = 1.0, ctx: int = 1000, reusable: int = 0, kind: str = "turn",
        ok: bool = True, attempt: int = 1, **kw: Any) -> dict[str, Any]:
    r = TurnRecord(
        run_id="t", session_id=session, turn_index=turn, request_kind=kind,  # type: ignore[arg-type]
        attempt=attempt, started_at=1e9 + start, started_mono_s=start, context_tokens_est=ctx,
        reusable_prefix_tokens=reusable, max_tokens=1000, turn_kind=kind, think_time_s=0.0,
        output_tokens=out, e2e_s=e2e, ttft_s=ttft if ok else None,
        turn_tok_s=(out / e2e) if ok and out and e2e else None, ok=ok, **kw)
    return r.to_row()


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(COLUMNS))


@pytest.fixture
def hand() -> pd.DataFrame:
    return frame([
        rec("s0", 0, 0.0, 10.0, 100, ttft=1.0, ctx=1000, reusable=0),
        rec("s0", 1, 12.0, 10.0, 200, ttft=2.0, ctx=2000, reusable=1000, compaction="block",
            compaction_messages_removed=4, compaction_tokens_removed=500),
        rec("s0", 2, 24.0, None, None, ctx=2500, reusable=2000, ok=False,
            error_type="timeout"),
        rec("s0", 2, 30.0, 5.0, 60, ttft=1.0, ctx=2500, reusable=2000, attempt=2),
        rec("s1", 0, 5.0, 5.0, 100, kind="summary", ctx=4000, reusable=3000),
        rec("s1", 0, 11.0, 4.0, 100, ttft=0.5, ctx=3000, reusable=2000,
            cache_read_tokens=1500, prompt_tokens=3000),
    ])


def test_counts_and_throughput(hand: pd.DataFrame) -> None:
    s = summarize(hand, price_per_hour=1.0, simulated=False)
    assert (s["sessions"], s["ok_turns"], s["requests"]) == (2, 4, 6)
    assert (s["failed_requests"], s["summary_requests"]) == (1, 1)
    assert s["errors_by_type"] == {"timeout": 1}
    assert s["wall_window_s"] == pytest.approx(35.0)          # 0 → 30 + 5
    assert s["output_tokens"] == 560
    assert s["aggregate_tok_s"] == pytest.approx(16.0)        # 560 / 35
    # s0: 360 / 25 = 14.4; s1 (summary counts): 200 / 9
    assert s["per_session_tok_s"] == pytest.approx((14.4 + 200 / 9) / 2)
    assert (s["turn_tok_s_min"], s["turn_tok_s_median"], s["turn_tok_s_max"]) == \
        pytest.approx((10.0, 16.0, 25.0))
    assert s["usd_per_mtok"] == pytest.approx(1.0 / (16.0 * 3600) * 1e6)


def test_thirds_ttft_context(hand: pd.DataFrame) -> None:
    s = summarize(hand, price_per_hour=None, simulated=True)
    # s0 has 3 ok turns: first third = turn 0 (10 tok/s), last = turn 2 (12); s1 too short
    assert s["first_third_tok_s"] == pytest.approx(10.0)
    assert s["last_third_tok_s"] == pytest.approx(12.0)
    assert s["drift_pct"] == pytest.approx(20.0)
    assert s["ttft_p50_s"] == pytest.approx(1.0)
    assert s["ttft_p95_s"] == pytest.approx(1.85)             # linear between 1 and 2
    assert s["context_tokens_first"] == pytest.approx(2000.0)  # mean(1000, 3000)
    assert s["context_tokens_max"] == pytest.approx(3000.0)
    assert s["context_tokens_last"] == pytest.approx(2750.0)   # mean(2500, 3000)
    assert s["usd_per_mtok"] is None and s["simulated"] is True


def test_compaction_and_cache(hand: pd.DataFrame) -> None:
    s = summarize(hand, price_per_hour=None, simulated=False)
    assert s["compaction_events"] == 1
    assert s["compactions_by_kind"] == {"block": 1}
    assert (s["compaction_messages_removed"], s["compaction_tokens_removed"]) == (4, 500)
    assert s["post_compaction_turn_tok_s_median"] == pytest.approx(20.0)
    assert s["other_turn_tok_s_median"] == pytest.approx(12.0)  # median(10, 12, 25)
    assert s["server_cache_read_share"] == pytest.approx(0.5)
    assert s["client_reusable_share"] == pytest.approx(8000 / 12500)
    assert (s["cache_shared_pct"], s["cache_shared_source"]) == (pytest.approx(50.0), "server")
    assert s["kv_usage_peak"] is None and s["preemptions"] is None


def test_server_fields_never_reported_are_none(hand: pd.DataFrame) -> None:
    t = hand.assign(cache_read_tokens=None, prompt_tokens=None)
    s = summarize(t, price_per_hour=None, simulated=False)
    assert s["server_cache_read_share"] is None
    assert s["cache_shared_source"] == "client"
    assert s["cache_shared_pct"] == pytest.approx(100 * 8000 / 12500)


def test_retry_repeating_compaction_label_counts_once() -> None:
    t = frame([
        rec("s0", 0, 0.0, 1.0, 10),
        rec("s0", 1, 2.0, None, None, ok=False, compaction="prune", error_type="overloaded"),
        rec("s0", 1, 3.0, 1.0, 10, attempt=2, compaction="prune"),
    ])
    assert summarize(t, price_per_hour=None, simulated=True)["compaction_events"] == 1


def test_all_failed_gives_none_not_crash() -> None:
    t = frame([rec("s0", 0, 0.0, None, None, ok=False, error_type="auth")])
    s = summarize(t, price_per_hour=0.44, simulated=False)
    assert s["ok_turns"] == 0 and s["aggregate_tok_s"] is None and s["usd_per_mtok"] is None
    assert "n/a" in format_summary(s)


def test_format_summary_flags_simulated(hand: pd.DataFrame) -> None:
    text = format_summary(summarize(hand, price_per_hour=0.44, simulated=True))
    assert "SIMULATED" in text.splitlines()[0]
    assert "16.0" in text  # aggregate tok/s
    real = format_summary(summarize(hand, price_per_hour=None, simulated=False))
    assert "SIMULATED" not in real


def test_wall_window_override(hand: pd.DataFrame) -> None:
    s = summarize(hand, price_per_hour=None, simulated=False, wall_window_s=70.0)
    assert s["aggregate_tok_s"] == pytest.approx(8.0)


@st.composite
def sessions_frames(draw: st.DrawFn) -> pd.DataFrame:
    rows = []
    for s in range(draw(st.integers(1, 4))):
        t = draw(st.floats(0, 50))
        for i in range(draw(st.integers(1, 12))):
            e2e = draw(st.floats(0.05, 30))
            out = draw(st.integers(1, 2000))
            rows.append(rec(f"s{s}", i, t, e2e, out, ttft=min(e2e, 0.5)))
            t += e2e + draw(st.floats(0, 10))
    return frame(rows)


@settings(max_examples=25, deadline=None)
@given(sessions_frames())
def test_properties(t: pd.DataFrame) -> None:
    s = summarize(t, price_per_hour=1.0, simulated=True)
    assert s["turn_tok_s_min"] <= s["turn_tok_s_median"] <= s["turn_tok_s_max"]
    per_session = t.groupby("session_id").apply(
        lambda g: g["output_tokens"].sum() / g["e2e_s"].sum(), include_groups=False)
    # requests of a session do not overlap, so no session beats its own sustained rate
    assert s["aggregate_tok_s"] <= per_session.sum() * (1 + 1e-9)
    for key in ("first_third_tok_s", "last_third_tok_s"):
        if s[key] is not None:
            assert s["turn_tok_s_min"] * (1 - 1e-9) <= s[key] <= s["turn_tok_s_max"] * (1 + 1e-9)
    assert s["usd_per_mtok"] == pytest.approx(1e6 / (s["aggregate_tok_s"] * 3600))


def test_summarize_run_takes_engine_figures_from_saved_summary(hand: pd.DataFrame) -> None:
    manifest = Manifest(price_per_hour=1.0, simulated=True)
    engine = {"kv_usage_peak": 0.3, "preemptions": 2, "kv_capacity_tokens": 450000,
              "prefix_cache_queries": 10, "prefix_cache_hits": 4}
    # the figures come from the engine's counters once, by the same function the run used
    saved = {"kv_usage_peak": 0.9, "preemptions": 7, "engine": engine}
    s = summarize_run(manifest, hand, None, saved)
    assert (s["kv_usage_peak"], s["preemptions"], s["kv_capacity_tokens"]) == (0.3, 2, 450000)
    assert s["server_prefix_cache_hit_share"] == pytest.approx(0.4)
    live = summarize(hand, price_per_hour=1.0, simulated=True, engine_stats=engine,
                     steady=config_from_manifest(manifest, False))
    assert live == s and live["engine"] == engine
    assert s["simulated"] is True and s["usd_per_mtok"] == pytest.approx(1e6 / (16 * 3600))
    assert summarize_run(manifest, hand)["kv_usage_peak"] is None
