"""Fit the performance model's efficiency terms to measured points.

A points file (YAML or CSV) lists observations of one card × model: decode tokens/s at a
batch and context, prefill time or rate of a prompt (with its cached prefix), and the KV
capacity the engine logged. The fit is a Levenberg–Marquardt least squares on log
residuals (relative errors), over the log of each free term, with bounds; numpy only.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from simulator.errors import InputError
from simulator.twin.perf_model import RooflinePerfModel, decode_tok_s, prefill_seconds
from simulator.twin.profiles import (
    DEFAULT_FREE,
    Efficiency,
    efficiency_for,
    load_engine_settings,
    load_hardware,
    load_model,
)

if TYPE_CHECKING:  # numpy is imported by the fitting code only: CLI start-up stays short
    import numpy as np

# Bounds of each term (the fit works on their logarithms, so lower bounds are > 0).
BOUNDS: dict[str, tuple[float, float]] = {
    "t0_s": (1e-6, 0.05), "t_seq_s": (1e-8, 0.01), "eta_w": (0.05, 1.0),
    "eta_kv": (0.05, 1.0), "kv_half_seqs": (1e-3, 200.0), "eta_s": (0.05, 1.0),
    "eta_c": (0.01, 1.0), "eta_attn": (0.01, 1.0), "routing_skew": (0.05, 3.0),
    "reserve_bytes": (1e6, 1e12),
    "spec_step_s": (1e-6, 0.1), "spec_seq_s": (1e-7, 0.05), "spec_verify_tok_s": (1e-8, 0.01),
    "ngram_ctx_tok_s": (1e-12, 1e-6), "eager_step_s": (1e-5, 0.5),
}


class Observation(BaseModel):
    """One measured figure. Units: tok_s (decode aggregate or prompt tokens / TTFT),
    s (TTFT), tokens (KV capacity)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["decode", "prefill", "kv_capacity", "spec_decode"]
    measured: float = Field(gt=0)
    unit: Literal["tok_s", "s", "tokens", "ratio"]
    batch: int = Field(default=1, gt=0)
    context: int = Field(default=0, ge=0)
    prompt_tokens: int = Field(default=0, ge=0)
    cached_tokens: int = Field(default=0, ge=0)
    low: float | None = None
    high: float | None = None
    weight: float = Field(default=1.0, ge=0)
    label: str = ""
    note: str = ""
    # spec_decode: `batch` sessions of the twin's own turns (spec_whatif.run_sessions)
    # with this speculation setting; unit tok_s = per-session rate × batch, ratio = that
    # over the same run with speculation off
    spec: str = "off"
    code_edit: bool = True
    turns: int = Field(default=3, gt=0)
    max_num_batched_tokens: int | None = None


class PointsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    hardware: str | None = None
    model: str | None = None
    source: str = ""
    engine: dict[str, Any] = Field(default_factory=dict)
    fit: list[str] | None = None
    assumptions: list[str] = Field(default_factory=list)
    points: list[Observation]


def load_points(path: str | Path) -> PointsFile:
    """Read observations from a YAML file (with metadata) or a CSV (one point per row)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{p}: cannot read points file ({exc.strerror})") from exc
    if p.suffix.lower() == ".csv":
        rows = [{k: v for k, v in row.items() if v not in ("", None)}
                for row in csv.DictReader(text.splitlines())]
        data: Any = {"points": rows}
    else:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InputError(f"{p}: not valid YAML ({str(exc).splitlines()[0]})") from exc
    try:
        return PointsFile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        raise InputError(f"{p}: {loc}: {err['msg']}") from exc


def predict(pm: RooflinePerfModel, obs: Observation, *, smooth: bool = False) -> float:
    """The model's value for an observation, in the observation's unit."""
    if obs.kind == "kv_capacity":
        return pm.kv_pool_tokens() if smooth else float(pm.kv_capacity_tokens())
    if obs.kind == "decode":
        return decode_tok_s(pm, obs.batch, obs.context)
    if obs.kind == "spec_decode":
        return _spec_decode(pm, obs)
    seconds = prefill_seconds(pm, obs.prompt_tokens, obs.cached_tokens)
    return seconds if obs.unit == "s" else obs.prompt_tokens / seconds


def _spec_decode(pm: RooflinePerfModel, obs: Observation) -> float:
    """Closed-loop twin run with `obs.spec` on this model's card and efficiency terms."""
    from simulator.twin.spec_whatif import run_sessions

    def with_spec(spec: str) -> RooflinePerfModel:
        update: dict[str, Any] = {"spec": spec}
        if spec != "off":
            update["max_num_batched_tokens"] = (obs.max_num_batched_tokens
                                                or pm.engine.spec_max_num_batched_tokens)
        engine = pm.engine.model_copy(update=update)
        return RooflinePerfModel(pm.hardware, pm.model, engine, pm.efficiency,
                                 quantization=pm.quantization)

    def rate(spec: str) -> float:
        return run_sessions(with_spec(spec), obs.batch, turns=obs.turns,
                            code_edit=obs.code_edit).aggregate_tok_s

    on = rate(obs.spec)
    return on / rate("off") if obs.unit == "ratio" else on


@dataclass(frozen=True, slots=True)
class Row:
    obs: Observation
    predicted: float

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.predicted / self.obs.measured - 1.0)


@dataclass(frozen=True, slots=True)
class FitResult:
    terms: dict[str, float]        # every efficiency term after the fit
    free: tuple[str, ...]
    rows: tuple[Row, ...]
    rms_log_error: float
    iterations: int


SIM_MAX_ITER = 8


def _solve_lm(resid: Callable[[np.ndarray], np.ndarray], x0: np.ndarray, lo: np.ndarray,
              hi: np.ndarray, max_iter: int = 200,
              rel_tol: float = 0.0) -> tuple[np.ndarray, int]:
    """Levenberg–Marquardt with a forward-difference Jacobian and box clipping."""
    import numpy as np
    x, lam, it = np.clip(x0, lo, hi), 1e-2, 0
    r = resid(x)
    for it in range(1, max_iter + 1):   # noqa: B007  (iteration count is returned)
        jac = np.empty((r.size, x.size))
        for j in range(x.size):
            h = 1e-6 * max(1.0, abs(x[j]))
            xj = x.copy()
            xj[j] += h
            jac[:, j] = (resid(xj) - r) / h
        a, g = jac.T @ jac, jac.T @ r
        improved = False
        for _ in range(30):
            step = np.linalg.solve(a + lam * np.diag(np.diag(a) + 1e-12), -g)
            xn = np.clip(x + step, lo, hi)
            rn = resid(xn)
            if rn @ rn < r @ r:
                gain = r @ r - rn @ rn
                x, r, lam, improved = xn, rn, max(lam / 3, 1e-12), True
                break
            lam *= 4
        if not improved or gain < max(1e-14, rel_tol * float(r @ r + gain)):
            break
    return x, it


def fit_terms(points: Sequence[Observation], hardware: str, model: str, *,
              free: Sequence[str] = DEFAULT_FREE,
              engine: dict[str, Any] | None = None) -> FitResult:
    """Fit the `free` efficiency terms (others stay at the card's profile values)."""
    unknown = [f for f in free if f not in BOUNDS]
    if unknown:
        raise InputError(f"fit: unknown term(s) {', '.join(unknown)} "
                         f"(known: {', '.join(BOUNDS)})")
    if not points:
        raise InputError("fit: no points to fit")
    hw, mp = load_hardware(hardware), load_model(model)
    settings = load_engine_settings(hw, engine)
    base, _ = efficiency_for(hw)
    import numpy as np
    weights = np.array([math.sqrt(p.weight) for p in points])
    lo = np.log([BOUNDS[f][0] for f in free])
    hi = np.log([BOUNDS[f][1] for f in free])

    def build(x: np.ndarray) -> RooflinePerfModel:
        eff = base.model_copy(update=dict(zip(free, np.exp(x).tolist(), strict=True)))
        return RooflinePerfModel(hw, mp, settings, Efficiency.model_validate(eff.model_dump()))

    def resid(x: np.ndarray) -> np.ndarray:
        pm = build(x)
        pred = [predict(pm, p, smooth=True) for p in points]
        return weights * np.log(np.array(pred) / [p.measured for p in points])

    x0 = np.log([max(getattr(base, f), BOUNDS[f][0]) for f in free])
    # spec_decode points are closed-loop simulations (~0.1–2 s each): few iterations,
    # stopping at a 1e-4 relative gain
    sims = any(p.kind == "spec_decode" for p in points)
    x, iters = _solve_lm(resid, x0, lo, hi, max_iter=SIM_MAX_ITER if sims else 200,
                         rel_tol=1e-4 if sims else 0.0)
    pm = build(x)
    rows = tuple(Row(p, predict(pm, p)) for p in points)
    r = resid(x)
    return FitResult(terms=pm.efficiency.model_dump(exclude={"source"}), free=tuple(free),
                     rows=rows, rms_log_error=float(math.sqrt(r @ r / r.size)),
                     iterations=iters)


def evaluate(points: Sequence[Observation], pm: RooflinePerfModel) -> tuple[Row, ...]:
    """Predictions of an existing model for each point (no fitting)."""
    return tuple(Row(p, predict(pm, p)) for p in points)
