"""The searches as library calls: typed arguments in, a typed answer out.

`endurance sweep` and `endurance size` parse their options and call one of these; a
notebook or a script calls them the same way, e.g.

    from simulator import sweep
    answer = sweep.size("scenarios/claude-code-team.yaml", ["per_session_tok_s>=30"],
                        twin="a40/qwen3-coder-30b-a3b-awq", max_sessions=8)

The first argument is where the search runs: a scenario file (its runs go to a new
folder under `out`, on the scenario's twin or `twin`), or a `PointBase` made with
`search_base` (the scenario, its overrides, the endpoint and the folder). `fanout`
runs points at once (`fanout.fanout_for`; default one after another here) and
`on_point` hears each point as it ends. Every search is a profile of the one pipeline
(`pipeline.run_profile`); a table over host KV tiers or output-speed tiers is a search
repeated over an `Outer` dimension (`tiers.EachValue`).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from simulator.analysis.copy_sweep import copy_levels as parse_levels
from simulator.analysis.fleet_sizing import FleetSizing
from simulator.analysis.pd_sizing import PDSizing
from simulator.analysis.ramp import parse_steps
from simulator.analysis.sizing import SizingResult
from simulator.analysis.slo import Slo, parse_slo
from simulator.analysis.team_day import TeamSizing
from simulator.analysis.team_hours import LEAD_S, TeamHours, card_cap
from simulator.errors import InputError, Interrupted
from simulator.scenario.load import read_scenario, resolve_scenario
from simulator.sweep import pipeline
from simulator.sweep.card_size import FleetProfile, SizeProfile
from simulator.sweep.fanout import Fanout, Serial
from simulator.sweep.node_size import NodeLayoutTable, layouts, node_profile, parse_node
from simulator.sweep.pd_size import PDProfile
from simulator.sweep.point import PointResult, Target
from simulator.sweep.profiles import (
    Copy,
    Counts,
    Inner,
    PointBase,
    Settings,
    Specs,
    Sweep,
    SweepAnswer,
    SweepDim,
    parse_counts,
    parse_specs,
    parse_values,
)
from simulator.sweep.step_ramp import (
    RampAnswer,
    RampProfile,
    comparison_base,
    goodput_overrides,
    start_from,
    step_ramp,
)
from simulator.sweep.team_hours import TeamHoursProfile
from simulator.sweep.team_size import TeamSizeProfile, team_scenario
from simulator.sweep.tiers import (
    EachValue,
    KvTierTable,
    SpeedTier,
    SpeedTierTable,
    kv_tiers_dim,
    ramp_tiers,
    speed_tiers_dim,
)
from simulator.twin.model.profiles import load_hardware, parse_twin

Where = str | Path | PointBase      # a scenario file, or a search's base
OnPoint = Callable[[PointResult], None]


def new_folder(out: Path, kind: str) -> Path:
    """A search's own folder under `out`: `<kind>-<time>-<4 hex>`."""
    return out / f"{kind}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def search_base(scenario: str | Path, overrides: Sequence[str] = (), *,
                target: Target | None = None, folder: Path | None = None,
                out: Path = Path("results"), kind: str = "size",
                reuse: bool = False) -> PointBase:
    """What every point of a search shares: the scenario (loaded once: a bad file or
    override is one line now, and its seed is the repeats' base), its overrides, where
    it runs (`target`: the in-process twin by default) and the folder its runs go to
    (`folder`, else a new one under `out`)."""
    src = read_scenario(scenario)
    s, _ = resolve_scenario(src, list(overrides))
    return PointBase(str(scenario), tuple(overrides), folder or new_folder(out, kind), s.seed,
                     target or Target(), reuse, replace(src, text=None))


def _base(where: Where, twin: str | None, overrides: Sequence[str], kind: str) -> PointBase:
    if isinstance(where, PointBase):
        if twin is not None or overrides:
            raise InputError("give the twin and overrides to search_base, not beside a "
                             "PointBase")
        return where
    return search_base(where, overrides, target=Target(twin=twin), kind=kind)


def _slos(slos: Sequence[str | Slo]) -> tuple[Slo, ...]:
    return tuple(parse_slo(s) if isinstance(s, str) else s for s in slos)


def _judged(base: PointBase, slos: Sequence[str | Slo]) -> PointBase:
    """The base whose runs count goodput under what the SLOs name (their TTFT bound,
    their speed floor), unless the scenario or an override gives goodput its own — as
    `size` does (`step_ramp.goodput_overrides`; a base that has them already is kept)."""
    extra = goodput_overrides(base, _slos(slos), ())
    return replace(base, overrides=(*base.overrides, *extra)) if extra else base


@dataclass
class SizeAnswer:
    """`size --team M` behind a router or split P/D: the one-card search and the fleet
    search started from its division of the team."""

    card: SizingResult
    fleet: FleetSizing | PDSizing


# ------------------------------------------------------------------------- sweeps --
def sweep_kind(base: PointBase, listed: tuple[str, list[str], list[str]] | None,
               spec: str | None, copy_levels: str | None, sessions: str | None,
               repeats: int) -> Inner:
    """A sweep's inner kind from `sweep`'s options: `--copy` shares, one `--set KEY=a,b`
    listed setting, `--spec a,b` settings, else session counts; combinations that mean
    nothing are refused in one line (a bad listed value before any run)."""
    spec_listed = spec is not None and "," in spec
    if copy_levels is not None:
        if listed is not None:
            raise InputError("--copy sweeps copy shares × --spec settings × --sessions; it "
                             "does not combine with a --set list")
        s, _ = base.resolve()
        return Copy(tuple(parse_levels(copy_levels)), parse_specs(spec or "off,ngram:24"),
                    parse_counts(sessions or "1,8"), repeats,
                    tuple(t.code_edit for t in s.turn_templates))
    if listed is not None:
        if spec_listed:
            raise InputError("--set KEY=a,b with --spec a,b: sweep one listed setting at a "
                             "time (or --copy to cross copy shares with --spec settings)")
        key, raw = listed[0], ",".join(listed[1])
        values = parse_values(key, raw)
        for v in values:                      # a bad value fails here, before any run
            base.resolve([f"{key}={v}"])
        if sessions is None:
            n = base.resolve()[0].sessions
        else:
            counts = parse_counts(sessions)
            if len(counts) != 1:
                raise InputError(f"--sessions: a --set sweep runs at one session count, got "
                                 f"{sessions!r}")
            n = counts[0]
        return Settings(key, values, n, repeats)
    if repeats != 1:
        raise InputError("--repeats: a session-count sweep runs one seed per count (use "
                         "`size --repeats`, or sweep a --set list or --copy levels)")
    counts = parse_counts(sessions or "1,2,4,8,16,32")
    if spec is not None and spec_listed:
        return Specs(parse_specs(spec), counts)
    return Counts(counts)


def points(where: Where, inner: Inner, outer: Sequence[SweepDim] = (), *,
           twin: str | None = None, overrides: Sequence[str] = (),
           fanout: Fanout | None = None, on_point: OnPoint | None = None) -> SweepAnswer:
    """A sweep: the `inner` kind (session counts, speculation settings, one setting's
    values, copy shares) in every cell of the `outer` dimensions (host KV tier sizes,
    fleet sizes, P:D splits); one row per point, one section per cell."""
    base = _base(where, twin, overrides, "sweep")
    return pipeline.run_profile(Sweep(base, inner, tuple(outer)), fanout or Serial(), on_point)


# ----------------------------------------------------------------------- searches --
def size(where: Where, slos: Sequence[str | Slo], *, max_sessions: int = 64,
         repeats: int = 1, team: int | None = None, twin: str | None = None,
         overrides: Sequence[str] = (), fanout: Fanout | None = None,
         on_point: OnPoint | None = None) -> SizingResult:
    """The largest session count ≤ `max_sessions` meeting every SLO at steady state,
    then `repeats` searches with other seeds (the answer's range); with `team`, the
    cards a team of that many sessions needs."""
    base = _judged(_base(where, twin, overrides, "size"), slos)
    return pipeline.run_profile(SizeProfile.of(base, _slos(slos), max_sessions, repeats, team),
                                fanout or Serial(), on_point)


def fleet(where: Where, slos: Sequence[str | Slo], team: int, *, router: str = "round_robin",
          max_sessions: int = 64, repeats: int = 1, twin: str | None = None,
          overrides: Sequence[str] = (), fanout: Fanout | None = None,
          on_point: OnPoint | None = None) -> SizeAnswer:
    """`size` for one card, then the fewest twin replicas behind `router` whose fleet of
    `team` sessions meets every SLO, from the division's answer."""
    base = _judged(_base(where, twin, overrides, "size"), slos)
    card = size(base, slos, max_sessions=max_sessions, repeats=repeats, team=team,
                fanout=fanout, on_point=on_point)
    cards = card.cards()
    answer = pipeline.run_profile(FleetProfile(base, _slos(slos), team, router,
                                               start=cards[0] if cards else None),
                                  fanout or Serial(), on_point)
    return SizeAnswer(card, answer)


def pd(where: Where, slos: Sequence[str | Slo], team: int, *, max_sessions: int = 64,
       repeats: int = 1, twin: str | None = None, overrides: Sequence[str] = (),
       fanout: Fanout | None = None, on_point: OnPoint | None = None) -> SizeAnswer:
    """`size` for one card, then the team's fewest cards aggregated and split into
    prefill and decode instances (the twin only)."""
    base = _judged(_base(where, twin, overrides, "size"), slos)
    if base.target.endpoint_url is not None:
        raise InputError("size --pd searches a team's P:D split on the twin: give --team M "
                         "and no --endpoint")
    card = size(base, slos, max_sessions=max_sessions, repeats=repeats, team=team,
                fanout=fanout, on_point=on_point)
    cards = card.cards()
    answer = pipeline.run_profile(PDProfile(base, _slos(slos), team,
                                            cards[0] if cards else None),
                                  fanout or Serial(), on_point)
    return SizeAnswer(card, answer)


def team(where: Where, slos: Sequence[str | Slo], *, router: str | None = None,
         twin: str | None = None, overrides: Sequence[str] = (),
         fanout: Fanout | None = None, on_point: OnPoint | None = None,
         interval_s: float | None = None, lead_s: float = LEAD_S,
         on_hours: Callable[[TeamHours], None] | None = None) -> TeamSizing:
    """The fewest cards whose replay of an imported team's day meets every SLO (the
    scenario must be a team replay: `import claude-code-otel | otel-genai`). With
    `interval_s`, first the fewest cards per interval of the day (`sweep.team_hours`,
    a lower bound), then the whole day's search from the peak interval's answer; on
    Ctrl-C the intervals judged so far come back marked interrupted, never as the
    answer."""
    base = _judged(_base(where, twin, overrides, "size"), slos)
    spec, data = team_scenario(base)
    if spec is None:
        raise InputError("size: not a team replay (import claude-code-otel / otel-genai)")
    fx, parsed = fanout or Serial(), _slos(slos)
    assert spec.team is not None
    cap = card_cap(max(spec.team.day_profile, default=0))
    hours: TeamHours | None = None
    if interval_s is not None:
        prof = TeamHoursProfile(base, parsed, spec, data, interval_s, lead_s,
                                router or "session_affinity", cap, on_progress=on_hours)
        try:
            hours = pipeline.run_profile(prof, fx, on_point)
        except KeyboardInterrupt:
            hours = prof.result
            if hours is None:
                raise
            hours.interrupted = True
        if hours.interrupted:
            return TeamSizing(parsed, router or "session_affinity", prof.max_replicas,
                              team=spec.team, hours=hours,
                              interrupted="Ctrl-C while judging the intervals")
    whole = TeamSizeProfile(base, parsed, spec, router or "session_affinity", cap,
                            start=(hours.peak or 1) if hours is not None else 1)
    try:
        answer = pipeline.run_profile(whole, fx, on_point)
    except (Interrupted, KeyboardInterrupt):
        if hours is None:
            raise
        return TeamSizing(parsed, whole.router, whole.max_replicas, team=spec.team,
                          hours=hours, interrupted="Ctrl-C in the whole day's search")
    answer.hours = hours
    return answer


def node(where: Where, slos: Sequence[str | Slo], node: str, *, team: int | None = None,
         max_sessions: int = 64, repeats: int = 1, twin: str | None = None,
         overrides: Sequence[str] = (), fanout: Fanout | None = None,
         on_point: OnPoint | None = None) -> NodeLayoutTable:
    """The layout of one node (`node`: "8xh100") for the scenario's model: one replica
    search per TP degree that fits (`node_size`), in `tp-N/`; with `team`, the replicas
    and nodes each layout needs for that many sessions. The twin's model is `twin`'s
    (its card must be the node's) or the scenario's; `twin.ep` splits MoE experts."""
    n = parse_node(node)
    base = _judged(_base(where, twin, overrides, "size"), slos)
    if base.target.endpoint_url is not None:
        raise InputError("size --node lays out the twin's replicas: no --endpoint")
    s, _ = base.resolve()
    card, model = parse_twin(base.target.twin) if base.target.twin else (n.card, s.twin.model)
    if base.target.twin and card != n.card:
        raise InputError(f"--node {n} with --twin {base.target.twin}: the twin's card must "
                         f"be the node's ({n.card}), or give --twin's model by name only "
                         "through the scenario")
    base = replace(base, target=replace(base.target, twin=f"{n.card}/{model}"))
    engine = {k: v for k, v in s.twin.engine_overrides().items()
              if k not in ("tensor_parallel_size", "enable_expert_parallel")}
    fits = layouts(n, model, engine, s.twin.ep)
    judged = _slos(slos)
    profile = node_profile(base, n, fits, s.twin.ep, judged, max_sessions, repeats, team)
    answers = pipeline.run_profile(profile, fanout or Serial(), on_point)
    return NodeLayoutTable(n, model, load_hardware(n.card).usd_per_hour, team, s.twin.ep,
                           fits, answers)


def kv_tiers(where: Where, slos: Sequence[str | Slo], gibs: Sequence[float], *,
             policy: str = "scenario", max_sessions: int = 64, repeats: int = 1,
             team: int | None = None, twin: str | None = None,
             overrides: Sequence[str] = (), fanout: Fanout | None = None,
             on_point: OnPoint | None = None,
             on_tier: Callable[[float, SizingResult], None] | None = None) -> KvTierTable:
    """One `size` search per host KV tier size (GiB), each in `tier-<G>gib/`; `policy`
    names the compaction the rows were run under."""
    base = _judged(_base(where, twin, overrides, "size"), slos)
    judged = _slos(slos)
    profile = EachValue(base, kv_tiers_dim(gibs),
                        lambda b, _g: SizeProfile.of(b, judged, max_sessions, repeats, team),
                        on_tier)
    return KvTierTable(policy, pipeline.run_profile(profile, fanout or Serial(), on_point))


def speed_tiers(where: Where, tiers: Sequence[SpeedTier], *, max_sessions: int = 64,
                repeats: int = 1, twin: str | None = None, overrides: Sequence[str] = (),
                fanout: Fanout | None = None,
                on_point: OnPoint | None = None) -> SpeedTierTable:
    """One `size` search per output-speed tier (`tiers.speed_tiers_for`), each judging
    the window's goodput share under the tier's own per-request SLO, in `tier-<F>/`."""
    base = _base(where, twin, overrides, "size")
    profile = EachValue(base, speed_tiers_dim(tiers),
                        lambda b, t: SizeProfile.of(b, _slos(t.judged()), max_sessions,
                                                    repeats))
    return SpeedTierTable(pipeline.run_profile(profile, fanout or Serial(), on_point))


def ramp(where: Where, slos: Sequence[str | Slo], *, steps: Sequence[int] | None = None,
         max_sessions: int = 64, hold_s: float = 180.0, max_step_s: float = 1800.0,
         speed: Sequence[SpeedTier] = (), from_twin: str | None = None,
         compare: bool = True, twin: str | None = None, overrides: Sequence[str] = (),
         fanout: Fanout | None = None, on_point: OnPoint | None = None) -> RampAnswer:
    """Size in one run: a stepped ramp (`steps`, default 1, 2, 4 … `max_sessions`),
    each step held `hold_s`, judged against the SLOs (or each speed tier). With
    `from_twin` ("HARDWARE/MODEL") the twin's probe search runs first and the ramp
    starts a step or two below its answer; on the twin (`compare`) the probe search of
    the same scenario runs after it, so the answer says what the ramp saved. A probe
    search cut short after the ramp leaves the ramp's answer, said so."""
    base = _base(where, twin, overrides, "size")
    base = base if speed else _judged(base, slos)
    tiers = ramp_tiers(_slos(slos), speed)
    s, _ = base.resolve()
    judged, goodput = _slos(tiers[0].slos), tiers[0].goodput
    compared: list[tuple[str, SizingResult]] = []

    def search(on: PointBase, name: str) -> None:
        cmp = comparison_base(on, s.load.duration_s is not None)
        if goodput is not None:
            cmp = replace(cmp, overrides=(*cmp.overrides, f"goodput.ttft_s={goodput.ttft_s}",
                                          f"goodput.output_tok_s={goodput.output_tok_s}"))
        # as `size` runs it by default: the search and one repeat with another seed
        compared.append((name, pipeline.run_profile(SizeProfile.of(cmp, judged, max_sessions),
                                                    fanout or Serial(), on_point)))

    plan = tuple(steps) if steps else parse_steps(f"1*2..{max_sessions}", max_sessions)
    if from_twin is not None:
        twin_base = replace(base, target=replace(base.target, endpoint_url=None,
                                                 twin=from_twin), folder=base.folder / "twin")
        search(twin_base, f"probe search on the twin {from_twin}")
        plan = start_from(compared[0][1].sessions, max_sessions)
    answer = pipeline.run_profile(RampProfile(base, step_ramp(plan, hold_s, max_step_s, tiers)),
                                  fanout or Serial(), on_point)
    if compare and base.target.endpoint_url is None and from_twin is None \
            and not answer.interrupted:
        try:
            search(base, "probe search, same twin")
        except Interrupted as exc:       # the ramp's own answer stands, said so
            answer.compare_interrupted = str(exc)
    answer.compared = compared
    return answer
