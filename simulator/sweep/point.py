"""One point of a search: a picklable `Point` in, a `PointResult` out (`run_point`).

Every many-run answer — a sweep, a sizing search, a fleet or tier table, a what-if over
copy shares or speculation settings, the calibration runs and `twin fit`'s candidates —
runs its points through `run_point`, which is one ordinary `endurance run` (its own
results directory, unless the point is temporary). A point carries plain values only,
so a fan-out can ship it to another process or a Ray task and get a plain result back.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from simulator.analysis.early_verdict import EarlyRule
from simulator.analysis.notebook import find_run, run_summary
from simulator.analysis.run_summary import RunSummary
from simulator.endpoints.http.cache_reset import reset_prefix_cache
from simulator.errors import InputError, RunError
from simulator.run.execute import execute
from simulator.run.spec import RunSpec
from simulator.scenario.load import ScenarioSource
from simulator.scenario.model import StepRamp


@dataclass(frozen=True, slots=True)
class Target:
    """Where a search's points run: the endpoint (None: the in-process twin) and how
    they reach it; every point of one search shares it."""

    endpoint_url: str | None = None
    twin: str | None = None
    spec: str | None = None
    client: str | None = None
    price_per_hour: float | None = None
    api_key_file: str | None = None
    reset_prefix_cache: bool = False   # POST /reset_prefix_cache first (a cold cache)


@dataclass(frozen=True, slots=True)
class Point:
    """Everything one run of a search needs; plain values only (picklable)."""

    scenario_path: str
    overrides: tuple[str, ...]
    out_dir: str
    label: str
    target: Target = field(default_factory=Target)
    # in-process twin: engine settings / efficiency terms on top of the profile (a fit's
    # candidate), as (name, value) pairs
    twin_overrides: tuple[tuple[str, Any], ...] = ()
    temporary: bool = False            # results in a temporary directory, removed after
    reuse: bool = False                # notebooks: a completed twin run of the same
    #                                    resolved scenario under out_dir is read, not re-run
    cost: float = 1.0                  # the costliest points start first when run at once
    coords: Mapping[str, Any] = field(default_factory=dict)   # the profile's coordinates
    ramp: StepRamp | None = None       # a stepped ramp in this run (`size --ramp`)
    source: ScenarioSource | None = None   # scenario_path read once (`PointBase.source`)
    early: EarlyRule | None = None     # stop once the verdict is decided (a team probe)

    def with_overrides(self, *extra: str) -> Point:
        return replace(self, overrides=(*self.overrides, *extra))


@dataclass(frozen=True, slots=True)
class PointResult:
    """How a point's run ended: its summary (summary.json's figures and facts), or the
    one-line error that stopped it before or while it ran."""

    point: Point
    run_dir: str
    status: str                        # completed | interrupted | failed | error
    reason: str
    summary: RunSummary                # the run's summary.json, typed (empty on error)
    started_at: float                  # Unix time the point started (overlap checks)
    elapsed_s: float
    error_kind: str | None = None      # "input" (exit 2) or "run" (exit 1) for status error
    early: str | None = None           # stopped early (status interrupted): why it FAILS

    @property
    def ok(self) -> bool:
        return self.status not in ("failed", "error")

    def raise_error(self, what: str) -> None:
        """A failed point as the error a serial run raises: the InputError or RunError
        that stopped it, or one line naming `what` (the point) and its run directory;
        a server refusing us (auth, not found) is the user's input to fix (exit 2)."""
        if self.status == "error":
            raise (InputError if self.error_kind == "input" else RunError)(self.reason)
        if self.status == "failed":
            line = f"the run {what} failed: {self.reason} ({self.run_dir})"
            if "auth" in self.reason or "not_found" in self.reason:
                raise InputError(line)
            raise PointFailed(line)


class PointFailed(RunError):
    """A point's run failed at run time (exit 1), not a bad argument."""


def run_point(p: Point) -> PointResult:
    """Run the point's scenario (an ordinary run, results under p.out_dir or in a
    temporary directory; with `reuse`, a matching completed twin run is read instead);
    an InputError or RunError comes back as the result's error."""
    t0, wall0 = time.monotonic(), time.time()
    t = p.target
    if p.reuse and t.endpoint_url is None and not p.twin_overrides and p.ramp is None:
        found = find_run(p.scenario_path, p.overrides, p.out_dir, twin=t.twin)
        if found is not None:
            return PointResult(p, str(found), "completed", "",
                               RunSummary.from_json(run_summary(found)), wall0,
                               time.monotonic() - t0)
    tmp = tempfile.mkdtemp(prefix="endurance-point-") if p.temporary else None
    try:
        spec = RunSpec(p.scenario_path, list(p.overrides), out_dir=Path(tmp or p.out_dir),
                       label=p.label, show_progress=False, endpoint_url=t.endpoint_url,
                       twin=t.twin, spec=t.spec, price_per_hour=t.price_per_hour,
                       client=t.client, api_key_file=t.api_key_file,
                       twin_overrides=dict(p.twin_overrides), ramp=p.ramp,
                       source=p.source, early=p.early)
        if t.reset_prefix_cache and t.endpoint_url:
            reset_prefix_cache(t.endpoint_url)
        res = execute(spec, echo=lambda _line: None)
    except (InputError, RunError) as exc:
        return PointResult(p, "", "error", str(exc), RunSummary({}, {}), wall0,
                           time.monotonic() - t0,
                           "input" if isinstance(exc, InputError) else "run")
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return PointResult(p, "" if tmp else str(res.run_dir), res.status, res.outcome.reason,
                       res.summary, wall0, time.monotonic() - t0, early=res.outcome.early)
