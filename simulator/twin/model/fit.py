"""Fit the performance model's efficiency terms to measured points.

A points file (YAML or CSV) lists observations of one card × model: decode tokens/s at a
batch and context, prefill time or rate of a prompt (with its cached prefix), and the KV
capacity the engine logged. The fit is a Levenberg–Marquardt least squares on log
residuals (relative errors), over the log of each free term, with bounds; numpy only.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from simulator.errors import InputError
from simulator.twin.bench.closed_loop import (
    MAX_CONCURRENCY,
    MAX_PROMPTS,
    MAX_TOKENS,
    BenchLoad,
    BenchResult,
    run_bench,
)
from simulator.twin.model.perf_model import RooflinePerfModel, decode_tok_s, prefill_seconds
from simulator.twin.model.point_checks import (
    MAX_PROMPT_LOOKUP,
    BenchMetric,
    bench_figure,
    check_bench,
    check_point,
)
from simulator.twin.model.profiles import (
    DEFAULT_FREE,
    Efficiency,
    efficiency_for,
    kernel_family,
    load_engine_settings,
    load_hardware,
    load_model,
)
from simulator.twin.spec_decode.exchanges import Exchange, checked_replay
from simulator.twin.spec_decode.ngram import NgramSpec, parse_spec
from simulator.twin.spec_decode.replay import replay_streams
from simulator.util.bounded import text_file
from simulator.util.numbers import finite_float

if TYPE_CHECKING:  # numpy is imported by the fitting code only: CLI start-up stays short
    import numpy as np

# Bounds of each term (the fit works on their logarithms, so lower bounds are > 0).
BOUNDS: dict[str, tuple[float, float]] = {
    "t0_s": (1e-6, 0.05), "t_seq_s": (1e-8, 0.01), "eta_w": (0.05, 1.0),
    "eta_kv": (0.05, 1.0), "kv_half_seqs": (1e-3, 200.0), "eta_s": (0.05, 1.0),
    "eta_c": (0.01, 1.0), "eta_attn": (0.01, 1.0), "routing_skew": (0.05, 3.0),
    "reserve_bytes": (1e6, 1e12),
    "spec_step_s": (1e-6, 0.5), "spec_seq_s": (1e-7, 0.05), "spec_verify_tok_s": (1e-8, 0.01),
    "ngram_ctx_tok_s": (1e-12, 1e-6), "eager_step_s": (1e-5, 0.5),
    "mixed_step_s": (1e-7, 0.05), "mixed_seq_s": (1e-8, 1e-3), "allreduce_s": (1e-7, 1e-3),
}


# What a measured point may hold (issue 38): finite numbers within what an engine serves.
MAX_MEASURED = 1e12          # tok/s, seconds, tokens or a ratio
MAX_BATCH = 1 << 20          # running sequences (vLLM's max_num_seqs, as `--max-num-seqs`)
MAX_CONTEXT = 100_000_000    # tokens (a scenario's context window bound)
MAX_POINTS_BYTES = 64 << 20  # a points file
class Observation(BaseModel):
    """One measured figure. Units: tok_s (decode aggregate or prompt tokens / TTFT),
    s (TTFT), tokens (KV capacity)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    kind: Literal["decode", "prefill", "kv_capacity", "spec_decode", "spec_replay", "bench"]
    measured: float = Field(gt=0, le=MAX_MEASURED)
    unit: Literal["tok_s", "s", "tokens", "ratio"]
    batch: int = Field(default=1, gt=0, le=MAX_BATCH)
    context: int = Field(default=0, ge=0, le=MAX_CONTEXT)
    prompt_tokens: int = Field(default=0, ge=0, le=MAX_CONTEXT)
    cached_tokens: int = Field(default=0, ge=0, le=MAX_CONTEXT)
    low: float | None = Field(default=None, ge=0, le=MAX_MEASURED)
    high: float | None = Field(default=None, ge=0, le=MAX_MEASURED)
    weight: float = Field(default=1.0, ge=0, le=1e6)
    label: str = ""
    note: str = ""
    # spec_decode: a run of the product's path (`endurance run`, through the runner the
    # caller injects: see `ScenarioRunner`) of `scenario` (None: the calibration's
    # code-edit or fresh-text scenario, by `code_edit`) with `batch` sessions, `turns`
    # turns, this speculation setting and `overrides` (`--set` style); the value is the
    # summary's `figure`, × `batch` for a per-stream figure in tok_s (vLLM's published
    # "aggregate", N × the per-session rate); ratio = that over the same run with
    # speculation off
    spec: str = "off"
    code_edit: bool = True
    turns: int = Field(default=3, gt=0, le=1_000_000)
    max_num_batched_tokens: int | None = None
    scenario: str | None = None
    overrides: tuple[str, ...] = ()
    figure: Literal["decode_tok_s_median", "per_session_tok_s", "aggregate_tok_s"] = \
        "decode_tok_s_median"
    # spec_replay: a real model's own replies (`exchanges`: a JSON file of [prompt ids,
    # reply ids] pairs, next to the points file) sent by `batch` clients back to back and
    # timed on a real server with n-gram speculation `spec` (prompt lookup min/max); the
    # value is Σ output tokens / Σ request seconds, the twin's by replaying those ids
    # (`spec_decode.replay.replay_streams`): its acceptance is the real text's
    exchanges: str | None = None
    prompt_lookup_min: int = Field(default=5, ge=1, le=MAX_PROMPT_LOOKUP)
    prompt_lookup_max: int = Field(default=5, ge=1, le=MAX_PROMPT_LOOKUP)
    # bench: one figure of a `vllm bench serve` run (random prompts of `input_tokens`,
    # replies of `output_tokens`, `num_prompts` requests, a closed loop of `concurrency`
    # or `request_rate` req/s, `prefix_share` of each prompt shared), predicted by the
    # same run on the twin (`twin.bench.closed_loop`); `metric` names the figure, in s
    # (times) or tok_s (output_tok_s)
    input_tokens: int = Field(default=0, ge=0, le=MAX_TOKENS)
    output_tokens: int = Field(default=0, ge=0, le=MAX_TOKENS)
    concurrency: int | None = Field(default=None, gt=0, le=MAX_CONCURRENCY)
    request_rate: float | None = Field(default=None, gt=0, le=MAX_MEASURED)
    # the gamma shape of the arrivals at `request_rate` (1: Poisson; inf: evenly spaced)
    burstiness: float = Field(default=1.0, gt=0, allow_inf_nan=True)
    num_prompts: int = Field(default=0, ge=0, le=MAX_PROMPTS)
    prefix_share: float = Field(default=0.0, ge=0, lt=1)
    # the client drew each length uniformly in [int(length_low_ratio × n), n] (0: n itself)
    length_low_ratio: float = Field(default=0.0, ge=0, le=1)
    # the client timed the first chunk with text (AIPerf, GuideLLM, many scripts), not the
    # first chunk (vLLM's client): on a model whose chat stream opens with tokens that
    # carry none (`ModelProfile.chat_first_text_token`: gpt-oss 4) the twin times that one
    first_text: bool = False
    metric: BenchMetric | None = None

    @model_validator(mode="after")
    def _fits_its_kind(self) -> Observation:
        check_point(self.kind, self.unit, spec=self.spec, batch=self.batch,
                    lookup=(self.prompt_lookup_min, self.prompt_lookup_max),
                    exchanges=self.exchanges)
        if self.kind == "bench":
            check_bench(self.metric, self.unit, self.input_tokens, self.output_tokens,
                        self.num_prompts)
        elif self.metric is not None:
            raise ValueError(f"metric is a bench point's field, not a {self.kind} point's")
        return self

    def bench_load(self, first_text_token: int = 1) -> BenchLoad:
        """The `vllm bench serve` run a bench point measured (warm-up: vLLM's test
        request), timed from `first_text_token` (the model's) if its client timed the first
        text."""
        return BenchLoad(self.input_tokens, self.output_tokens, self.num_prompts,
                         concurrency=self.concurrency, request_rate=self.request_rate,
                         burstiness=self.burstiness, prefix_share=self.prefix_share,
                         low_ratio=self.length_low_ratio,
                         first_timed_token=first_text_token if self.first_text else 1)


PER_STREAM_FIGURES = frozenset({"decode_tok_s_median", "per_session_tok_s"})


@dataclass(frozen=True, slots=True)
class ScenarioPoint:
    """One run a spec_decode observation asks for: `endurance run SCENARIO --set
    OVERRIDES --spec SPEC` on the fit's card × model with the candidate's efficiency
    `terms` (the runner applies them to the in-process twin; no profile file is written).
    `scenario` None: the calibration's default scenario for `code_edit`."""

    scenario: str | None
    code_edit: bool
    overrides: tuple[str, ...]
    spec: str
    terms: tuple[tuple[str, float], ...]


# Runs a ScenarioPoint through the product's path and returns its summary (summary.json's
# figures). The twin layer cannot import the run path (it sits above), so the caller
# injects it: `simulator.sweep.calibration.point_runner` (benchmarks, `endurance twin fit`).
ScenarioRunner = Callable[[ScenarioPoint], Mapping[str, object]]


class PointsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    hardware: str | None = None
    model: str | None = None
    source: str = ""
    engine: dict[str, object] = Field(default_factory=dict)
    fit: list[str] | None = None
    assumptions: list[str] = Field(default_factory=list)
    points: list[Observation] = Field(max_length=10_000)   # each is predicted per iteration


def load_points(path: str | Path) -> PointsFile:
    """Read observations from a YAML file (with metadata) or a CSV (one point per row).
    A FIFO, a device, a file over MAX_POINTS_BYTES, text that is not UTF-8 and numbers
    that are not finite or past their bounds are one InputError line."""
    p = Path(path)
    text = text_file(p, "points file", MAX_POINTS_BYTES)
    if p.suffix.lower() == ".csv":
        try:
            rows = [{k: v for k, v in row.items() if v not in ("", None)}
                    for row in csv.DictReader(text.splitlines())]
        except csv.Error as exc:
            raise InputError(f"{p}: not a CSV points file ({exc})") from None
        data: object = {"points": rows}
    else:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InputError(f"{p}: not valid YAML ({str(exc).splitlines()[0]})") from None
        except RecursionError:
            raise InputError(f"{p}: YAML nested too deeply") from None
    try:
        pf = PointsFile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        raise InputError(f"{p}: {loc}: {msg}") from None
    pf = pf.model_copy(update={"points": [_exchanges_near(_near(o, p.parent), p.parent)
                                          for o in pf.points]})
    for o in pf.points:      # an exchanges file is refused now, not mid-fit
        if o.kind == "spec_replay":
            replay_exchanges(o)
    return pf


def _near(obs: Observation, base: Path) -> Observation:
    """A relative `scenario` found next to the points file is read from there (else it is
    taken as given, relative to the working directory, as `endurance run` takes it)."""
    if obs.scenario is None or Path(obs.scenario).is_absolute():
        return obs
    near = base / obs.scenario
    return obs.model_copy(update={"scenario": str(near)}) if near.is_file() else obs


def _exchanges_near(obs: Observation, base: Path) -> Observation:
    if obs.exchanges is None or Path(obs.exchanges).is_absolute():
        return obs
    return obs.model_copy(update={"exchanges": str(base / obs.exchanges)})


BenchRuns = dict[BenchLoad, BenchResult]    # one twin run per load, shared by its figures


def predict(pm: RooflinePerfModel, obs: Observation, *, smooth: bool = False,
            runner: ScenarioRunner | None = None, bench: BenchRuns | None = None) -> float:
    """The model's value for an observation, in the observation's unit (spec_decode
    points: runs of the product's path, through `runner`; bench points: the run on the
    twin, kept in `bench` for the other figures of the same run)."""
    if obs.kind == "bench":
        load = obs.bench_load(pm.model.chat_first_text_token)
        runs = bench if bench is not None else {}
        if load not in runs:
            runs[load] = run_bench(pm, load)
        assert obs.metric is not None     # checked by Observation
        return bench_figure(runs[load], obs.metric)
    if obs.kind == "kv_capacity":
        return pm.kv_pool_tokens() if smooth else float(pm.kv_capacity_tokens())
    if obs.kind == "decode":
        return decode_tok_s(pm, obs.batch, obs.context)
    if obs.kind == "spec_replay":
        return _spec_replay(pm, obs)
    if obs.kind == "spec_decode":
        if runner is None:
            raise InputError(f"fit: spec_decode point {obs.label or obs.spec!r} runs a "
                             "scenario through `endurance run`'s path; give a runner "
                             "(simulator.sweep.calibration.point_runner)")
        return _spec_decode(pm, obs, runner)
    seconds = prefill_seconds(pm, obs.prompt_tokens, obs.cached_tokens)
    return seconds if obs.unit == "s" else obs.prompt_tokens / seconds


def scenario_point(pm: RooflinePerfModel, obs: Observation, spec: str) -> ScenarioPoint:
    """The run behind a spec_decode observation, with `pm`'s efficiency terms."""
    over = [f"sessions={obs.batch}", f"turns={obs.turns}"]
    if spec.strip().lower() not in ("", "off", "none") and obs.max_num_batched_tokens:
        over.append(f"twin.max_num_batched_tokens={obs.max_num_batched_tokens}")
    terms = tuple((k, float(v)) for k, v in
                  pm.efficiency.model_dump(exclude={"source"}).items())
    return ScenarioPoint(obs.scenario, obs.code_edit, (*over, *obs.overrides), spec, terms)


def replay_exchanges(obs: Observation, kv_tokens: int | None = None) -> tuple[Exchange, ...]:
    """A spec_replay point's exchanges, checked against what one replay may cost and,
    given `kv_tokens`, against the twin's KV cache (`spec_decode.exchanges`)."""
    label = obs.label or "spec_replay"
    if obs.exchanges is None:
        raise InputError(f"fit: spec_replay point {label!r} names no exchanges file")
    return checked_replay(obs.exchanges, obs.batch, f"fit: spec_replay point {label!r}",
                          kv_tokens)


def _spec_replay(pm: RooflinePerfModel, obs: Observation) -> float:
    """The real replies of a spec_replay point replayed by `pm`'s card and terms with
    the point's n-gram speculation: Σ output tokens / Σ request seconds."""
    parsed = parse_spec(obs.spec)     # checked by Observation: an n-gram setting
    assert isinstance(parsed, NgramSpec)
    spec = NgramSpec(parsed.num_speculative_tokens, obs.prompt_lookup_min,
                     obs.prompt_lookup_max)
    on = RooflinePerfModel(pm.hardware, pm.model, pm.engine.model_copy(
        update={"spec": obs.spec}), pm.efficiency, quantization=pm.quantization)
    pairs = replay_streams(replay_exchanges(obs, on.kv_capacity_tokens()), spec, obs.batch, on)
    seconds = sum(s for _, s in pairs)
    if seconds <= 0:
        raise InputError(f"fit: spec_replay point {obs.label!r}: nothing to replay")
    return sum(n for n, _ in pairs) / seconds


def point_figure(summary: Mapping[str, object], obs: Observation) -> float:
    """The observation's figure from a run summary (× sessions for a per-stream rate)."""
    got = summary.get(obs.figure)
    value = finite_float(got)
    if value is None or value <= 0:
        raise InputError(f"fit: point {obs.label or obs.spec!r}: its run has no "
                         f"{obs.figure} (got {got!r})")
    scale = obs.batch if obs.figure in PER_STREAM_FIGURES else 1
    return value * scale


def _spec_decode(pm: RooflinePerfModel, obs: Observation, runner: ScenarioRunner) -> float:
    """The observation's scenario run on this model's efficiency terms (and, for a ratio,
    the same run with speculation off)."""
    on = point_figure(runner(scenario_point(pm, obs, obs.spec)), obs)
    if obs.unit != "ratio":
        return on
    return on / point_figure(runner(scenario_point(pm, obs, "off")), obs)


def cached(runner: ScenarioRunner) -> ScenarioRunner:
    """`runner` remembering its summaries (a fit asks for the same run more than once)."""
    seen: dict[ScenarioPoint, Mapping[str, object]] = {}

    def run(point: ScenarioPoint) -> Mapping[str, object]:
        if point not in seen:
            seen[point] = runner(point)
        return seen[point]
    return run


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
            if x[j] + h > hi[j]:        # at the upper bound: a backward difference (a
                h = -h                  # forward one is clipped to the same point: 0)
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
              engine: Mapping[str, object] | None = None,
              runner: ScenarioRunner | None = None,
              quantization: str | None = None) -> FitResult:
    """Fit the `free` efficiency terms (others stay at the card's profile values).
    spec_decode points need `runner` (see `ScenarioRunner`); the engine settings of their
    runs are their scenarios', not `engine`."""
    unknown = [f for f in free if f not in BOUNDS]
    if unknown:
        raise InputError(f"fit: unknown term(s) {', '.join(unknown)} "
                         f"(known: {', '.join(BOUNDS)})")
    if not points:
        raise InputError("fit: no points to fit")
    if not free:
        raise InputError("fit: no term to fit")
    if not any(p.weight > 0 for p in points):
        raise InputError("fit: every point's weight is 0; nothing to fit")
    hw, mp = load_hardware(hardware), load_model(model)
    settings = load_engine_settings(hw, engine)
    base, _ = efficiency_for(hw, kernel_family(mp, quantization))
    import numpy as np
    weights = np.array([math.sqrt(p.weight) for p in points])
    lo = np.log([BOUNDS[f][0] for f in free])
    hi = np.log([BOUNDS[f][1] for f in free])

    def build(x: np.ndarray) -> RooflinePerfModel:
        # exp(log(bound)) may round past the bound, and the Jacobian's step may cross it:
        # values are clipped to their bounds in linear space (the profile refuses eta > 1)
        values = {f: min(max(v, BOUNDS[f][0]), BOUNDS[f][1])
                  for f, v in zip(free, np.exp(x).tolist(), strict=True)}
        eff = base.model_copy(update=values)
        return RooflinePerfModel(hw, mp, settings, Efficiency.model_validate(eff.model_dump()),
                                 quantization=quantization)

    run = cached(runner) if runner is not None else None

    def resid(x: np.ndarray) -> np.ndarray:
        pm = build(x)
        runs: BenchRuns = {}
        pred = [predict(pm, p, smooth=True, runner=run, bench=runs) for p in points]
        return weights * np.log(np.array(pred) / [p.measured for p in points])

    start = base.model_dump()        # the free terms by name (`Efficiency`'s fields)
    x0 = np.log([max(start[f], BOUNDS[f][0]) for f in free])
    # spec_decode points are runs of the product's path (~0.3–2 s each): few iterations,
    # stopping at a 1e-4 relative gain
    sims = any(p.kind == "spec_decode" for p in points)
    x, iters = _solve_lm(resid, x0, lo, hi, max_iter=SIM_MAX_ITER if sims else 200,
                         rel_tol=1e-4 if sims else 0.0)
    pm = build(x)
    runs: BenchRuns = {}
    rows = tuple(Row(p, predict(pm, p, runner=run, bench=runs)) for p in points)
    r = resid(x)
    return FitResult(terms=pm.efficiency.model_dump(exclude={"source"}), free=tuple(free),
                     rows=rows, rms_log_error=float(math.sqrt(r @ r / r.size)),
                     iterations=iters)


def evaluate(points: Sequence[Observation], pm: RooflinePerfModel, *,
             runner: ScenarioRunner | None = None) -> tuple[Row, ...]:
    """Predictions of an existing model for each point (no fitting)."""
    run = cached(runner) if runner is not None else None
    runs: BenchRuns = {}
    return tuple(Row(p, predict(pm, p, runner=run, bench=runs)) for p in points)
