"""`endurance compare`: summary figures side by side, and a paired per-turn comparison.

Runs of the same scenario (hash) and seed replay the same turn sequence, so their
turns can be matched one to one by (session_id, turn_index). The paired figure is the
ratio of sustained tok/s (Σ output / Σ e2e over the matched turns) of each run to the
first; its confidence interval comes from a seeded moving-block bootstrap over the
matched turns (blocks of consecutive turns keep their serial correlation).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NotRequired, TypedDict

import numpy as np
import pandas as pd

from simulator.analysis.load import (
    differing_settings,
    load_run,
    load_saved_summary,
    run_label,
    workload_identity,
)
from simulator.analysis.metric_keys import SummaryRecord, figure
from simulator.analysis.metrics_registry import COMPARE_KEYS, NUMERIC_KEYS
from simulator.analysis.recall import PairedRecall, paired_recall_difference
from simulator.analysis.summary import ok_rows, summarize_run
from simulator.records.manifest import Manifest
from simulator.util.numbers import is_number


@dataclass(frozen=True, slots=True)
class PairedResult:
    """Run B against run A over their matched successful turns."""

    label_a: str
    label_b: str
    matched_turns: int
    ratio: float | None          # sustained tok/s of B / A over matched turns
    ci_low: float | None
    ci_high: float | None
    confidence: float
    resamples: int

    @property
    def excludes_one(self) -> bool:
        return self.ci_low is not None and self.ci_high is not None and \
            not (self.ci_low <= 1.0 <= self.ci_high)


def match_turns(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Successful turn rows of both runs joined on (session_id, turn_index)."""
    cols = ["session_id", "turn_index", "output_tokens", "e2e_s"]
    def prep(t: pd.DataFrame) -> pd.DataFrame:
        ok = ok_rows(t, "turn")[cols].dropna(subset=["output_tokens", "e2e_s"])
        return ok.drop_duplicates(subset=["session_id", "turn_index"], keep="last")
    return prep(a).merge(prep(b), on=["session_id", "turn_index"], suffixes=("_a", "_b"))


def bootstrap_ratio(out_a: np.ndarray, e2e_a: np.ndarray, out_b: np.ndarray,
                    e2e_b: np.ndarray, *, resamples: int = 2000, confidence: float = 0.95,
                    seed: int = 0, block: int | None = None
                    ) -> tuple[float | None, float | None, float | None]:
    """(ratio, low, high) of (Σout_b/Σe2e_b)/(Σout_a/Σe2e_a) over matched turns.

    A moving-block bootstrap: runs of `block` consecutive turns (default ≈ n^⅓) are
    resampled jointly for both runs, because neighbouring turns are correlated (context
    size, cache state), which plain per-turn resampling would ignore. Block sums come
    from cumulative sums, so the cost is O(resamples × n / block).
    """
    n = len(out_a)
    if n == 0 or e2e_a.sum() <= 0 or e2e_b.sum() <= 0 or out_a.sum() <= 0:
        return None, None, None
    ratio = float((out_b.sum() / e2e_b.sum()) / (out_a.sum() / e2e_a.sum()))
    length = max(1, min(n, block or round(n ** (1 / 3))))
    stacked = np.stack([out_a, e2e_a, out_b, e2e_b]).astype(float)        # 4 × n
    csum = np.concatenate([np.zeros((4, 1)), np.cumsum(stacked, axis=1)], axis=1)
    block_sums = csum[:, length:] - csum[:, :-length]                       # 4 × (n−L+1)
    m = -(-n // length)                                                      # blocks per resample
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, block_sums.shape[1], size=(resamples, m))
    s = block_sums[:, starts].sum(axis=2)                                    # 4 × resamples
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (s[2] / s[3]) / (s[0] / s[1])
    r = r[np.isfinite(r)]
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(r, [alpha, 1.0 - alpha])
    return ratio, float(lo), float(hi)


def paired_compare(a: pd.DataFrame, b: pd.DataFrame, *, label_a: str, label_b: str,
                   resamples: int = 2000, confidence: float = 0.95,
                   seed: int = 0) -> PairedResult:
    """Paired per-turn comparison of run B against run A (same scenario and seed)."""
    m = match_turns(a, b).sort_values(["session_id", "turn_index"])
    ratio, lo, hi = bootstrap_ratio(
        m["output_tokens_a"].to_numpy(float), m["e2e_s_a"].to_numpy(float),
        m["output_tokens_b"].to_numpy(float), m["e2e_s_b"].to_numpy(float),
        resamples=resamples, confidence=confidence, seed=seed)
    return PairedResult(label_a, label_b, len(m), ratio, lo, hi, confidence, resamples)


def pct_diff(base: object, other: object) -> float | None:
    """(other − base) / |base| × 100, None when either is missing (or not a number: a
    boolean is not one) or base is 0."""
    if not is_number(base) or not is_number(other) or base == 0:
        return None
    return 100.0 * (float(other) - float(base)) / abs(float(base))


@dataclass(frozen=True, slots=True)
class RunInfo:
    label: str
    run_dir: Path
    manifest: Manifest
    turns: pd.DataFrame
    summary: SummaryRecord


class ComparedRun(TypedDict):
    label: str
    run_dir: str
    simulated: bool


class Paired(TypedDict):
    """A `PairedResult` as compare.json keeps it, with what the runs differ in."""

    label_a: str
    label_b: str
    matched_turns: int
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float
    resamples: int
    excludes_one: bool
    differs_in: list[str]
    recall: PairedRecall
    retention: PairedRecall


class Comparison(TypedDict):
    """`endurance compare`'s answer (compare.json): the registry's compare figures of
    each run, their difference from the first run, the paired comparisons."""

    runs: list[ComparedRun]
    figures: dict[str, list[float | str | None]]
    pct_vs_first: dict[str, list[float | None]]
    pp_vs_first: dict[str, list[float | None]]
    paired: list[Paired]
    notes: list[str]
    overlay_png: NotRequired[str]


def load_runs(run_dirs: list[Path]) -> list[RunInfo]:
    """Load and summarize each run (labels made unique with the directory name)."""
    runs = []
    for d in run_dirs:
        manifest, turns, server = load_run(d)
        runs.append(RunInfo(run_label(manifest, d), d, manifest, turns,
                            summarize_run(manifest, turns, server, load_saved_summary(d))))
    labels = [r.label for r in runs]
    if len(set(labels)) < len(labels):
        runs = [RunInfo(f"{r.label} [{r.run_dir.name}]", r.run_dir, r.manifest, r.turns,
                        r.summary) for r in runs]
    return runs


def compare_runs(runs: list[RunInfo], *, resamples: int = 2000, seed: int = 0,
                 confidence: float = 0.95) -> Comparison:
    """The comparison as a JSON-safe dict: figures, % vs the first run, paired results."""
    base = runs[0]
    figures: dict[str, list[float | str | None]] = {
        k: [figure(r.summary, k) for r in runs] for k in COMPARE_KEYS}
    diffs: dict[str, list[float | None]] = {k: [pct_diff(v[0], x) for x in v[1:]] for k, v in figures.items()
             if k in NUMERIC_KEYS and not k.endswith("_pct")}
    points: dict[str, list[float | None]] = {k: [None if v[0] is None or x is None else float(x) - float(v[0])
                  for x in v[1:]] for k, v in figures.items() if k.endswith("_pct")}
    paired: list[Paired] = []
    notes: list[str] = []
    key = workload_identity(base.manifest)
    for r in runs[1:]:
        if key is None or workload_identity(r.manifest) != key:
            notes.append(f"{r.label}: different scenario or seed than {base.label}; "
                         "no paired comparison")
            continue
        res = paired_compare(base.turns, r.turns, label_a=base.label, label_b=r.label,
                             resamples=resamples, confidence=confidence, seed=seed)
        paired.append({"label_a": res.label_a, "label_b": res.label_b,
                       "matched_turns": res.matched_turns, "ratio": res.ratio,
                       "ci_low": res.ci_low, "ci_high": res.ci_high,
                       "confidence": res.confidence, "resamples": res.resamples,
                       "excludes_one": res.excludes_one,
                       "differs_in": differing_settings(base.manifest, r.manifest),
                       # recall probes both runs asked (issue 22)
                       "recall": paired_recall_difference(base.turns, r.turns),
                       "retention": paired_recall_difference(base.turns, r.turns,
                                                             key="fact_retained")})
    return {
        "runs": [{"label": r.label, "run_dir": str(r.run_dir),
                  "simulated": bool(r.summary.get("simulated"))} for r in runs],
        "figures": figures, "pct_vs_first": diffs, "pp_vs_first": points, "paired": paired, "notes": notes,
    }


