"""Recall figures from probe rows: split off from every speed figure, bootstrap
intervals that are seeded and resample whole sessions, paired differences."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.analysis import metrics_registry as registry
from simulator.analysis import recall
from simulator.analysis.summary import summarize
from simulator.records.rows import COLUMNS

ROOT = Path(__file__).resolve().parents[2]


def _turn(s: str, t: int) -> dict[str, Any]:
    return {"run_id": "r", "session_id": s, "turn_index": t, "request_kind": "turn",
            "attempt": 1, "started_at": 0.0, "started_mono_s": 10.0 * t, "ok": True,
            "context_tokens_est": 1000 + 100 * t, "reusable_prefix_tokens": 900,
            "max_tokens": 100, "turn_kind": "read", "think_time_s": 1.0,
            "output_tokens": 100, "e2e_s": 2.0, "turn_tok_s": 50.0, "ttft_s": 0.2,
            "prompt_tokens": 1000, "cache_read_tokens": 800, "compaction": None,
            "compaction_messages_removed": 0, "compaction_tokens_removed": 0}


def _probe(s: str, t: int, f: int, retained: str, correct: bool | None,
           ok: bool = True) -> dict[str, Any]:
    return {**_turn(s, t), "request_kind": "probe", "turn_kind": "probe", "output_tokens": 7,
            "e2e_s": 0.1, "ttft_s": 0.05, "prompt_tokens": 5000, "cache_read_tokens": 0,
            "ok": ok, "fact_id": f"{s}:f{f}", "fact_kind": "user_value", "fact_turn": 0,
            "fact_age_turns": t, "fact_compactions_crossed": t // 5,
            "fact_retained": retained, "probe_correct": correct, "probe_expected": "X-1a"}


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(COLUMNS))


TURNS = [_turn(s, t) for s in ("s0", "s1") for t in range(6)]
PROBES = [_probe("s0", 5, 0, "verbatim", True), _probe("s0", 5, 1, "dropped", False),
          _probe("s1", 5, 0, "summary", True), _probe("s1", 5, 1, "dropped", True),
          _probe("s1", 5, 2, "verbatim", None, ok=False)]


def test_probe_rows_never_enter_the_turn_figures() -> None:
    plain = summarize(_frame(TURNS), price_per_hour=1.0, simulated=False)
    probed = summarize(_frame(TURNS + PROBES), price_per_hour=1.0, simulated=False)
    probe_keys = set(recall.RECALL_KEYS) | {"recall_ci_unit", "recall_by_kind", "recall_by_age",
                                            "retention_by_state",
                                            "recall_by_compactions_crossed"}
    assert {k: v for k, v in probed.items() if k not in probe_keys} == \
        {k: v for k, v in plain.items() if k not in probe_keys}
    assert plain["probe_requests"] == 0 and plain["probe_recall"] is None
    assert probed["probe_requests"] == 5 and probed["probes_answered"] == 4
    assert probed["probe_recall"] == 0.75                  # 3 of 4 answered
    assert probed["fact_retention"] == 3 / 5               # 2 of 5 dropped
    assert probed["recall_ci_unit"] == "session"
    assert probed["retention_by_state"] == {"dropped": 2, "summary": 1, "verbatim": 2}
    assert probed["recall_by_age"]["0-9"]["probes"] == 5
    kind = probed["recall_by_kind"]["user_value"]
    assert kind["probe_recall"] == 0.75
    assert kind["probe_recall_ci_low"] <= 0.75 <= kind["probe_recall_ci_high"]


def test_bootstrap_is_seeded_and_resamples_clusters() -> None:
    vals = [1.0] * 10 + [0.0] * 10
    one = recall.bootstrap_ci(vals, ["a"] * 10 + ["b"] * 10)
    assert one == recall.bootstrap_ci(vals, ["a"] * 10 + ["b"] * 10)
    # two clusters, each all-0 or all-1: the mean of a resample is 0, 0.5 or 1
    assert one[0] == 0.0 and one[1] == 1.0
    assert recall.bootstrap_ci(vals, ["a"] * 20) == (None, None)
    assert recall.bootstrap_ci([], []) == (None, None)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 5)), min_size=2, max_size=60))
def test_interval_brackets_the_mean(data: list[tuple[bool, int]]) -> None:
    vals = [float(v) for v, _ in data]
    clusters = [str(c) for _, c in data]
    lo, hi = recall.bootstrap_ci(vals, clusters)
    if len(set(clusters)) < 2:
        assert lo is None and hi is None
        return
    assert lo is not None and hi is not None
    # every resample's mean is a weighted mean of cluster means
    means = [sum(v for v, c in zip(vals, clusters, strict=True) if c == k)
             / clusters.count(k) for k in set(clusters)]
    assert min(means) - 1e-9 <= lo <= hi <= max(means) + 1e-9


def test_paired_difference_over_the_probes_both_runs_asked() -> None:
    a = _frame(TURNS + PROBES)
    b_rows = [dict(p) for p in PROBES] + [_probe("s0", 3, 0, "verbatim", True)]  # unpaired
    for p in b_rows[:4]:
        p["probe_correct"], p["fact_retained"] = True, "verbatim"
    b = _frame(TURNS + b_rows)
    d = recall.paired_recall_difference(a, b)
    assert d["pairs"] == 4 and d["a"] == 0.75 and d["b"] == 1.0
    assert d["difference"] == 0.25
    r = recall.paired_recall_difference(a, b, key="fact_retained")
    assert r["pairs"] == 5 and abs(r["difference"] - 0.4) < 1e-12
    assert recall.paired_recall_difference(_frame(TURNS), b)["pairs"] == 0


def test_recall_metrics_are_registered_and_documented() -> None:
    for k in recall.RECALL_KEYS:
        assert registry.REGISTRY[k].source == "probes"
    text = (ROOT / "docs" / "recall.md").read_text(encoding="utf-8")
    block = text.split("<!-- metrics-registry-recall:begin -->\n")[1].split(
        "\n<!-- metrics-registry-recall:end -->")[0]
    assert block == registry.vocabulary_markdown(recall=True), \
        "docs/recall.md table is stale: python -m simulator.analysis.metrics_registry --recall"


def test_a_probe_run_pairs_with_the_same_run_without_probes() -> None:
    from simulator.analysis.load import workload_identity
    from simulator.records.manifest import parse_manifest
    base = {"seed": 7, "scenario_resolved": {"name": "x", "turns": 10, "probes": None}}
    probed = {"seed": 7, "scenario_resolved": {"name": "x", "turns": 10,
                                               "probes": {"facts": 8}}}
    assert workload_identity(parse_manifest(base, "m")) == \
        workload_identity(parse_manifest(probed, "m")) is not None
