"""`size --ramp` as a profile of the pipeline: one point, a run whose session count steps
(a stepped ramp, `StepRamp`, passed to the run as a value).

The ramp's steps are held and judged inside that one run (`session/ramp.py`); this
profile yields the run and reads its `ramp` fact back. `api.ramp` states the answer
beside the probe search's: on the twin it runs the probe search of the same scenario
too (unless told not to), or takes the one `--from-twin` ran, so the answer says how
much GPU time the ramp spent against what the probe search would have spent.
"""

from __future__ import annotations

import json
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from simulator.analysis.goodput import goodput_of_slos
from simulator.analysis.ramp import plan_steps
from simulator.analysis.sizing import SizingResult
from simulator.analysis.slo import Slo
from simulator.errors import InputError
from simulator.scenario.model import RampTier, StepRamp
from simulator.sweep.point import Point, PointResult
from simulator.sweep.profiles import PointBase
from simulator.util.bounded import json_file


def step_ramp(steps: Sequence[int], hold_s: float, max_step_s: float,
              tiers: Sequence[RampTier], refine: bool = True,
              confirm: bool = True) -> StepRamp:
    """The stepped ramp a run holds (`load.ramp`, passed to the run as a value): each
    step held `hold_s`, judged against `tiers`; one InputError line for a plan no run
    could hold."""
    try:
        return StepRamp(steps=list(steps), hold_s=hold_s, max_step_s=max_step_s,
                        tiers=list(tiers), refine=refine, confirm=confirm)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = "".join(f"{p}: " for p in err["loc"][:1])
        raise InputError(f"--ramp: {where}{err['msg'].removeprefix('Value error, ')}") \
            from None


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
    """One point: the scenario with the stepped ramp `plan` (see the module docstring)."""

    base: PointBase
    ramp: StepRamp
    answers_interrupted = True    # an interrupted ramp's answer says so (RampAnswer)

    def plan(self, width: int) -> Generator[list[Point], list[PointResult], RampAnswer]:
        # the ramp has its own length: a scenario's constant-load duration (kept for
        # the probe search it is compared with) would cut it short
        point = self.base.point(None, extra=("load.duration_s=null",), label="ramp",
                                coords={"ramp": True}, ramp=self.ramp)
        (result,) = yield [point]
        result.raise_error("of the ramp")
        return answer_of(result.summary, result.run_dir, result.status == "interrupted")


def _number(v: object) -> float | None:
    return v if isinstance(v, int | float) and not isinstance(v, bool) else None


def answer_of(s: Mapping[str, object], run_dir: str, interrupted: bool) -> RampAnswer:
    """A ramp run's answer from its summary (summary.json's keys)."""
    ramp = s.get("ramp")
    return RampAnswer(ramp if isinstance(ramp, Mapping) else {}, run_dir,
                      _number(s.get("wall_window_s")), bool(s.get("simulated")),
                      _number(s.get("price_per_hour")), interrupted=interrupted)


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


def refresh_size_answer(run_dir: Path, summary: Mapping[str, object],
                        status: str) -> Path | None:
    """`run --resume` of a `size --ramp` run: its size folder's `size.json` (the run's
    parent, naming this run) rewritten from the resumed run's ramp, the searches it was
    compared with kept. None when the run is no size folder's ramp."""
    path = run_dir.parent / "size.json"
    try:
        data = json_file(path, what="size answer") if path.is_file() else None
    except InputError:
        return None
    if not isinstance(data, dict) or "ramp" not in data or not summary.get("ramp") \
            or Path(str(data.get("run_dir"))).resolve() != run_dir.resolve():
        return None
    new = answer_of(summary, str(data["run_dir"]), status == "interrupted").to_dict()
    new["compared"] = data.get("compared") or []
    path.write_text(json.dumps(new, indent=2, default=str) + "\n")
    return path


def goodput_overrides(base: PointBase, slos: Sequence[Slo], tiers: Sequence[float]
                      ) -> list[str]:
    """`size`'s goodput overrides: goodput counts what the SLOs name (their TTFT bound,
    their speed floor, `analysis.goodput.goodput_of_slos`), unless the scenario or a
    --set gives goodput its own, or --tier carries its own per tier."""
    if tiers:
        return []
    keys = base.top_keys()
    g = None if "goodput" in (keys if keys is not None else base.resolve()[1]) \
        else goodput_of_slos(slos)
    return [] if g is None else [f"goodput.ttft_s={g.ttft_s}",
                                 f"goodput.output_tok_s={g.output_tok_s}"]
