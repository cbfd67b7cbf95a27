"""Calibration points run through the product's own path: a scenario run exactly as
`endurance run` runs it (the same content synthesis, records and summary), reduced to
the summary figures a calibration row compares with a measurement.

`benchmarks/calibration.py` builds its speculation rows from these, so a figure it
prints is the figure a user gets from `endurance run SCENARIO --spec …` on the
matching scenario (`scenarios/calibration/`); the bench's private closed loop
(`twin.spec_whatif`) used other content and gave other figures (notes in
docs/twin-fidelity.md).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.runs import RunSpec, execute

SCENARIO_DIR = Path(__file__).resolve().parents[1] / "scenarios" / "calibration"
CODE_EDIT_SCENARIO = SCENARIO_DIR / "code-edit-single-stream.yaml"


@dataclass(frozen=True, slots=True)
class PointRun:
    """The summary figures of one calibration run (None where the run has none)."""

    decode_tok_s_median: float | None      # median (output − 1) / (last − first token)
    per_session_tok_s: float | None        # Σ output / Σ e2e per session, mean
    tokens_per_forward_pass: float | None  # speculation's tokens per pass
    summary: dict[str, Any]


def run_point(scenario: str | Path, *, twin: str | None = None, spec: str = "off",
              overrides: tuple[str, ...] = ()) -> PointRun:
    """Run `scenario` on the in-process twin as `endurance run` does (results in a
    temporary directory) and return its summary figures."""
    with tempfile.TemporaryDirectory(prefix="endurance-calibration-") as out:
        result = execute(RunSpec(str(scenario), list(overrides), twin=twin, spec=spec,
                                 out_dir=Path(out), show_progress=False),
                         echo=lambda _line: None)
    if result.status != "completed":
        raise RuntimeError(f"calibration run of {scenario} ended {result.status}: "
                           f"{result.outcome.reason}")
    s = result.summary

    def num(key: str) -> float | None:
        value = s.get(key)
        return float(value) if isinstance(value, int | float) else None

    return PointRun(num("decode_tok_s_median"), num("per_session_tok_s"),
                    num("tokens_per_forward_pass"), s)
