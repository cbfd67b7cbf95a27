"""`size` as profiles of the one pipeline: the SLO search, its repeats, the fleet search.

`SizeProfile` finds the largest session count meeting every SLO at steady state: the
serial search (`search.SloSearch`: geometric probes, then a gallop from where the
figures of the first failure and the last pass put the boundary), then `repeats`
searches with other seeds started at the answer (`search.GallopSearch`), giving a range.
With a width K it runs up to K probes at once — the ones the serial search may ask for
next — and reads its answer from the probes the serial search consumed, so the answer,
every figure and each probe is the serial one; probes run ahead and not needed are kept
as `unused`. `FleetProfile` is the team search behind a router (`search.FleetSearch`).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from simulator.analysis.fleet_sizing import FleetProbe, FleetSizing
from simulator.analysis.run_summary import RunSummary
from simulator.analysis.search import (
    FleetSearch,
    GallopSearch,
    SerialSearch,
    SloSearch,
    frontier,
    serial_path,
)
from simulator.analysis.sizing import Probe, SizingResult, binding, kv_bound
from simulator.analysis.slo import Slo, failures
from simulator.errors import InputError
from simulator.session.prefix import build_base_prefix
from simulator.sweep.point import Point, PointResult
from simulator.sweep.profiles import PointBase
from simulator.twin.model.perf_model import build_perf_model
from simulator.twin.model.profiles import parse_twin


def kv_facts(base: PointBase) -> tuple[int | None, int]:
    """(KV capacity in tokens from the twin profile, shared prefix tokens) of the
    search's scenario: what the KV-capacity bound of its answer is read from."""
    s, _ = base.resolve()
    shared = build_base_prefix(s).tokens_est if s.cache_bust == "none" else 0
    if base.target.endpoint_url is not None:
        return None, shared      # a real vLLM reports it via vllm:cache_config_info
    twin = base.target.twin
    hw, model = parse_twin(twin) if twin else (s.twin.hardware, s.twin.model)
    # the scenario's engine settings (a TP replica's KV is its GPUs' together)
    return build_perf_model(hw, model, overrides=s.twin.engine_overrides()).kv_capacity_tokens(), shared


@dataclass
class SizeProfile:
    """The largest session count ≤ max_sessions meeting every SLO (see the module)."""

    base: PointBase
    slos: tuple[Slo, ...]
    max_sessions: int
    repeats: int = 1
    team_sessions: int | None = None
    kv_capacity_tokens: int | None = None
    shared_prefix_tokens: int = 0
    # repeats gallop up past the first answer (the range's top); False: a repeat only
    # checks the answer and walks down from it if it fails — the headline, the least
    # over the seeds, is the same, for one run where a gallop up takes four or more
    # runs larger than the answer (`size --node`: four searches)
    repeat_up: bool = True
    trend: bool = False               # `search.SloSearch.trend` (`size --node`)

    def __post_init__(self) -> None:
        if self.max_sessions < 1:
            raise InputError(f"--max-sessions: must be ≥ 1, got {self.max_sessions}")
        if not self.slos:
            raise InputError("--slo: give at least one SLO, e.g. --slo 'per_session_tok_s>=50'")
        if self.repeats < 0:
            raise InputError(f"--repeats: must be ≥ 0, got {self.repeats}")

    def probe(self, r: PointResult, n: int, seed_offset: int) -> Probe:
        failed = failures(r.summary, self.slos)
        return Probe(n, not failed, failed, r.summary, seed_offset, r.run_dir)

    def _search(self, search: SerialSearch, seed_offset: int, width: int,
                probes: list[Probe], unused: list[Probe],
                figures: dict[int, RunSummary] | None = None,
                ) -> Generator[list[Point], list[PointResult], dict[int, bool]]:
        """Run `search` to its end; each probe's figures go into `figures` (the
        search's own, when it reads them) as its result comes in."""
        seen: dict[int, PointResult] = {}
        known: dict[int, bool] = {}
        while batch := frontier(search, known, width):
            results = yield [self.base.point(n, seed_offset=seed_offset,
                                             coords={"requested_sessions": n,
                                                     "seed_offset": seed_offset})
                             for n in batch]
            for n, r in zip(batch, results, strict=False):
                seen[n] = r
                known[n] = r.ok and not failures(r.summary, self.slos)
                if figures is not None:
                    figures[n] = r.summary
            for n in serial_path(search, known):
                seen[n].raise_error(f"at {n} sessions")
        path = serial_path(search, known)
        probes += [self.probe(seen[n], n, seed_offset) for n in path]
        unused += [self.probe(seen[n], n, seed_offset) for n in seen if n not in path]
        return known

    def plan(self, width: int) -> Generator[list[Point], list[PointResult], SizingResult]:
        res = SizingResult(0, self.slos, self.max_sessions, team_sessions=self.team_sessions,
                           reseeded=True)
        figures: dict[int, RunSummary] = {}
        first = SloSearch(self.max_sessions, slos=self.slos, figures=figures,
                          trend=self.trend)
        known = yield from self._search(first, 0, width, res.probes, res.unused, figures)
        lo, hi, _ = first.bounds(known)
        res.sessions, res.answers = lo, [lo]
        for k in range(1, self.repeats + 1 if lo > 0 else 1):
            again = GallopSearch(lo, self.max_sessions if self.repeat_up else lo)
            known_k = yield from self._search(again, k, width, res.probes, res.unused)
            res.answers.append(again.answer(known_k))
        # the headline is what held on every seed; the first search's answer is answers[0]
        res.sessions = min(res.answers)
        if lo > 0 and self.repeats >= 1:
            repeat = next(p for p in res.probes if p.seed_offset == 1 and p.sessions == lo)
            res.confirmed = repeat.passed
            if not repeat.passed:
                res.notes.append(f"the repeat run at {lo} sessions failed "
                                 f"{', '.join(repeat.failed)}: the SLO is marginal there "
                                 "(run-to-run noise exceeds the margin)")
        res.kv_capacity_sessions = kv_bound(res.probes, self.kv_capacity_tokens,
                                            self.shared_prefix_tokens)
        if hi is None:
            res.binding, res.binding_kind = f"--max-sessions {self.max_sessions}", "max_sessions"
        else:
            at_hi = next(p for p in res.probes if p.seed_offset == 0 and p.sessions == hi)
            res.binding, res.binding_kind = binding(at_hi, self.slos)
        return res

    @classmethod
    def of(cls, base: PointBase, slos: tuple[Slo, ...], max_sessions: int, repeats: int = 1,
           team_sessions: int | None = None) -> SizeProfile:
        """The search on `base`, its KV-capacity facts read from the scenario and twin."""
        cap, shared = kv_facts(base)
        return cls(base, slos, max_sessions, repeats, team_sessions, cap, shared)


@dataclass
class FleetProfile:
    """The fewest replicas behind `router` whose fleet of `team_sessions` meets every
    SLO, from the division's answer `start` (each probe a fleet run on the twin)."""

    base: PointBase
    slos: tuple[Slo, ...]
    team_sessions: int
    router: str
    start: int | None
    max_replicas: int = 64

    def plan(self, width: int) -> Generator[list[Point], list[PointResult], FleetSizing]:
        res = FleetSizing(self.team_sessions, self.router, None, self.start, self.max_replicas)
        search = FleetSearch(self.start or 1, self.max_replicas)
        seen: dict[int, PointResult] = {}
        known: dict[int, bool] = {}
        while batch := frontier(search, known, width):
            results = yield [self.base.point(self.team_sessions,
                                             extra=(f"fleet.replicas={r}",),
                                             sub=f"fleet-{r}",
                                             label=f"fleet of {r} × {self.team_sessions} "
                                                   "sessions",
                                             coords={"replicas": r}) for r in batch]
            for r, got in zip(batch, results, strict=False):
                seen[r] = got
                known[r] = got.ok and not failures(got.summary, self.slos)
            for r in serial_path(search, known):
                seen[r].raise_error(f"of the fleet at {r} replicas")
        for r in serial_path(search, known):
            failed = failures(seen[r].summary, self.slos)
            res.probes.append(FleetProbe(r, not failed, failed, seen[r].summary))
        res.replicas = search.answer(known)
        return res
