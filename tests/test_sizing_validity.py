"""Queueing as a binding constraint, the saturation gate and schedule lag (issue 12,
second pass): pure functions on synthetic rows, then short runs on the twin."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from simulator.analysis.queueing import queue_figures, queue_share
from simulator.analysis.sizing import parse_slo, size
from simulator.analysis.summary import server_figures
from simulator.metrics.prometheus import parse_metrics, window_rows
from simulator.runs import RunSpec, execute

ROOT = Path(__file__).resolve().parents[1]
TEAM = str(ROOT / "scenarios" / "claude-code-team.yaml")


def _server(n: int, *, queue_share: float, preemptions: int = 0) -> dict[str, Any]:
    """TTFT grows with n; `queue_share` of it is queue wait."""
    return {"sessions": n, "per_session_tok_s": 100.0, "ttft_p95_s": 0.5 * n,
            "window_queue_share_of_ttft": queue_share, "preemptions": preemptions,
            "simulated": True}


@pytest.mark.parametrize(("share", "pre", "kind"), [
    (0.8, 0, "queueing"), (0.2, 0, "latency"), (0.8, 3, "kv_capacity")])
def test_ttft_failing_from_queue_wait_is_named_queueing(share: float, pre: int,
                                                        kind: str) -> None:
    res = size(lambda n: _server(n, queue_share=share, preemptions=pre),
               [parse_slo("ttft_p95_s<=3")], 32)
    assert res.sessions == 6 and res.binding_kind == kind
    if kind == "queueing":
        assert res.binding == "ttft_p95_s<=3 (queue wait 80% of TTFT)"


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
    out: dict[str, Any] = res.summary | {"run_dir": res.run_dir}
    return out


def test_twin_rows_carry_queue_wait_within_ttft(tmp_path: Path) -> None:
    s = _run(tmp_path, TEAM, "sessions=24", "turns=3", "think_time_s=0",
             "arrival.pattern=all_at_once", "twin.kv_cache_gib=3")
    t = pd.read_parquet(s["run_dir"] / "turns.parquet")
    ok = t[t["ok"] & (t["request_kind"] == "turn")]
    assert ok["queue_s"].notna().all()
    assert (ok["queue_s"] >= 0).all() and (ok["queue_s"] <= ok["ttft_s"] + 1e-9).all()
    assert s["queue_time_p95_s"] > 0 and 0 < s["queue_share_of_ttft"] <= 1
