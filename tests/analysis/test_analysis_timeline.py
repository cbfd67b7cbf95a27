"""The report's timeline and distribution figures (issue 16, item 9): the tables
behind them, and the in-process twin's engine log."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from simulator.analysis.synthetic import synthetic_turns
from simulator.analysis.timeline import client_series, ecdf, percentiles, server_series
from simulator.records.prometheus import Snapshot, window_rows
from simulator.report.plots import DENSE_MARKERS, mark_compactions, new_figure, plot_cdfs, plot_timeline
from tests.conftest import run_scenario, small_scenario


def _turns() -> pd.DataFrame:
    # two sessions: s0 sends at 0 (2 s, 100 tokens) and 4 (2 s, 50); s1 at 1 (4 s, 80)
    return pd.DataFrame({"session_id": ["s0", "s0", "s1"], "started_mono_s": [0.0, 4.0, 1.0],
                         "e2e_s": [2.0, 2.0, 4.0], "output_tokens": [100, 50, 80]})


def test_client_series_counts_tokens_in_flight_and_active_sessions() -> None:
    c = client_series(_turns(), bin_s=1.0)
    assert list(c["t_s"]) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    # finished at 2 (100 tok), 5 (80 tok), 6 (50 tok; the last edge is inclusive)
    assert list(c["output_tok_s"]) == [0.0, 0.0, 100.0, 0.0, 0.0, 130.0]
    assert list(c["in_flight"]) == [1, 2, 1, 1, 2, 1]
    assert list(c["active_sessions"]) == [1, 2, 2, 2, 2, 1]
    assert int(c["output_tok_s"].sum()) == 230   # every token counted once (bins of 1 s)


def test_server_series_turns_deltas_into_rates() -> None:
    snaps = [Snapshot("vllm", counters={"generation_tokens": 100.0 * i, "preemptions": i // 2},
                      gauges={"kv_usage": 0.2 * i, "requests_running": i}) for i in range(4)]
    rows = [r for i in range(1, 4) for r in window_rows(snaps[i - 1], snaps[i], 5.0 * (i - 1),
                                                          5.0 * i)]
    s = server_series(pd.DataFrame(rows))
    assert list(s["t_end_s"]) == [5.0, 10.0, 15.0]
    assert list(s["generation_tok_s"]) == [20.0, 20.0, 20.0]
    assert list(s["preemptions"]) == [0.0, 1.0, 0.0]
    assert np.allclose(s["kv_usage"], [0.2, 0.4, 0.6])
    assert s["requests_waiting"].isna().all()
    assert server_series(None).empty


def test_ecdf_and_percentiles() -> None:
    v = pd.Series([3.0, 1.0, np.nan, 2.0, 4.0])
    x, y = ecdf(v)
    assert list(x) == [1.0, 2.0, 3.0, 4.0] and list(y) == [0.25, 0.5, 0.75, 1.0]
    p = percentiles(pd.Series(np.arange(101, dtype=float)))
    assert p == {50: 50.0, 90: 90.0, 99: 99.0}
    assert percentiles(pd.Series([np.nan])) == {}


def test_dense_compactions_become_a_rug() -> None:
    fig = new_figure()
    ax = fig.add_subplot()
    mark_compactions(ax, list(range(DENSE_MARKERS + 1)))
    assert len(ax.lines) == 1 and "rug" in str(ax.lines[0].get_label())
    ax2 = new_figure().add_subplot()
    mark_compactions(ax2, [3, 9])
    assert len(ax2.lines) == 2


def test_figures_draw_with_and_without_server_metrics() -> None:
    turns = synthetic_turns(sessions=3, turns=30)
    ok = turns[turns["ok"]]
    assert len(plot_timeline(turns, None, simulated=True).axes) == 2
    assert len(plot_cdfs(ok, simulated=False).axes) == 3


def test_in_process_twin_writes_its_engine_log(tmp_path: Path, write_scenario) -> None:  # type: ignore[no-untyped-def]
    res = run_scenario(write_scenario(small_scenario(sessions=3, turns=12)), tmp_path)
    server = pd.read_parquet(res.run_dir / "server_metrics.parquet")
    assert set(server["dialect"]) == {"twin"}
    s = server_series(server)
    assert len(s) >= 3 and s["kv_usage"].between(0, 1).all()
    assert s["requests_running"].max() >= 1
    turns = pd.read_parquet(res.run_dir / "turns.parquet")
    gen = server[server["metric"] == "generation_tokens"]["value"].sum()
    assert math.isclose(gen, turns["output_tokens"].sum(), rel_tol=0.02)
    assert server["t_end_s"].max() <= (turns["started_mono_s"] + turns["e2e_s"]).max() + 1e-6
    fig = plot_timeline(turns, server, simulated=True)
    assert len([a for a in fig.axes if a.get_ylabel()]) >= 5   # 4 panels + preemptions axis
