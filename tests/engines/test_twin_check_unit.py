"""The pure parts of the twin-vs-vLLM-CPU check (`engines/twin_check.py`): errors,
the table, the fitted profile and the twin running the scenario on it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from simulator.engines import twin_check as tc
from simulator.twin.model.fit import fit_terms
from simulator.twin.model.fit_points import points_from_rows
from simulator.twin.model.perf_model import build_perf_model, decode_tok_s, prefill_seconds
from simulator.twin.model.profile_write import yaml_text
from simulator.twin.model.profiles import load_hardware

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from twin_vs_vllm_cpu import END, START, replace_block


def test_errors_relative_and_in_share_points() -> None:
    assert tc.Row("x", "1", 12.0, 10.0, "tok/s").error_text() == "+20%"
    assert tc.Row("x", "1", 0.80, 0.85, "%", kind="abs").error_text() == "-5.0 pts"
    assert tc.Row("x", "1", None, 10.0, "s").error_text() == "n/a"
    table = tc.markdown([tc.Row("TTFT p50", "2 sessions", 0.5, 0.25, "s"),
                         tc.Row("share", "2 sessions", 0.8, 0.75, "%", kind="abs")])
    assert "| TTFT p50 | 2 sessions | 0.5 s | 0.25 s | +100% |" in table
    assert "| share | 2 sessions | 80.0% | 75.0% | +5.0 pts |" in table


def test_the_short_table_has_a_column_per_session_count() -> None:
    rows = [tc.Row("TTFT p50", "1 session (fitted)", 0.5, 0.4, "s"),
            tc.Row("TTFT p50", "2 sessions", 0.6, 0.6, "s"),
            tc.Row("share", "2 sessions", 0.8, 0.75, "%", kind="abs"),
            tc.Row("speedup", "6 probes", 2.0, 1.6, "×")]
    head, sep, ttft, share, blank, *rest = tc.compact_markdown(rows).splitlines()
    assert head == "| twin / vLLM CPU (error) | 1 session (fitted) | 2 sessions |"
    assert sep == "|---|---|---|"
    assert ttft == "| TTFT p50, s | 0.5 / 0.4 (+25%) | 0.6 / 0.6 (+0%) |"
    assert share == "| share |  | 80.0% / 75.0% (+5.0 pts) |"
    assert blank == "" and rest[-1] == "| speedup | 6 probes | 2 × | 1.6 × | +25% |"


def test_the_table_goes_between_the_markers_only() -> None:
    text = f"before\n{START}\nold\n{END}\nafter\n"
    assert replace_block(text, "new\n") == f"before\n{START}\nnew\n{END}\nafter\n"
    with pytest.raises(SystemExit):
        replace_block("no markers", "x")


def test_a_fitted_profile_runs_the_scenario_on_the_twin(tmp_path: Path) -> None:
    """Rows the twin itself produced (eta_w 0.3) fit back; the profile written from the
    fit loads by path and runs the check's scenario."""
    doc = tc._with_server_settings(tc.BASE_HARDWARE)
    base = tmp_path / "base.yaml"
    base.write_text(yaml_text(doc))
    true = build_perf_model(str(base), tc.MODEL, overrides={"eta_w": 0.3, "eta_c": 0.5})
    rows = [{"session_id": "s", "turn_index": i, "request_kind": "turn", "ok": True,
             "context_tokens_est": p, "prompt_tokens": p, "cache_read_tokens": c,
             "output_tokens": 40, "ttft_s": prefill_seconds(true, p, c),
             "decode_tok_s": decode_tok_s(true, 1, p + 20)}
            for i, (p, c) in enumerate([(500, 0), (900, 480), (1400, 896)])]
    pts = points_from_rows(rows)
    fit = fit_terms(pts.points, str(base), tc.MODEL, free=("eta_w", "eta_c"))
    prof = tc.fitted_profile(fit, pts, when="today", conditions="idle")
    assert load_hardware(tc.BASE_HARDWARE).name == "cpu-2core"
    assert prof["efficiency"]["eta_w"] == pytest.approx(0.3, rel=0.02)
    assert "fitted today" in prof["efficiency"]["source"]
    assert prof["engine"]["max_num_batched_tokens"] == 2048
    path = tmp_path / "fitted.yaml"
    path.write_text(yaml_text(prof))
    res = tc.run(tc.SCENARIO, tmp_path / "out", sessions=1, seed=1, turns=2,
                 twin=f"{path}/{tc.MODEL}")
    assert res.summary["ok_turns"] == 2 and res.summary["simulated"]
    assert res.manifest.to_json()["endpoint"]["profile"]["hardware"]["name"] == tc.FITTED_NAME
