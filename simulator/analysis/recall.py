"""What the agent still knows: recall and retention from the probe rows (issue 22).

Pure functions over the turns table. Probe rows (`request_kind = probe`) are split off
before any throughput, cache or latency figure is computed (`without_probes`), so
those figures are the same with and without probes. Two figures, never mixed:

* `fact_retention` — client-side: the share of probes whose fact was still in the
  context sent (verbatim, or its value inside a summary). What the policy kept.
* `probe_recall` — the share of answered probes whose reply named the fact's value
  (normalised match). What the model could use. On the twin the two are equal by
  construction (it answers from the prompt); on a real model recall ≤ retention plus
  guessing.

Intervals: 95% percentile bootstrap, resampling sessions (all probes of a session
together: they share one context), or facts when the rows hold a single session;
`recall_ci_unit` says which. Seeded: the same rows give the same interval.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import TypedDict

import numpy as np
import pandas as pd

from simulator.analysis.metric_keys import MetricKey, SummaryRecord, as_record
from simulator.util.formats import percent

PROBE = "probe"
BOOTSTRAP_SAMPLES = 2000
CI_LEVEL = 0.95
# Fact-age bins (turns since planted), for recall against age.
AGE_EDGES: tuple[int, ...] = (0, 10, 25, 50, 100, 200)

RECALL_KEYS: tuple[MetricKey, ...] = (
    "probe_requests", "probes_answered", "probe_recall", "probe_recall_ci_low",
    "probe_recall_ci_high", "fact_retention", "fact_retention_ci_low",
    "fact_retention_ci_high", "facts_probed")


def is_probe(turns: pd.DataFrame) -> pd.Series:
    return turns["request_kind"] == PROBE


def without_probes(turns: pd.DataFrame) -> pd.DataFrame:
    """The turns table without its probe rows (what every speed figure reads)."""
    if "request_kind" not in turns.columns:
        return turns
    mask = is_probe(turns)
    return turns if not mask.any() else turns[~mask]


def probe_rows(turns: pd.DataFrame) -> pd.DataFrame:
    if "request_kind" not in turns.columns or "fact_retained" not in turns.columns:
        return turns.iloc[0:0]
    return turns[is_probe(turns)]


def _clusters(p: pd.DataFrame) -> tuple[pd.Series, str]:
    """The resampling unit of each row: its session (run + session id), or its fact
    when there is only one session."""
    run = p["run_id"].astype(str) if "run_id" in p.columns else pd.Series("", index=p.index)
    sess = run + "/" + p["session_id"].astype(str)
    if sess.nunique() >= 2:
        return sess, "session"
    return sess + "/" + p["fact_id"].astype(str), "fact"


def bootstrap_ci(values: Sequence[float], clusters: Sequence[str], *,
                 samples: int = BOOTSTRAP_SAMPLES, seed: int = 0,
                 level: float = CI_LEVEL) -> tuple[float | None, float | None]:
    """Percentile bootstrap interval of the mean of `values`, resampling whole clusters
    (None, None with fewer than two clusters: no spread can be measured)."""
    v = np.asarray(values, dtype=float)
    if len(v) == 0:
        return None, None
    codes, uniq = pd.factorize(pd.Series(list(clusters)))
    k = len(uniq)
    if k < 2:
        return None, None
    sums = np.bincount(codes, weights=v, minlength=k)
    counts = np.bincount(codes, minlength=k).astype(float)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, k, size=(samples, k))
    means = sums[picks].sum(axis=1) / counts[picks].sum(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def _share_ci(flags: pd.Series, clusters: pd.Series) -> tuple[float | None, float | None,
                                                              float | None]:
    if flags.empty:
        return None, None, None
    vals = flags.astype(float).tolist()
    lo, hi = bootstrap_ci(vals, clusters.tolist())
    return float(np.mean(vals)), lo, hi


def _retained(p: pd.DataFrame) -> pd.Series:
    return p["fact_retained"].astype(str) != "dropped"


def _answered(p: pd.DataFrame) -> pd.DataFrame:
    return p[p["ok"].astype(bool) & p["probe_correct"].notna()]


def recall_figures(turns: pd.DataFrame) -> SummaryRecord:
    """The summary's recall figures (None throughout when the run has no probes)."""
    p = probe_rows(turns)
    out = as_record(dict.fromkeys(RECALL_KEYS))
    out["probe_requests"] = len(p)
    if p.empty:
        out |= {"probes_answered": 0, "facts_probed": 0}
        return out | {"recall_ci_unit": None, "recall_by_kind": {}, "recall_by_age": {},
                      "retention_by_state": {}, "recall_by_compactions_crossed": {}}
    clusters, unit = _clusters(p)
    ans = _answered(p)
    rec, rlo, rhi = _share_ci(ans["probe_correct"].astype(bool), clusters.loc[ans.index])
    ret, tlo, thi = _share_ci(_retained(p), clusters)
    out |= {"probes_answered": len(ans), "facts_probed": int(p["fact_id"].nunique()),
            "probe_recall": rec, "probe_recall_ci_low": rlo, "probe_recall_ci_high": rhi,
            "fact_retention": ret, "fact_retention_ci_low": tlo, "fact_retention_ci_high": thi,
            "recall_ci_unit": unit}
    out["retention_by_state"] = {str(k): int(v) for k, v in
                                 p["fact_retained"].astype(str).value_counts().sort_index().items()}
    out["recall_by_kind"] = breakdown(p, p["fact_kind"].astype(str))
    out["recall_by_age"] = breakdown(p, age_bins(p["fact_age_turns"]))
    crossed = p["fact_compactions_crossed"].fillna(0).astype(int).clip(upper=3)
    out["recall_by_compactions_crossed"] = breakdown(
        p, crossed.map(lambda c: "3+" if c >= 3 else str(c)))
    return out


def age_bins(age: pd.Series, edges: Sequence[int] = AGE_EDGES) -> pd.Series:
    """Labels such as "0-9", "10-24", …, "200+" for fact ages in turns."""
    def label(a: float) -> str:
        if a is None or (isinstance(a, float) and math.isnan(a)):
            return "n/a"
        for lo, hi in itertools.pairwise(edges):
            if lo <= a < hi:
                return f"{lo}-{hi - 1}"
        return f"{edges[-1]}+"
    return age.map(label)


def breakdown(p: pd.DataFrame, groups: pd.Series) -> dict[str, dict[str, float | None]]:
    """Per group: probes, retention and recall with their 95% intervals (resampling
    the same units as the whole run's; JSON-safe)."""
    clusters, _ = _clusters(p)
    out: dict[str, dict[str, float | None]] = {}
    for g, sub in p.groupby(groups, sort=True):
        ans = _answered(sub)
        ret, tlo, thi = _share_ci(_retained(sub), clusters.loc[sub.index])
        rec, rlo, rhi = _share_ci(ans["probe_correct"].astype(bool), clusters.loc[ans.index])
        out[str(g)] = {"probes": len(sub), "fact_retention": ret,
                       "fact_retention_ci_low": tlo, "fact_retention_ci_high": thi,
                       "probe_recall": rec, "probe_recall_ci_low": rlo,
                       "probe_recall_ci_high": rhi}
    return out


class PairedRecall(TypedDict):
    """B − A of recall (or retention) over the probes both runs asked."""

    pairs: int
    a: float | None
    b: float | None
    difference: float | None
    ci_low: float | None
    ci_high: float | None


def paired_recall_difference(a: pd.DataFrame, b: pd.DataFrame, key: str = "probe_correct",
                             ) -> PairedRecall:
    """B − A for recall (or retention, key="fact_retained") over the probes both runs
    asked (same session, turn and fact: same scenario and seed), with a bootstrap
    interval resampling sessions; None figures when no probe pairs up."""
    cols = ["session_id", "turn_index", "fact_id"]
    pa, pb = probe_rows(a), probe_rows(b)
    none: PairedRecall = {"pairs": 0, "a": None, "b": None, "difference": None, "ci_low": None,
            "ci_high": None}
    if pa.empty or pb.empty:
        return none

    def values(p: pd.DataFrame) -> pd.DataFrame:
        if key == "fact_retained":
            v = _retained(p).astype(float)
        else:
            p = _answered(p)
            v = p["probe_correct"].astype(bool).astype(float)
        return p[cols].assign(v=v.loc[p.index]).drop_duplicates(subset=cols)

    m = values(pa).merge(values(pb), on=cols, suffixes=("_a", "_b"))
    if m.empty:
        return none
    diff = (m["v_b"] - m["v_a"]).tolist()
    units = m["session_id"].astype(str)
    if units.nunique() < 2:
        units = units + "/" + m["fact_id"].astype(str)
    lo, hi = bootstrap_ci(diff, units.tolist())
    return {"pairs": len(m), "a": float(m["v_a"].mean()), "b": float(m["v_b"].mean()),
            "difference": float(np.mean(diff)), "ci_low": lo, "ci_high": hi}


def _ci(lo: object, hi: object) -> str:
    return "" if lo is None or hi is None else f" [{percent(lo)}–{percent(hi)}]"


def recall_table_row(s: Mapping[str, object]) -> tuple[str, str]:
    """The summary table's recall row: recall and retention with their 95% intervals."""
    note = " — twin: recall = retention by construction" if s.get("simulated") else ""
    return ("probe recall / fact retention (95% CI)",
            f"{percent(s.get('probe_recall'))}"
            f"{_ci(s.get('probe_recall_ci_low'), s.get('probe_recall_ci_high'))}"
            f" / {percent(s.get('fact_retention'))}"
            f"{_ci(s.get('fact_retention_ci_low'), s.get('fact_retention_ci_high'))}"
            f" ({s.get('probes_answered')} of {s.get('probe_requests')} probes answered, "
            f"{s.get('facts_probed')} facts{note})")
