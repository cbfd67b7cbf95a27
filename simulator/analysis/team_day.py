"""A team replay's figures (pure): the sessions in flight against time — from the
telemetry (`replay.team.day_profile`) and as replayed (a run's rows) — and the
answer of sizing a team's slice: the fewest cards (replicas) whose replay meets every
SLO, with the replay's fidelity at that answer.

A team replay is judged on the whole replay's figures: its load is the team's own
arrivals over the slice, not N sessions held steady, so there is no steady-state
window to wait for (`judged`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from simulator.analysis.metric_keys import SummaryRecord, as_record
from simulator.analysis.run_summary import Summary, record_of
from simulator.analysis.slo import Slo, failures
from simulator.analysis.team_hours import TeamHours, format_hours
from simulator.importers.team import in_flight
from simulator.scenario.replay import ReplaySpec, TeamDay
from simulator.util.numbers import to_float

BARS = " ▁▂▃▄▅▆▇█"
MAX_ROWS = 24                   # the slice's profile table: at most this many rows


def judged(summary: Summary) -> SummaryRecord:
    """The summary as a team replay is judged: the whole run's figures (no window, no
    steady-state verdict)."""
    return as_record({
        k: v for k, v in record_of(summary).items()
        if k not in ("requested_sessions", "steady_state", "steady_state_reason")})


def team_failures(summary: Summary, slos: Sequence[Slo]) -> tuple[str, ...]:
    return failures(judged(summary), slos)


def session_of(label: str) -> str:
    """A stream's session: `SESSION/query_source` → SESSION."""
    return label.split("/", 1)[0]


def replayed_profile(spec: ReplaySpec, rows: Iterable[Mapping[str, object]],
                     step_s: float, offset_s: float = 0.0) -> list[int]:
    """Sessions in flight per step, from the run's turn rows: a session from its first
    request's send to its last reply. Step 0 begins `offset_s` before the run (so the
    steps line up with the day's: `TeamDay.replay_start_s % step`)."""
    n = len(spec.sessions)
    spans: dict[str, tuple[float, float]] = {}
    for r in rows:
        sid = str(r.get("session_id", ""))
        if r.get("request_kind") != "turn" or not sid[1:].isdigit():
            continue
        label = session_of(spec.sessions[int(sid[1:]) % n].id)
        a = to_float(r["started_mono_s"]) + offset_s
        b = a + to_float(r.get("e2e_s") or 0.0)
        lo, hi = spans.get(label, (a, b))
        spans[label] = (min(lo, a), max(hi, b))
    return in_flight(spans.values(), 0.0, step_s) if spans else []


def recorded_profile(team: TeamDay, steps: int) -> list[int]:
    """The telemetry's sessions in flight over the replayed slice, `steps` steps from
    the replay's start."""
    first = int(team.replay_start_s // team.profile_step_s)
    got = list(team.day_profile[first:first + steps])
    return got + [0] * (steps - len(got))


def clock(s: float) -> str:
    d, rem = divmod(int(s), 86_400)
    return f"{'+' + str(d) + 'd ' if d else ''}{rem // 3600:02d}:{rem % 3600 // 60:02d}"


def sparkline(values: Sequence[int]) -> str:
    top = max(values, default=0)
    return "".join(BARS[0 if top == 0 else round(v / top * (len(BARS) - 1))] for v in values)


def format_profile(team: TeamDay, replayed: Sequence[int]) -> str:
    """The day at a glance (hourly peaks) and the slice step by step: telemetry vs
    replay."""
    step = team.profile_step_s
    per_h = max(1, 3600 // step)
    day = list(team.day_profile)
    hours = [max(day[i:i + per_h]) for i in range(0, len(day), per_h)]
    lines = [f"sessions in flight over the day (telemetry, peak per hour from "
             f"{clock(0)} UTC): {sparkline(hours)}  peak {max(day, default=0)}",
             "  hour  " + " ".join(f"{h % 24:02d}" for h in range(len(hours)))[:200],
             "  peak  " + " ".join(f"{v:2d}" for v in hours)[:200],
             f"replayed slice {clock(team.replay_start_s)}–{clock(team.replay_end_s)} UTC, "
             f"sessions in flight per {step // 60} min: telemetry | replay"]
    rec = recorded_profile(team, len(replayed))
    group = -(-len(replayed) // MAX_ROWS)             # steps per row: at most MAX_ROWS rows
    if group > 1:
        lines[-1] += f" (peak of each {group * step // 60} min)"
    for i in range(0, len(replayed), group):
        a, b = max(rec[i:i + group]), max(replayed[i:i + group])
        t = team.replay_start_s - team.replay_start_s % step + i * step
        lines.append(f"  {clock(t)}  {a:4d} {'█' * min(a, 40):<40} "
                     f"| {b:4d} {'█' * min(b, 40)}")
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class TeamProbe:
    replicas: int
    passed: bool
    failed: tuple[str, ...]
    summary: Summary
    run_dir: str
    held: tuple[int, float | None] | None = None   # requests held past their start, median s


@dataclass
class TeamSizing:
    """The fewest cards for the team's slice (None: not within max_replicas)."""

    slos: tuple[Slo, ...]
    router: str
    max_replicas: int
    replicas: int | None = None
    probes: list[TeamProbe] = field(default_factory=list)
    fidelity: dict[str, Any] = field(default_factory=dict)      # at the answer's run
    profile_replayed: list[int] = field(default_factory=list)   # at the answer's run
    team: TeamDay | None = None
    notes: list[str] = field(default_factory=list)
    hours: TeamHours | None = None        # `--interval`: the cards per interval
    interrupted: str | None = None        # Ctrl-C: what was cut (no whole-day answer)

    def to_dict(self) -> dict[str, Any]:
        t = self.team
        return {
            "kind": "team", "cards": self.replicas, "slos": [str(s) for s in self.slos],
            "judged_on": "the whole replay's figures (the team's own arrivals)",
            "router": self.router, "max_replicas": self.max_replicas,
            "probes": [{"replicas": p.replicas, "passed": p.passed, "failed": list(p.failed),
                        "run_dir": p.run_dir,
                        "requests_held": None if p.held is None else p.held[0],
                        "held_median_s": None if p.held is None else p.held[1],
                        **{s.metric: judged(p.summary).get(s.metric) for s in self.slos}}
                       for p in self.probes],
            "fidelity": self.fidelity, "notes": list(self.notes),
            "interrupted": self.interrupted,
            "hours": None if self.hours is None else self.hours.to_dict(),
            "team": None if t is None else {
                "source": t.source, "window": t.window, "scale": t.scale,
                "sessions": t.sessions, "day_sessions": t.day_sessions,
                "replay_start_s": t.replay_start_s, "replay_end_s": t.replay_end_s,
                "profile_step_s": t.profile_step_s, "day_profile": list(t.day_profile),
                "profile_recorded": recorded_profile(t, len(self.profile_replayed)),
                "profile_replayed": self.profile_replayed}}


def format_team_sizing(r: TeamSizing, sized: str) -> str:
    t = r.team
    what = "the replay" if t is None else (
        f"{t.window or 'the whole day'} of {t.sessions} session(s)"
        + (f", team ×{t.scale:g}" if t.scale != 1 else ""))
    slos = " and ".join(map(str, r.slos))
    head = (f"INTERRUPTED ({r.interrupted}): no whole-day answer" if r.interrupted
            else f"{r.replicas} card(s) serve {what} within {slos}" if r.replicas is not None
            else f"NOT within {r.max_replicas} card(s): {what} misses {slos}")
    lines = [head, f"sized: {sized}",
             f"judged on the whole replay's figures (the team's own arrivals); router "
             f"{r.router}"]
    for p in r.probes:
        figs = ", ".join(f"{s.metric}={v:.3g}" if isinstance(v := judged(p.summary).get(
            s.metric), int | float) else f"{s.metric}=n/a" for s in r.slos)
        pace = "" if p.held is None else (
            f"; held {p.held[0]} (median {p.held[1]:.1f} s)" if p.held[0] and p.held[1]
            is not None else "; keeps the recorded pace")
        lines.append(f"  probe {p.replicas:3d} card(s): {figs}{pace}  → "
                     + ("pass" if p.passed else "FAIL " + ", ".join(p.failed)))
    lines += [f"note: {n}" for n in r.notes]
    if r.hours is not None:
        lines.append(format_hours(r.hours, r.slos))
    return "\n".join(lines)
