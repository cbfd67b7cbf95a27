"""A stepped ramp, as data: which session count comes next, each step's window and
figures, and the answer (pure; the live controller is `session/ramp.py`).

One continuous constant-load run whose session count steps: up through the planned
steps (a list, start × factor, or start + step, up to a bound), each step held until its
own steady-state window reaches `hold_s`; with SLOs each step is judged on that window,
the ramp stops rising after the first failing step, then steps back down between the
last passing and the first failing count (a bisection, within the same run) and holds
the answer once more to confirm it. With several SLO tiers (`size --tier`) every step is
judged against each tier; the ramp rises until the loosest tier fails and refines each
tier's boundary in turn.

A step's window: the step starts when the controller sets its count; its transient ends
when every one of the step's sessions (slots 0 … N − 1) has had a request sent after the
step started come back, and when every session the step retired has finished its last
request; the window then runs for `hold_s`. It is judged once every request sent before
its end has come back and every slot has had a request sent after its end come back
(so a session thinking at the window's end counts as active: `covers`). A step whose
window has not been reached by `max_step_s` after it started is not steady; so is one
whose window holds fewer than 90% of N sessions or saturates (`steady.saturation`). A
step that is not steady never passes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TypedDict, cast

import numpy as np
import pandas as pd

from simulator.analysis.goodput import GoodputSlo, judged_requests, meets, window_goodput
from simulator.analysis.metric_keys import SummaryRecord, as_record, figure
from simulator.analysis.search import SloSearch, probe_counts
from simulator.analysis.sizing import Probe, binding
from simulator.analysis.slo import Slo, failures, parse_slo
from simulator.analysis.steady import (
    STEADY_THRESHOLD,
    Window,
    mean_overlap_count,
    saturation,
    session_spans,
    window_figures,
)
from simulator.errors import InputError
from simulator.util.durations import parse_duration_s
from simulator.util.numbers import is_number, to_float, to_int

MAX_STEPS = 4096      # planned steps of one ramp (a bound on `start + step` lists)
MAX_RAMP_SESSIONS = 100_000    # as a scenario's sessions


def plan_steps(start: int, max_sessions: int, *, factor: float | None = None,
               add: int | None = None) -> tuple[int, ...]:
    """The planned counts: start, start × factor, … (or start, start + add, …) up to
    `max_sessions`, which ends the list when the progression steps over it."""
    if not 1 <= start <= max_sessions:
        raise InputError(f"--ramp: the first step {start} must be within 1 … {max_sessions}")
    if factor is None and add is None:
        return tuple(n for n in probe_counts(max_sessions) if n >= start) or (start,)
    out = [start]
    while out[-1] < max_sessions and len(out) < MAX_STEPS:
        nxt = int(out[-1] * factor) if factor is not None else out[-1] + int(add or 0)
        nxt = max(nxt, out[-1] + 1)
        out.append(min(nxt, max_sessions))
    return tuple(out)


_DIGITS = len(str(MAX_RAMP_SESSIONS))     # longer numbers are refused before int()
_STEPS = re.compile(r"^\s*(\d+)\s*([*+])\s*(\d+(?:\.\d+)?)\s*(?:\.\.\s*(\d+)\s*)?$")


def parse_steps(text: str, max_sessions: int | None = None) -> tuple[int, ...]:
    """`--ramp` steps: `1,2,4,8` (a list), `START*FACTOR[..MAX]` (1*2..64) or
    `START+STEP[..MAX]` (4+4..32); the bound is MAX, else `max_sessions` (`size`'s
    `--max-sessions`). One InputError line otherwise."""
    m = _STEPS.match(text)
    if m is not None:
        shown = text if len(text) <= 40 else text[:37] + "…"
        whole = (m.group(1), m.group(3).split(".")[0], m.group(4) or "")
        if any(len(g) > _DIGITS for g in whole):
            raise InputError(f"--ramp {shown!r}: the counts, factor and step are at most "
                             f"{MAX_RAMP_SESSIONS} (a ramp runs at most that many sessions)")
        start, op, by, top = int(m.group(1)), m.group(2), float(m.group(3)), m.group(4)
        bound = int(top) if top is not None else max_sessions
        if bound is None:
            raise InputError(f"--ramp {shown!r}: give the last step, e.g. {start}{op}"
                             f"{m.group(3)}..64")
        if op == "*" and by <= 1:
            raise InputError(f"--ramp {shown!r}: the factor must exceed 1")
        if op == "+" and by < 1:
            raise InputError(f"--ramp {shown!r}: the step must be at least 1")
        if bound > MAX_RAMP_SESSIONS:
            raise InputError(f"--ramp {shown!r}: at most {MAX_RAMP_SESSIONS} sessions")
        steps = plan_steps(start, bound, factor=by if op == "*" else None,
                           add=int(by) if op == "+" else None)
        if steps[-1] < bound:
            raise InputError(f"--ramp {shown!r}: more than {MAX_STEPS} steps to reach "
                             f"{bound}; take larger steps (e.g. {start}*2..{bound})")
        return steps
    if any(len(x.strip()) > _DIGITS for x in text.split(",")):
        raise InputError(f"--ramp: a step above {MAX_RAMP_SESSIONS} sessions (a ramp runs "
                         "at most that many)")
    try:
        steps = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise InputError(f"--ramp {text!r}: expected counts (1,2,4,8), START*FACTOR..MAX "
                         "(1*2..64) or START+STEP..MAX (4+4..32)") from None
    if any(n < 1 or n > MAX_RAMP_SESSIONS for n in steps) \
            or any(b <= a for a, b in pairwise(steps)):
        raise InputError(f"--ramp {text!r}: the steps must be ascending counts within 1 … "
                         f"{MAX_RAMP_SESSIONS}")
    return steps


MIN_HOLD_S = 1.0      # a step's window shorter than this holds no whole request


def ramp_hold_s(hold: str, max_step: str) -> tuple[float, float]:
    """`--hold` and `--max-step` in seconds, refused in one line when no step could be
    judged on such a window."""
    hold_s = parse_duration_s(hold, "--hold")
    max_s = parse_duration_s(max_step, "--max-step")
    if hold_s < MIN_HOLD_S:
        raise InputError(f"--hold {hold!r}: at least {MIN_HOLD_S:g} s (a step is judged on "
                         "the requests its window holds)")
    if hold_s >= max_s:
        raise InputError(f"--hold ({hold_s:g} s) must be shorter than --max-step ({max_s:g} s)")
    return hold_s, max_s


@dataclass(frozen=True)
class Tier:
    """A named set of SLOs a step is judged against (`size --slo`: one tier). With
    `goodput`, the step's `window_goodput_share` is counted under this per-request SLO
    (an output-speed tier, `size --tier`), not the scenario's."""

    name: str
    slos: tuple[Slo, ...]
    goodput: GoodputSlo | None = None


@dataclass(frozen=True)
class RampPlan:
    """What the ramp steps through: the planned counts, the tiers (loosest first; none
    for a plain `run --ramp`), and whether it refines and confirms."""

    steps: tuple[int, ...]
    tiers: tuple[Tier, ...] = ()
    refine: bool = True
    confirm: bool = True

    @property
    def bound(self) -> int:
        return max(self.steps)

    def search(self) -> SloSearch:
        """Each tier's search over the ramp's steps (a bisection after the ascent)."""
        return SloSearch(self.bound, self.steps)

    def next_count(self, done: Sequence[StepVerdict]) -> tuple[int, str] | None:
        """The next step's count and phase (`ramp`, `refine`, `confirm`), None when done."""
        ascent = [v for v in done if v.phase != "confirm"]
        if not self.tiers:
            held = {v.sessions for v in ascent}
            nxt = next((n for n in self.steps if n not in held), None)
            return None if nxt is None else (nxt, "ramp")
        for t, _ in enumerate(self.tiers):
            n = self._next_for(t, ascent)
            if n is not None:
                return n, ("ramp" if n in self.steps and not self._bisecting(t, ascent)
                           else "refine")
        if self.confirm and not any(v.phase == "confirm" for v in done):
            answer = self.answers(done)[0]
            if answer > 0:
                return answer, "confirm"
        return None

    def known(self, t: int, done: Sequence[StepVerdict]) -> dict[int, bool]:
        """Tier t's verdicts by count (the last verdict for a count held twice)."""
        return {v.sessions: v.passed[t] for v in done if v.phase != "confirm"}

    def _next_for(self, t: int, done: Sequence[StepVerdict]) -> int | None:
        known = self.known(t, done)
        search = self.search()
        if not self.refine and search.bounds(known)[1] is not None:
            return None          # no refining: the ascent's first failure ends it
        return search.next_probe(known)

    def _bisecting(self, t: int, done: Sequence[StepVerdict]) -> bool:
        return self.search().bounds(self.known(t, done))[1] is not None

    def answers(self, done: Sequence[StepVerdict]) -> list[int]:
        """Per tier: the largest count that passed with the next one up failing (or the
        bound, every step passing); 0 when even the first step failed."""
        ascent = [v for v in done if v.phase != "confirm"]
        return [self.search().bounds(self.known(t, ascent))[0]
                for t in range(len(self.tiers))]


class StepFigures(SummaryRecord, total=False):
    """A held step's figures under the summary's names, and each tier's window goodput
    share (a tier with its own per-request goodput SLO)."""

    tier_goodput_share: list[float | None]


class TierAnswer(TypedDict):
    """One tier's answer of a ramp: the count, its binding constraint, its margin."""

    name: str
    slos: list[str]
    goodput: dict[str, float] | None
    sessions: int
    complete: bool
    binding: str | None
    binding_kind: str | None
    margin: float | None
    confirmed: bool | None


class RampPlanFact(TypedDict):
    steps: list[int]
    hold_s: float
    refine: bool
    confirm: bool


class RampFact(TypedDict):
    """A stepped ramp's `ramp` fact in summary.json (`ramp_summary`)."""

    plan: RampPlanFact
    goodput_slo: dict[str, float] | None
    steps: list[dict[str, object]]       # `StepVerdict.to_dict` and `held_s` (`held_steps`)
    tiers: list[TierAnswer]


def read_ramp(ramp: Mapping[str, object]) -> RampFact:
    """summary.json's `ramp` fact (or `ramp_summary`'s) as a typed record."""
    return cast(RampFact, ramp)


def held_steps(ramp: RampFact) -> list[tuple[StepVerdict, float | None]]:
    """The fact's held steps, each read back as its verdict and how long it was held
    (None: the last, when the run's end was unknown)."""
    return [(verdict_from_dict(d), _number(d.get("held_s"))) for d in ramp.get("steps") or []]


@dataclass(frozen=True)
class StepVerdict:
    """How one held step went: its count, phase, window, figures and, per tier,
    whether it passed and what it missed."""

    index: int
    sessions: int
    phase: str
    started_s: float
    window_start_s: float | None
    window_end_s: float | None
    steady: bool
    reason: str | None
    passed: tuple[bool, ...]
    failed: tuple[tuple[str, ...], ...]
    figures: StepFigures = field(default_factory=lambda: StepFigures())

    def to_dict(self) -> dict[str, object]:
        """The step as `events.jsonl` and the `ramp` fact keep it (`verdict_from_dict`
        reads it back)."""
        return {"index": self.index, "sessions": self.sessions, "phase": self.phase,
                "started_s": self.started_s, "window_start_s": self.window_start_s,
                "window_end_s": self.window_end_s, "steady": self.steady,
                "reason": self.reason, "passed": list(self.passed),
                "failed": [list(f) for f in self.failed], "figures": self.figures.copy()}


def slot_of(session_id: str, slots: int) -> int:
    """The ramp slot a session runs in (`s0012` with 8 slots → 4)."""
    return int(session_id[1:]) % slots


def transient_end(turns: pd.DataFrame, started_s: float, sessions: int, slots: int,
                  retired: Sequence[int] = ()) -> float | None:
    """When the step's transient is over (see the module docstring), or None while it
    is not: every slot below `sessions` has had a request sent at or after `started_s`
    come back, and the retired slots' last requests have ended."""
    if turns.empty:
        return None
    end = turns["started_mono_s"] + turns["e2e_s"].fillna(0.0)
    slot = turns["session_id"].map(lambda s: slot_of(str(s), slots))
    after = turns["started_mono_s"] >= started_s
    firsts = end[after].groupby(slot[after]).min()
    if any(j not in firsts.index for j in range(sessions)):
        return None
    t = max(float(firsts.loc[list(range(sessions))].max()), started_s)
    if retired:
        gone = end[slot.isin(list(retired))]
        if not gone.empty:
            t = max(t, float(gone.max()))
    return t


def covers(turns: pd.DataFrame, end_s: float, sessions: int, slots: int) -> bool:
    """Every slot below `sessions` has a request sent at or after `end_s` come back, so
    its sessions' spans (first send → last token) cover the window up to `end_s`: a
    session thinking at the window's end is active, not gone."""
    if turns.empty:
        return False
    after = turns[turns["started_mono_s"] >= end_s]
    slot = after["session_id"].map(lambda s: slot_of(str(s), slots))
    return set(range(sessions)) <= set(slot.tolist())


def step_figures(turns: pd.DataFrame, w: Window, sessions: int, slots: int,
                 goodput: GoodputSlo | None = None) -> StepFigures:
    """The figures of one step's window, under the summary's names: achieved sessions
    (of the step's slots), the window's throughput and latency, saturation, goodput."""
    active = turns[turns["session_id"].map(lambda s: slot_of(str(s), slots) < sessions)]
    spans = session_spans(active)
    achieved = mean_overlap_count(spans["start_s"].to_numpy(float),
                                  spans["end_s"].to_numpy(float), w.start_s, w.end_s) \
        if not spans.empty else 0.0
    out: SummaryRecord = {"requested_sessions": sessions, "window_start_s": w.start_s,
                          "window_end_s": w.end_s, "window_s": w.length_s,
                          "achieved_sessions": achieved}
    out |= window_figures(turns, w, sessions)
    out |= saturation(turns, w, achieved)
    if goodput is not None:
        rows = judged_requests(turns)
        out |= window_goodput(rows, meets(rows, goodput), (w.start_s, w.end_s), sessions)
    return as_record({k: (float(v) if isinstance(v, np.floating) else v)
                      for k, v in out.items()}, StepFigures)


def verdict(index: int, sessions: int, phase: str, started_s: float, w: Window | None,
            figures: StepFigures, why_not: str | None,
            tiers: Sequence[Tier], turns: pd.DataFrame | None = None) -> StepVerdict:
    """A step's verdict: not steady (no window by the deadline, too few sessions held,
    saturated) fails every tier; else each tier's SLOs on the window's figures (a tier
    with its own goodput SLO on its own window goodput, from `turns`)."""
    reason = why_not
    if reason is None and w is not None:
        achieved = figure(figures, "achieved_sessions") or 0.0
        if achieved < STEADY_THRESHOLD * sessions:
            reason = f"achieved {achieved:.1f} of {sessions} sessions in the window"
        elif figures.get("saturated"):
            reason = str(figures.get("saturated_reason"))
        elif figure(figures, "window_requests") == 0:
            reason = "no request's first token fell in the window (hold each step longer)"
    steady = w is not None and reason is None
    judged = figures | StepFigures(steady_state=steady, steady_state_reason=reason)
    failed = tuple(failures(_tier_figures(t, judged, w, sessions, turns), t.slos)
                   for t in tiers)
    if any(t.goodput is not None for t in tiers) and w is not None and turns is not None:
        judged["tier_goodput_share"] = [
            figure(_tier_figures(t, judged, w, sessions, turns), "window_goodput_share")
            for t in tiers]
    return StepVerdict(index, sessions, phase, started_s,
                       None if w is None else w.start_s, None if w is None else w.end_s,
                       steady, reason, tuple(not f for f in failed), failed, judged)


def _tier_figures(tier: Tier, figures: StepFigures, w: Window | None, sessions: int,
                  turns: pd.DataFrame | None) -> StepFigures:
    """The figures a tier is judged on: the step's, its window goodput recounted under
    the tier's own per-request SLO when it has one."""
    if tier.goodput is None or w is None or turns is None:
        return figures
    rows = judged_requests(turns)
    return as_record({**figures, **window_goodput(rows, meets(rows, tier.goodput),
                                                  (w.start_s, w.end_s), sessions)}, StepFigures)


_STEP_KEYS = ("index", "sessions", "phase", "started_s", "steady")


def verdict_from_dict(d: Mapping[str, object]) -> StepVerdict:
    """A step as `events.jsonl` and the `ramp` fact keep it (a resumed ramp continues
    after it; a report reads it back)."""
    if missing := [k for k in _STEP_KEYS if k not in d]:
        raise InputError(f"a ramp step without {', '.join(missing)}: not one this tool wrote")
    reason, figures = d.get("reason"), d.get("figures")
    return StepVerdict(to_int(d["index"]), to_int(d["sessions"]), str(d["phase"]),
                       to_float(d["started_s"]), _number(d.get("window_start_s")),
                       _number(d.get("window_end_s")), bool(d["steady"]),
                       reason if isinstance(reason, str) else None,
                       tuple(bool(x) for x in _items(d.get("passed"))),
                       tuple(tuple(str(y) for y in _items(f)) for f in _items(d.get("failed"))),
                       as_record(dict(figures) if isinstance(figures, Mapping) else {},
                                 StepFigures))


def _number(v: object) -> float | None:
    """A journaled figure as written (an int stays an int), None when not a number."""
    return v if is_number(v) else None


def _items(v: object) -> list[object]:
    """A journaled list (a tuple or list), [] when missing."""
    return list(v) if isinstance(v, list | tuple) else []


def plan_of(ramp: Mapping[str, object]) -> RampPlan:
    """The plan a scenario's `load.ramp` describes (its dict form: the manifest's or a
    model dump), SLO strings parsed."""
    tiers = []
    for t in _items(ramp.get("tiers")):
        if not isinstance(t, Mapping):
            continue
        g = t.get("goodput")
        tiers.append(Tier(str(t["name"]), tuple(parse_slo(str(x)) for x in _items(t["slos"])),
                          None if not isinstance(g, Mapping) or not g
                          else GoodputSlo(to_float(g["ttft_s"]), to_float(g["output_tok_s"]))))
    return RampPlan(tuple(to_int(n) for n in _items(ramp["steps"])), tuple(tiers),
                    bool(ramp.get("refine", True)), bool(ramp.get("confirm", True)))


def ramp_summary(turns: pd.DataFrame, events: Sequence[Mapping[str, object]], plan: RampPlan,
                 hold_s: float, goodput: GoodputSlo | None,
                 end_s: float | None = None) -> dict[str, object]:
    """The summary's `ramp` fact: every judged step recomputed from the rows on the
    window its controller recorded (so the figures are the rows', not the live view's),
    and per tier the answer, the binding constraint one step above it, the margin at it,
    and whether the confirming hold passed. `end_s`: when the run ended (the last step's
    time)."""
    slots = plan.bound
    steps: list[StepVerdict] = []
    for e in events:
        v = verdict_from_dict(e)
        if v.window_start_s is not None and v.window_end_s is not None:
            w = Window(float(v.window_start_s), float(v.window_end_s))
            v = verdict(v.index, v.sessions, v.phase, v.started_s, w,
                        step_figures(turns, w, v.sessions, slots, goodput), v.reason
                        if v.window_start_s is None else None, plan.tiers, turns)
        steps.append(v)
    held = [(v.started_s, steps[i + 1].started_s if i + 1 < len(steps) else end_s)
            for i, v in enumerate(steps)]
    tiers: list[TierAnswer] = []
    for t, tier in enumerate(plan.tiers):
        ascent = [v for v in steps if v.phase != "confirm"]
        lo, hi, done = plan.search().bounds(plan.known(t, ascent))
        at = {v.sessions: v for v in ascent}
        entry: TierAnswer = {"name": tier.name, "slos": [str(x) for x in tier.slos],
                             "goodput": None if tier.goodput is None
                             else tier.goodput.as_fact(), "sessions": lo,
                             "complete": done, "binding": None,
                             "binding_kind": None, "margin": None, "confirmed": None}
        if hi is None and done:
            entry["binding"] = f"the ramp's bound ({plan.bound} sessions)"
            entry["binding_kind"] = "max_sessions"
        elif hi is not None and hi in at:
            v = at[hi]
            entry["binding"], entry["binding_kind"] = binding(
                Probe(hi, False, v.failed[t], v.figures), tier.slos)
        if lo in at:
            margins = [s.margin(at[lo].figures) for s in tier.slos]
            known = [m for m in margins if m is not None]
            entry["margin"] = min(known) if known else None
        confirm = [v for v in steps if v.phase == "confirm" and v.sessions == lo]
        if confirm:
            entry["confirmed"] = confirm[-1].passed[t]
        tiers.append(entry)
    fact: RampFact = {
        "plan": {"steps": list(plan.steps), "hold_s": hold_s, "refine": plan.refine,
                 "confirm": plan.confirm},
        "goodput_slo": None if goodput is None else goodput.as_fact(),
        "steps": [_held(v.to_dict(), None if b is None else b - a)
                  for v, (a, b) in zip(steps, held, strict=True)],
        "tiers": tiers}
    return dict(fact)      # the fact as summary.json holds it (`read_ramp` reads it)


def _held(step: dict[str, object], held_s: float | None) -> dict[str, object]:
    """The step with how long it was held (None: the last, when the run's end is unknown)."""
    step["held_s"] = held_s
    return step
