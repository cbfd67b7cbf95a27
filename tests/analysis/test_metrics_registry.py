"""The metric registry is the one place per metric: every summary key is registered,
the docs' metric reference (docs/metrics.md) is generated from it, and old summary keys stay readable."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from simulator.analysis import metrics_registry as registry
from simulator.analysis.load import load_saved_summary
from simulator.analysis.run_summary import RunSummary
from simulator.analysis.sizing import sweep_row
from simulator.analysis.summary import summarize
from simulator.records.rows import COLUMNS
from simulator.report.console import format_sweep_table, summary_table

ROOT = Path(__file__).resolve().parents[2]


def _rows() -> pd.DataFrame:
    base = dict.fromkeys(COLUMNS)
    rows = []
    for sid in ("s0", "s1"):
        for t in range(3):
            rows.append(base | {
                "run_id": "r", "session_id": sid, "turn_index": t, "request_kind": "turn",
                "attempt": 0, "ok": True, "started_mono_s": 10.0 * t, "e2e_s": 2.0,
                "ttft_s": 0.5, "output_tokens": 100, "turn_tok_s": 50.0, "decode_tok_s": 66.0,
                "context_tokens_est": 1000 * (t + 1), "reusable_prefix_tokens": 500 * t,
                "compaction": None, "compaction_messages_removed": 0,
                "compaction_tokens_removed": 0})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def test_every_summary_key_is_a_registered_metric_or_a_fact() -> None:
    engine = {"kv_usage_peak": 0.5, "preemptions": 1, "kv_capacity_tokens": 1000,
              "prefix_cache_queries": 4, "prefix_cache_hits": 1}
    s = summarize(_rows(), price_per_hour=1.0, simulated=True, engine_stats=engine)
    built = RunSummary.from_json(s)
    assert built.unregistered() == [], "register these in simulator/analysis/metrics_registry.py"
    assert set(registry.NUMERIC_KEYS) - set(registry.STEADY_KEYS) <= set(s)
    assert built.ok_turns == 6 and built["turns"] == 6 and built.simulated
    assert built.to_json() == s       # figures and facts round-trip unchanged
    assert built["kv_usage_peak"] == 0.5 and built["server_prefix_cache_hit_share"] == 0.25


def test_docs_metric_reference_is_generated_from_the_registry() -> None:
    text = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    block = text.split("<!-- metrics-registry:begin -->\n")[1].split("\n<!-- metrics-registry:end -->")[0]
    assert block == registry.vocabulary_markdown(), \
        "docs/metrics.md table is stale: python -m simulator.analysis.metrics_registry --write"


def test_table_compare_and_sweep_read_the_registry() -> None:
    s = summarize(_rows(), price_per_hour=None, simulated=False)
    labels = [label for label, _ in summary_table(s)]
    for m in registry.METRICS:       # goodput's row names the thresholds it counted under
        assert m.row is None or m.row in labels or m.row.replace(
            "goodput:", "goodput (TTFT ≤ 15 s, ≥ 30 tok/s):") in labels, m.row
    assert dict(summary_table(s))["sessions / successful turns"] == "2 / 6"
    # a sweep's columns are registry metrics (and the steady flag), headed as the registry says
    columns = [k for k, _ in registry.SWEEP_COLUMNS]
    assert set(columns) - {"steady_state"} <= set(registry.REGISTRY)
    assert "steady_state" in registry.SWEEP_FACT_KEYS
    header = format_sweep_table([sweep_row({}, s)]).splitlines()[1]
    assert all(h in header for _, h in registry.SWEEP_COLUMNS)
    # a row carries every figure of its run under the summary's own names
    row = sweep_row({"requested_sessions": 2}, s)
    assert all(row[k] == s.get(k) for k in registry.NUMERIC_KEYS if k != "requested_sessions")


def test_an_old_summary_json_is_read_under_the_new_keys(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text(json.dumps({"turns": 12, "sessions": 2}))
    saved = load_saved_summary(tmp_path)
    assert saved is not None and saved["ok_turns"] == 12 and "turns" not in saved
    assert registry.read({"turns": 3}, "ok_turns") == 3
    assert registry.read({"ok_turns": 4, "turns": 3}, "ok_turns") == 4


def test_format_prints_units_and_unknowns() -> None:
    r = registry.REGISTRY
    assert r["kv_usage_peak"].format(0.125) == "12.5%"
    assert r["ok_turns"].format(7) == "7" and r["ttft_p95_s"].format(None) == "n/a"
    assert r["drift_pct"].format(-3.0) == "-3.0%" and r["usd_per_mtok"].format(1) == "1.000"


def test_run_facts_are_typed_and_keep_summary_json_s_keys() -> None:
    """The facts a finished run adds (`RunFacts`) land under the keys summary.json has
    always used; the twin and its time scale only where they apply."""
    from simulator.analysis.run_summary import RunFacts, RunSummary
    base = RunSummary.from_json(summarize(_rows(), price_per_hour=None, simulated=True))
    real = base.with_run_facts(RunFacts("completed", "", [], False, "r1", False, False))
    assert real["status"] == "completed" and real["run_id"] == "r1"
    assert "twin" not in real.facts and "time_scale" not in real.facts
    twin = base.with_run_facts(RunFacts("interrupted", "stopped by signal", ["s0001"], True,
                                        "r2", True, False, twin={"kind": "twin"},
                                        time_scale=20.0))
    assert twin.simulated and twin["twin"] == {"kind": "twin"} and twin["time_scale"] == 20.0
    assert not twin.unregistered()
