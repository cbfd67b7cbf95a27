"""Calibration points run through the product's own path: a scenario run exactly as
`endurance run` runs it (the same content synthesis, records and summary), reduced to
the summary figures a calibration row compares with a measurement.

`benchmarks/calibration.py` builds every row that simulates sessions from `RUNS` (each
an `endurance run` of a scenario under `scenarios/calibration/`), and `endurance twin
fit` runs its spec_decode points through `point_runner` with each candidate's efficiency
terms, so a figure the bench or a fit prints is the figure a user gets from `endurance
run` on the matching scenario. The private closed loop they used before
(`twin.spec_whatif`) had other content and gave other figures (docs/twin-fidelity.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.sweep.point import Point, PointResult, Target, run_point
from simulator.twin.model.fit import ScenarioPoint, ScenarioRunner

SCENARIO_DIR = Path(__file__).resolve().parents[2] / "scenarios" / "calibration"
CODE_EDIT_SCENARIO = SCENARIO_DIR / "code-edit-single-stream.yaml"
FRESH_TEXT_SCENARIO = SCENARIO_DIR / "fresh-text.yaml"
ISOLATED_20K_SCENARIO = SCENARIO_DIR / "code-edit-isolated-20k.yaml"
SESSIONS_PER_CARD_SCENARIO = SCENARIO_DIR / "sessions-per-card.yaml"
GB10_DRAFT_SCENARIO = SCENARIO_DIR / "gb10-draft-single-stream.yaml"


@dataclass(frozen=True, slots=True)
class PointRun:
    """The summary figures of one calibration run (None where the run has none)."""

    decode_tok_s_median: float | None      # median (output − 1) / (last − first token)
    per_session_tok_s: float | None        # Σ output / Σ e2e per session, mean
    tokens_per_forward_pass: float | None  # speculation's tokens per pass
    summary: dict[str, Any]


def run_calibration(scenario: str | Path, *, twin: str | None = None, spec: str | None = "off",
                    overrides: tuple[str, ...] = (),
                    terms: Mapping[str, float] | None = None) -> PointRun:
    """Run `scenario` on the in-process twin as `endurance run` does — one point of the
    search pipeline (`point.run_point`), results in a temporary directory — and return
    its summary figures. `spec` None: the scenario's own; `terms`: efficiency terms on
    top of the card's profile (a fit's candidate)."""
    return point_run(run_point(calibration_point(scenario, twin=twin, spec=spec,
                                                 overrides=overrides, terms=terms)))


def calibration_point(scenario: str | Path, *, twin: str | None = None,
                      spec: str | None = "off", overrides: tuple[str, ...] = (),
                      terms: Mapping[str, float] | None = None) -> Point:
    """The point a calibration run is (temporary: nothing is kept)."""
    return Point(str(scenario), tuple(overrides), "", f"calibration {Path(scenario).stem}",
                 Target(twin=twin, spec=spec),
                 twin_overrides=tuple(sorted((terms or {}).items())), temporary=True)


def point_run(result: PointResult) -> PointRun:
    """A calibration point's figures; a run that did not complete is an error: the
    InputError or RunError that stopped it (one line: a fit's point naming a file that
    is no scenario is the user's to fix), else a RuntimeError naming the run."""
    if result.status == "error":
        result.raise_error(f"calibration run of {result.point.scenario_path}")
    if result.status != "completed":
        raise RuntimeError(f"calibration run of {result.point.scenario_path} ended "
                           f"{result.status}: {result.reason}")
    s = result.summary

    def num(key: str) -> float | None:
        value = s.get(key)
        return float(value) if isinstance(value, int | float) else None

    return PointRun(num("decode_tok_s_median"), num("per_session_tok_s"),
                    num("tokens_per_forward_pass"), dict(s))


def point_runner(twin: str) -> ScenarioRunner:
    """The runner `twin.fit` takes for its spec_decode points: each point's scenario run
    through `run_point` on `twin` ("HARDWARE/MODEL", names or profile paths) with the
    candidate's terms; a point naming no scenario runs the code-edit or fresh-text one."""
    def run(point: ScenarioPoint) -> Mapping[str, Any]:
        default = CODE_EDIT_SCENARIO if point.code_edit else FRESH_TEXT_SCENARIO
        return run_calibration(point.scenario or default, twin=twin, spec=point.spec,
                               overrides=point.overrides, terms=dict(point.terms)).summary
    return run


@dataclass(frozen=True, slots=True)
class CalibrationRun:
    """One scenario run behind a row of `benchmarks/calibration.py`, as `endurance run`
    takes it (`cli_args`); a row's figure is built from the summaries of its runs."""

    scenario: Path
    twin: str | None = None          # None: the scenario's twin section
    spec: str | None = None          # None: the scenario's
    overrides: tuple[str, ...] = ()  # `--set KEY=VALUE`

    def cli_args(self) -> list[str]:
        """`endurance run` arguments that give this run."""
        args = [str(self.scenario)]
        if self.twin is not None:
            args += ["--twin", self.twin]
        if self.spec is not None:
            args += ["--spec", self.spec]
        for item in self.overrides:
            args += ["--set", item]
        return args

    def point(self) -> Point:
        return calibration_point(self.scenario, twin=self.twin, spec=self.spec,
                                 overrides=self.overrides)

    def run(self) -> PointRun:
        return point_run(run_point(self.point()))


A40_QWEN = "a40/qwen3-coder-30b-a3b-awq"
A40_KIMI = "a40/kimi-linear-48b-a3b-awq"


def _runs() -> dict[str, CalibrationRun]:
    runs = {f"code-edit {spec}": CalibrationRun(CODE_EDIT_SCENARIO, A40_QWEN, spec, over)
            for spec, over in (("ngram:5", ()),
                               ("ngram:12", ("twin.max_num_batched_tokens=16384",)),
                               ("ngram:24", ()))}
    runs |= {f"isolated-20k seed {seed}": CalibrationRun(ISOLATED_20K_SCENARIO, A40_QWEN,
                                                         "ngram:24", (f"seed={seed}",))
             for seed in range(1, 9)}
    for spec in ("ngram:5", "off"):
        runs[f"fresh 32 streams {spec}"] = CalibrationRun(
            FRESH_TEXT_SCENARIO, A40_QWEN, spec, ("sessions=32", "turns=2"))
        runs[f"fresh 1 stream {spec}"] = CalibrationRun(FRESH_TEXT_SCENARIO, A40_QWEN, spec)
        for n in (1, 8):
            runs[f"kimi {n} {spec}"] = CalibrationRun(FRESH_TEXT_SCENARIO, A40_KIMI, spec,
                                                      (f"sessions={n}", "turns=1"))
    runs["gb10 draft:7"] = CalibrationRun(GB10_DRAFT_SCENARIO)
    for n in (1, 32):     # 2 turns: a mean context of ~3.1k tokens, the fit's assumption
        runs[f"per-card {n}"] = CalibrationRun(SESSIONS_PER_CARD_SCENARIO, A40_QWEN, "off",
                                               (f"sessions={n}", "turns=2"))
    for n, turns in ((1, 12), (8, 12), (32, 6)):   # the bench's speed table
        runs[f"per-card {n} x{turns}"] = CalibrationRun(
            SESSIONS_PER_CARD_SCENARIO, A40_QWEN, "off", (f"sessions={n}", f"turns={turns}"))
    return runs


# every scenario run of benchmarks/calibration.py, by name (the bench's rows use these)
RUNS: dict[str, CalibrationRun] = _runs()
