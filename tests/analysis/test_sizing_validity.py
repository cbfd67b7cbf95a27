"""Queueing as a binding constraint, the saturation gate and schedule lag (issue 12,
second pass): pure functions on synthetic rows, then short runs on the twin."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from simulator.analysis.queueing import queue_figures, queue_share
from simulator.analysis.steady import (
    SteadyConfig,
    Window,
    saturation,
    slope_test,
    steady_figures,
    t_critical,
)
from simulator.analysis.summary import server_figures
from simulator.records.prometheus import parse_metrics, window_rows
from simulator.report.console import format_sweep_table
from simulator.run.execute import execute
from simulator.run.spec import RunSpec
from tests.sweep.toy import size, sweep

ROOT = Path(__file__).resolve().parents[2]
TEAM = str(ROOT / "scenarios" / "claude-code-team.yaml")


def _server(n: int, *, queue_share: float, preemptions: int = 0) -> dict[str, Any]:
    """TTFT grows with n; `queue_share` of it is queue wait."""
    return {"requested_sessions": n, "window_per_session_tok_s": 100.0,
            "window_ttft_p95_s": 0.5 * n,
            "window_queue_share_of_ttft": queue_share, "preemptions": preemptions,
            "simulated": True}


@pytest.mark.parametrize(("share", "pre", "kind"), [
    (0.8, 0, "queueing"), (0.2, 0, "latency"), (0.8, 3, "kv_capacity")])
def test_ttft_failing_from_queue_wait_is_named_queueing(share: float, pre: int,
                                                        kind: str) -> None:
    res, _ = size(lambda n, k: _server(n, queue_share=share, preemptions=pre),
                  ["ttft_p95_s<=3"], 32)
    assert res.sessions == 6 and res.binding_kind == kind
    if kind == "queueing":
        assert res.binding == "ttft_p95_s<=3 (queue wait 80% of TTFT)"
    if kind == "kv_capacity":    # KV pressure is why requests queue: named first
        assert res.binding == "ttft_p95_s<=3 (with 3 preemptions; queue wait 80% of TTFT)"


def test_queue_share_and_figures_from_rows() -> None:
    q = np.array([1.0, 3.0, np.nan, 0.0])
    t = np.array([2.0, 4.0, 5.0, np.nan])
    assert queue_share(q, t) == pytest.approx(4.0 / 6.0)
    assert queue_share(np.full(2, np.nan), np.ones(2)) is None
    rows = pd.DataFrame({"queue_s": [None, None], "ttft_s": [1.0, 3.0]})
    # no per-row queue times: the server histogram's mean over the mean TTFT
    assert queue_figures(rows, 1.0)["queue_share_of_ttft"] == pytest.approx(0.5)
    assert queue_figures(rows, None)["queue_share_of_ttft"] is None


def test_vllm_queue_time_histogram_gives_a_windowed_mean() -> None:
    def text(total: float, count: int) -> str:
        return ("# TYPE vllm:request_queue_time_seconds histogram\n"
                f'vllm:request_queue_time_seconds_bucket{{le="+Inf"}} {count}\n'
                f"vllm:request_queue_time_seconds_sum {total}\n"
                f"vllm:request_queue_time_seconds_count {count}\n"
                "# TYPE vllm:num_preemptions_total counter\n"
                "vllm:num_preemptions_total 0\n")
    before, after = parse_metrics(text(100.0, 50)), parse_metrics(text(112.0, 58))
    rows = window_rows(before, after, 0.0, 5.0)
    figs = server_figures(pd.DataFrame(rows))
    assert figs["server_queue_time_mean_s"] == pytest.approx(12.0 / 8)   # not 112 / 58


def _run(tmp: Path, scenario: str, *overrides: str) -> dict[str, Any]:
    res = execute(RunSpec(scenario, list(overrides), out_dir=tmp, show_progress=False),
                  echo=lambda s: None)
    assert res.status == "completed", res.outcome.reason
    out: dict[str, Any] = dict(res.summary) | {"run_dir": res.run_dir}
    return out


def test_twin_rows_carry_queue_wait_within_ttft(tmp_path: Path) -> None:
    s = _run(tmp_path, TEAM, "sessions=24", "turns=3", "think_time_s=0",
             "arrival.pattern=all_at_once", "twin.kv_cache_gib=3")
    t = pd.read_parquet(s["run_dir"] / "turns.parquet")
    ok = t[t["ok"] & (t["request_kind"] == "turn")]
    assert ok["queue_s"].notna().all()
    assert (ok["queue_s"] >= 0).all() and (ok["queue_s"] <= ok["ttft_s"] + 1e-9).all()
    assert s["queue_time_p95_s"] > 0 and 0 < s["queue_share_of_ttft"] <= 1


def _stream(n: int, e2e: Any, ttft: Any) -> pd.DataFrame:
    """One request sent per second for n seconds, request i lasting e2e(i), TTFT ttft(i)."""
    return pd.DataFrame([{"session_id": f"s{i:04d}", "turn_index": 0, "request_kind": "turn",
                          "ok": True, "started_mono_s": float(i), "ttft_s": ttft(i),
                          "e2e_s": e2e(i), "output_tokens": 100, "think_time_s": 0.0}
                         for i in range(n)])


def test_t_critical_matches_tables() -> None:
    for df, exact in ((3, 2.353), (5, 2.015), (10, 1.812), (30, 1.697), (1000, 1.646)):
        assert t_critical(df) == pytest.approx(exact, rel=0.02 if df < 5 else 0.005)


def test_slope_test_recovers_a_trend() -> None:
    rng = np.random.default_rng(1)
    x = np.arange(100.0)
    res = slope_test(x, 0.5 * x + rng.normal(0, 1, 100))
    assert res is not None and res[0] == pytest.approx(0.5, abs=0.02) and res[1] > 50
    assert slope_test(np.ones(5), x[:5]) is None and slope_test(x[:2], x[:2]) is None


def test_saturation_gate_fires_only_when_ttft_and_in_flight_both_rise() -> None:
    rng = np.random.default_rng(7)
    noise = rng.normal(0, 0.3, 200)
    w = Window(20.0, 180.0)
    steady = saturation(_stream(200, lambda i: 5.0, lambda i: 3.0 + noise[i]), w)
    assert steady["saturated"] is False and steady["saturated_reason"] is None
    assert steady["window_in_flight_slope"] == pytest.approx(0.0)
    growing = saturation(_stream(200, lambda i: 5.0 + 0.1 * i,
                                 lambda i: 2.0 + 0.05 * i + noise[i]), w)
    assert growing["saturated"] is True
    assert growing["saturated_reason"].startswith("saturated: TTFT rising")
    assert growing["window_ttft_slope"] == pytest.approx(0.05, rel=0.2)
    assert growing["window_in_flight_slope"] > 0
    # TTFT rising but in-flight flat (e.g. contexts growing): not saturation
    ttft_only = saturation(_stream(200, lambda i: 5.0, lambda i: 2.0 + 0.05 * i + noise[i]), w)
    assert ttft_only["saturated"] is False
    # … unless in-flight is pinned at the closed loop's cap: every active session waits
    # (5 requests of 5 s sent per second: 5 in flight, 5 sessions active)
    flat = _stream(200, lambda i: 5.0, lambda i: 2.0 + 0.05 * i + noise[i])
    pinned = saturation(flat, w, active_sessions=5.0)
    assert pinned["saturated"] is True and "pinned at the sessions" in pinned["saturated_reason"]
    assert saturation(flat, w, active_sessions=10.0)["saturated"] is False
    # both rising, but TTFT far below the 2.5 s floor: not saturation either
    small = saturation(_stream(200, lambda i: 0.5 + 0.01 * i,
                               lambda i: 0.01 + 0.001 * i), w)
    assert small["saturated"] is False
    short = saturation(_stream(200, lambda i: 5.0, lambda i: 3.0), Window(20.0, 40.0))
    assert short["saturated"] is None and "not tested" in short["saturated_reason"]


def test_steady_figures_mark_a_saturated_window_not_steady() -> None:
    turns = _stream(200, lambda i: 5.0 + 0.1 * i, lambda i: 2.0 + 0.05 * i)
    s = steady_figures(turns, SteadyConfig(requested_sessions=1, duration_s=200.0,
                                           warmup_s=20.0))
    assert s["saturated"] is True and s["steady_state"] is False
    assert s["steady_state_reason"].startswith("saturated:")


def test_a_saturated_probe_never_passes_and_is_named() -> None:
    def run(n: int, k: int) -> dict[str, Any]:
        out = _server(n, queue_share=0.0)
        if n > 4:      # SLO figures still pass, but the backlog was growing
            out |= {"saturated": True, "steady_state": False,
                    "saturated_reason": "saturated: TTFT rising",
                    "steady_state_reason": "saturated: TTFT rising"}
        return out

    res, _ = size(run, ["ttft_p95_s<=100"], 64)
    assert res.sessions == 4 and res.binding_kind == "saturated"
    rows = sweep(run, (4, 8))
    assert rows[1]["saturated"] is True
    assert "SATURATED at 8 sessions" in format_sweep_table(rows)


def test_schedule_lag_shows_the_client_limiter_and_rates_sit_beside_latency(
        tmp_path: Path) -> None:
    """8 sessions, no think time, at most 2 requests in flight: the other sessions'
    turns are sent late (schedule lag); without the limit nothing is late."""
    capped = _run(tmp_path, TEAM, "sessions=8", "turns=3", "think_time_s=0",
                  "arrival.pattern=all_at_once", "limits.max_in_flight=2")
    t = pd.read_parquet(capped["run_dir"] / "turns.parquet")
    assert t["schedule_lag_s"].notna().all() and (t["schedule_lag_s"] >= 0).all()
    assert capped["schedule_lag_p95_s"] > 1.0
    free = _run(tmp_path, TEAM, "sessions=8", "turns=3", "think_time_s=0",
                "arrival.pattern=all_at_once")
    assert free["schedule_lag_max_s"] == pytest.approx(0.0, abs=1e-6)
    for s in (capped, free):
        assert s["turns_per_s"] == pytest.approx(s["ok_turns"] / s["wall_window_s"])
    assert capped["turns_per_s"] < free["turns_per_s"]


def test_progress_bar_counts_the_duration_not_turns_under_constant_load() -> None:
    import asyncio

    from simulator.clock.virtual import run_virtual
    from simulator.run.drive import ProgressBar, progress_total
    from simulator.scenario.load import load_scenario

    bar = ProgressBar(0, True, duration_s=100.0)
    with bar as advance:
        async def main() -> None:
            bar.start_clock()
            await asyncio.sleep(40.0)       # virtual seconds
            advance(7)
        run_virtual(main())
        task = bar._bar.tasks[0]
        assert task.total == 100.0 and task.completed == pytest.approx(40.0)
        assert task.fields == {"tok": 7, "turns": 1}
    s, _ = load_scenario(TEAM, ["sessions=6", "turns=10"])
    assert progress_total(s) == 60
    warm, _ = load_scenario(TEAM, ["sessions=6", "turns=10", "load.warm_start=true"])
    assert 6 <= progress_total(warm) < 60      # skipped turns are never sent


async def test_http_twin_exposes_vllm_queue_time_histogram() -> None:
    """The HTTP twin observes each request's queue time as vLLM does, so a scrape of
    its /metrics gives the windowed mean a real server would."""
    import asyncio

    import httpx2

    from simulator.twin.core.engine import TwinEngine
    from simulator.twin.serve.server import ServerConfig, create_app, serving
    from tests.twin.serve.test_twin_server import FakePerf, body

    cfg = ServerConfig(model="qwen3-coder-30b-a3b-awq", hardware="a40",
                       context_window=32_768, time_scale=1000.0)
    async with serving(create_app(TwinEngine(FakePerf()), cfg)) as url, \
            httpx2.AsyncClient(base_url=url) as c:
        before = parse_metrics((await c.get("/metrics")).text)
        await asyncio.gather(*(c.post("/v1/messages", json=body(user=f"u{i}"))
                               for i in range(3)))
        after = parse_metrics((await c.get("/metrics")).text)
    figs = server_figures(pd.DataFrame(window_rows(before, after, 0.0, 1.0)))
    assert after.counters["queue_time_count"] - before.counters.get("queue_time_count", 0) == 3
    assert figs["server_queue_time_mean_s"] is not None and figs["server_queue_time_mean_s"] >= 0
