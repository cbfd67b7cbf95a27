"""`size --ramp` as a profile of the pipeline: one point, a run whose session count steps.

The ramp's steps are held and judged inside that one run (`session/ramp.py`); this
profile yields the run, reads its `ramp` fact back, and states the answer beside the
probe search's: on the twin it runs the probe search of the same scenario too (unless
told not to), or takes the one `--from-twin` ran, so the answer says how much GPU time
the ramp spent against what the probe search would have spent.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from simulator.analysis.goodput import DEFAULT_TTFT_S, goodput_of_slos
from simulator.analysis.ramp import plan_steps
from simulator.analysis.sizing import SizingResult
from simulator.analysis.slo import Slo
from simulator.scenario.load import load_scenario
from simulator.sweep.point import Point, PointResult
from simulator.sweep.profiles import PointBase


def tier_specs(slos: Sequence[Slo], floors: Sequence[float], ttft_s: float | None,
               attainment: float) -> list[dict[str, Any]]:
    """The ramp's tiers: `--slo`s as one tier; each `--tier FLOOR` as an output-speed
    tier (its window goodput share under TTFT ≤ ttft_s and ≥ FLOOR tok/s at least
    `attainment`, plus the `--slo`s), the loosest first."""
    if not floors:
        return [{"name": "SLOs", "slos": [str(s) for s in slos]}]
    ttft = DEFAULT_TTFT_S if ttft_s is None else ttft_s
    return [{"name": f"{floor:g} tok/s", "slos": [f"window_goodput_share>={attainment:g}",
                                                 *(str(s) for s in slos)],
             "goodput": {"ttft_s": ttft, "output_tok_s": floor}}
            for floor in sorted(set(floors))]


def ramp_override(steps: Sequence[int], hold_s: float, max_step_s: float,
                  tiers: Sequence[Mapping[str, Any]], refine: bool = True,
                  confirm: bool = True) -> str:
    """The `--set load.ramp=…` that gives a run this ramp (YAML flow style)."""
    ramp = {"steps": list(steps), "hold_s": hold_s, "max_step_s": max_step_s,
            "tiers": list(tiers), "refine": refine, "confirm": confirm}
    text = yaml.safe_dump(ramp, default_flow_style=True, width=10**9).strip()
    return f"load.ramp={text}"


@dataclass
class RampAnswer:
    """A ramp run's answer: its `ramp` fact, run directory, how long it ran (simulated
    seconds on the twin, wall seconds against a server) and the probe search it is
    compared with (None when none ran)."""

    ramp: Mapping[str, Any]
    run_dir: str
    seconds: float | None
    simulated: bool
    price_per_hour: float | None
    compared: list[tuple[str, SizingResult]] = field(default_factory=list)
    interrupted: bool = False     # Ctrl-C/SIGTERM ended the ramp: its steps, no answer
    compare_interrupted: str | None = None   # the ramp ran out; the search beside it did not

    @property
    def judged(self) -> int:
        """How many steps were held and judged."""
        return len(self.ramp.get("steps") or [])

    def search_seconds(self, result: SizingResult) -> float:
        """What a probe search spent: its probes' runs, each in its own time."""
        return sum(float(p.summary.get("wall_window_s") or 0.0)
                   for p in [*result.probes, *result.unused])

    def to_dict(self) -> dict[str, Any]:
        """size.json's ramp answer; an interrupted ramp's is labelled so, its tiers'
        `sessions` None (what the judged steps showed is `sessions_so_far`), so nothing
        reading it takes the partial ramp for an answer."""
        ramp = dict(self.ramp)
        if self.interrupted:
            ramp["tiers"] = [{**t, "sessions": None, "sessions_so_far": t.get("sessions"),
                              "complete": False, "binding": None, "binding_kind": None,
                              "margin": None, "confirmed": None}
                             for t in ramp.get("tiers") or []]
        return {"status": "interrupted" if self.interrupted else "completed",
                "interrupted": self.interrupted, "judged_steps": self.judged,
                "compare_interrupted": self.compare_interrupted,
                "ramp": ramp, "run_dir": self.run_dir, "seconds": self.seconds,
                "simulated": self.simulated, "price_per_hour": self.price_per_hour,
                "compared": [{"name": name, "sessions": r.sessions,
                              "sessions_range": list(r.sessions_range),
                              "probes": len(r.probes) + len(r.unused),
                              "seconds": self.search_seconds(r)} for name, r in self.compared]}


@dataclass
class RampProfile:
    """One point: the scenario with `load.ramp` set (see the module docstring)."""

    base: PointBase
    override: str
    answers_interrupted = True    # an interrupted ramp's answer says so (RampAnswer)

    def plan(self, width: int) -> Generator[list[Point], list[PointResult], RampAnswer]:
        # the ramp has its own length: a scenario's constant-load duration (kept for
        # the probe search it is compared with) would cut it short
        point = self.base.point(None, extra=("load.duration_s=null", self.override),
                                label="ramp", coords={"ramp": True})
        (result,) = yield [point]
        result.raise_error("of the ramp")
        return answer_of(result.summary, result.run_dir, result.status == "interrupted")


def answer_of(s: Mapping[str, Any], run_dir: str, interrupted: bool) -> RampAnswer:
    """A ramp run's answer from its summary."""
    return RampAnswer(s.get("ramp") or {}, run_dir, s.get("wall_window_s"),
                      bool(s.get("simulated")), s.get("price_per_hour"),
                      interrupted=interrupted)


def start_from(answer: int, max_sessions: int) -> tuple[int, ...]:
    """Steps for a real ramp started from the twin's answer: a step or two below it
    (half of it), then up by a quarter of it, to the bound."""
    if answer < 1:
        return plan_steps(1, max_sessions)
    start = max(1, min(max_sessions, answer // 2))
    return plan_steps(start, max_sessions, add=max(1, answer // 4))


def comparison_base(base: PointBase, has_duration: bool) -> PointBase:
    """The probe search a ramp is compared with: the same scenario, each probe a
    constant-load run (the scenario's `--duration`, else 10 minutes) from a warm start."""
    extra = () if has_duration else ("load.duration_s=600", "load.warm_start=true")
    return base.under("probe-search", extra)


def refresh_size_answer(run_dir: Path, summary: Mapping[str, Any], status: str) -> Path | None:
    """`run --resume` of a `size --ramp` run: its size folder's `size.json` (the run's
    parent, naming this run) rewritten from the resumed run's ramp, the searches it was
    compared with kept. None when the run is no size folder's ramp."""
    path = run_dir.parent / "size.json"
    try:
        data = json.loads(path.read_text()) if path.is_file() else None
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or "ramp" not in data or not summary.get("ramp") \
            or Path(str(data.get("run_dir"))).resolve() != run_dir.resolve():
        return None
    new = answer_of(summary, str(data["run_dir"]), status == "interrupted").to_dict()
    new["compared"] = data.get("compared") or []
    path.write_text(json.dumps(new, indent=2, default=str) + "\n")
    return path


def goodput_overrides(scenario: str, slos: Sequence[Slo], tiers: Sequence[float],
                      overrides: Sequence[str]) -> list[str]:
    """`size`'s goodput overrides: goodput counts what the SLOs name (their TTFT bound,
    their speed floor, `analysis.goodput.goodput_of_slos`), unless the scenario or a
    --set gives goodput its own, or --tier carries its own per tier."""
    if tiers:
        return []
    _, resolved = load_scenario(scenario, list(overrides))
    g = None if "goodput" in resolved else goodput_of_slos(slos)
    return [] if g is None else [f"goodput.ttft_s={g.ttft_s}",
                                 f"goodput.output_tok_s={g.output_tok_s}"]
