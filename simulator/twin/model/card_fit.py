"""Fit one card's terms and its kernel families' terms together (issue 56).

Published runs of one card span several models and weight formats. The card's terms
(per-step overhead, KV reads, attention, the mixed prefill+decode step, the all-reduce)
are one set shared by every run; the kernel terms (GEMM efficiency `eta_c`, weight
streaming `eta_w`) are one set per family (`kernel_family`: FP8 dense, FP4 MoE …), so an
FP8 dense model does not lend its GEMM efficiency to a W4A16 MoE. One Levenberg–Marquardt
least squares on log residuals (`fit._solve_lm`) over all of them; every other term stays
at the card's base (`efficiency_for`: the a40 fit for a card with none).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from simulator.errors import InputError
from simulator.twin.model.fit import BOUNDS, BenchRuns, Observation, Row, _solve_lm, predict
from simulator.twin.model.perf_model import RooflinePerfModel
from simulator.twin.model.profiles import (
    CARD_TERMS,
    FAMILY_TERMS,
    Efficiency,
    HardwareProfile,
    efficiency_for,
    kernel_family,
    load_engine_settings,
    load_model,
)

# what a card fit frees by default: the per-step cost, KV reads, attention, the mixed
# step, the all-reduce; per family the GEMM efficiency and the weight streaming
CARD_FREE = ("t0_s", "eta_attn", "mixed_step_s", "allreduce_s")
FAMILY_FREE = ("eta_c", "eta_w")


@dataclass(frozen=True, slots=True)
class FitGroup:
    """Observations of one model × quantization × engine settings on the card."""

    model: str
    quantization: str
    engine: Mapping[str, object]
    points: tuple[Observation, ...]

    @property
    def family(self) -> str:
        return kernel_family(load_model(self.model), self.quantization)


@dataclass(frozen=True, slots=True)
class CardFit:
    card: dict[str, float]                 # fitted card terms
    families: dict[str, dict[str, float]]  # family → fitted terms
    rows: tuple[tuple[FitGroup, tuple[Row, ...]], ...]
    rms_log_error: float
    iterations: int


def perf_for(hw: HardwareProfile, group: FitGroup, card: Mapping[str, float],
             family: Mapping[str, float]) -> RooflinePerfModel:
    """The twin of `group` on `hw` with these card and family terms over the base."""
    base, _ = efficiency_for(hw, group.family)
    eff = Efficiency.model_validate({**base.model_dump(), **card, **family})
    settings = load_engine_settings(hw, dict(group.engine))
    return RooflinePerfModel(hw, load_model(group.model), settings, eff,
                             quantization=group.quantization)


def fit_card(hw: HardwareProfile, groups: Sequence[FitGroup], *,
             card_free: Sequence[str] = CARD_FREE, family_free: Sequence[str] = FAMILY_FREE,
             max_iter: int = 6, rel_tol: float = 1e-3) -> CardFit:
    """Fit the card's `card_free` terms and each family's `family_free` terms to every
    group's points (weights as the points give them)."""
    bad = [t for t in card_free if t not in CARD_TERMS] + [
        t for t in family_free if t not in FAMILY_TERMS]
    if bad:
        raise InputError(f"card fit: {', '.join(bad)} is not a card or family term")
    if not groups or not any(g.points for g in groups):
        raise InputError(f"card fit ({hw.name}): no points")
    import numpy as np
    families = sorted({g.family for g in groups})
    names = [("", t) for t in card_free] + [(f, t) for f in families for t in family_free]
    lo = np.log([BOUNDS[t][0] for _, t in names])
    hi = np.log([BOUNDS[t][1] for _, t in names])
    start: list[float] = []
    for fam, t in names:
        base, _ = efficiency_for(hw, fam or groups[0].family)
        v = float(base.model_dump()[t])
        start.append(v if v > 0 else math.sqrt(BOUNDS[t][0] * BOUNDS[t][1]))
    x0 = np.log(start)

    def terms(x: np.ndarray) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
        card: dict[str, float] = {}
        fams: dict[str, dict[str, float]] = {f: {} for f in families}
        for (fam, t), v in zip(names, np.exp(x).tolist(), strict=True):
            v = min(max(v, BOUNDS[t][0]), BOUNDS[t][1])
            (fams[fam] if fam else card)[t] = v
        return card, fams

    points = [(g, p) for g in groups for p in g.points]
    weights = np.array([math.sqrt(p.weight) for _, p in points])
    measured = np.array([p.measured for _, p in points])

    def predictions(x: np.ndarray) -> list[tuple[FitGroup, Row]]:
        card, fams = terms(x)
        out: list[tuple[FitGroup, Row]] = []
        for g in groups:
            pm = perf_for(hw, g, card, fams[g.family])
            runs: BenchRuns = {}
            out.extend((g, Row(p, predict(pm, p, smooth=True, bench=runs))) for p in g.points)
        return out

    def resid(x: np.ndarray) -> np.ndarray:
        pred = np.array([r.predicted for _, r in predictions(x)])
        return np.asarray(weights * np.log(np.maximum(pred, 1e-12) / measured))

    x, iters = _solve_lm(resid, x0, lo, hi, max_iter=max_iter, rel_tol=rel_tol)
    card, fams = terms(x)
    rows = predictions(x)
    by_group = tuple((g, tuple(r for gg, r in rows if gg is g)) for g in groups)
    r = resid(x)
    return CardFit(card, fams, by_group, float(math.sqrt(r @ r / r.size)), iters)
