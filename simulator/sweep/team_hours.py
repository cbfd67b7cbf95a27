"""`size --interval 1h` on a team replay: the fewest cards per interval of the day
(`analysis.team_hours`: what is judged, why it is a lower bound).

The replay's streams are read back from the scenario (each call's recorded start,
sizes and model time: `day_streams`), and each interval becomes a scenario of its own
through the importer's path (`importers.team`: slice, then `trace_session`), with a
lead-in of the sessions already in flight (`analysis.team_hours`). The busiest
interval is searched first (`search.FleetSearch`, from a capacity estimate on the twin
with a decode-speed SLO, else from one card); every other interval then starts from
the peak's answer scaled by its load, all of them in one batch, so a fan-out
(`--parallel`, Ray) splits the day by interval. Each probe is judged on the rows of the
requests that start inside its interval (`judged_figures`), and stops once its
verdict is FAIL whatever the rest would give (`analysis.early_verdict`).

On Ctrl-C a probe's run ends interrupted and the profile returns the intervals judged
so far, marked interrupted (`answers_interrupted`): never read as the answer.
"""

from __future__ import annotations

import copy
import json
import os
import re
import statistics
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from simulator.analysis.early_verdict import EarlyRule, decidable
from simulator.analysis.metric_keys import SummaryRecord
from simulator.analysis.search import FleetSearch, frontier, serial_path
from simulator.analysis.slo import Slo
from simulator.analysis.summary import summarize_run
from simulator.analysis.team_day import judged, session_of
from simulator.analysis.team_hours import (
    LEAD_S,
    HourAnswer,
    HourProbe,
    Interval,
    TeamHours,
    batch_at_speed,
    capacity_start,
    clock,
    first_guess,
    interval_failures,
    peak_overlap,
)
from simulator.errors import InputError
from simulator.importers import team
from simulator.importers.otel_events import TeamRequest
from simulator.importers.trace_import import build_scenario
from simulator.records.manifest import read_manifest
from simulator.scenario.load import ScenarioSource
from simulator.scenario.replay import ReplaySpec
from simulator.sweep.point import Point, PointResult
from simulator.sweep.profiles import PointBase
from simulator.twin.model.perf_model import build_perf_model, decode_tok_s
from simulator.twin.model.profiles import parse_twin
from simulator.util.numbers import to_int

PROGRESS = "progress.json"      # the search's state, read by the live view's header
MIN_INTERVAL_S = 60.0
PLATEAU_GAIN = 0.1              # as the whole day's search: twice the cards, 10% less miss
# a probe journals no KV block hashes (`records.blocks`: an imported day sets
# record_blocks for `export`): the same rows and figures (`BlockRecorder` is the
# PrefixTracker that also writes them), without hashing every prompt's blocks a second
# time — 9% of a 100,000-request day's first probe
NO_BLOCK_JOURNAL = ("record_blocks=false",)


def day_streams(spec: ReplaySpec) -> list[team.Stream]:
    """The replay's streams with their recorded starts (s since the day's midnight),
    sizes and model times, read back from its calls."""
    t = spec.team
    if t is None:
        raise InputError("size --interval: not a team replay (import claude-code-otel / "
                         "otel-genai)")
    out: list[team.Stream] = []
    for s in spec.sessions:
        t0 = t.replay_start_s + s.start_offset_s
        reqs: list[TeamRequest] = []
        gaps: list[bool] = []
        for k, c in enumerate(s.calls):
            u = c.usage
            if u is None or c.at_s is None:
                raise InputError(f"size --interval: call {k} of {s.id} has no recorded "
                                 "start or usage (re-import the telemetry)")
            reqs.append(TeamRequest(session_of(s.id), "", t0 + c.at_s, c.model_s,
                                    u.input_tokens, u.cache_read_tokens,
                                    u.cache_creation_tokens, u.output_tokens, c.model,
                                    f"{s.id}#{k}"))
            gaps.append(c.wait_kind == "tool")
        out.append(team.Stream(s.id, session_of(s.id), reqs, gaps))
    return out


def _slice(ss: Sequence[team.Stream], a: float, b: float, lead_s: float
           ) -> tuple[list[team.Stream], list[int]]:
    """The streams replayed for [a, b): their requests from a − lead_s, and a stream
    continued into the interval with none in the lead-in starts with its last request
    before it, moved to the lead-in's start (its context warm); per stream, how many
    requests are lead-in."""
    lo = a - lead_s
    out: list[team.Stream] = []
    lead: list[int] = []
    for s in ss:
        inside = [i for i, r in enumerate(s.requests) if a <= r.start_s < b]
        before = [i for i, r in enumerate(s.requests) if lo <= r.start_s < a]
        if not inside and not before:
            continue
        if inside and not before and inside[0] > 0:
            warm = s.requests[inside[0] - 1]
            before = [inside[0] - 1]
            reqs = [replace(warm, start_s=lo), *(s.requests[i] for i in inside)]
        else:
            reqs = [s.requests[i] for i in before + inside]
        keep = before + inside
        gaps = [s.tool_gaps[i] if j else False for j, i in enumerate(keep)]
        out.append(replace(s, requests=reqs, tool_gaps=gaps))
        lead.append(len(before))
    return out, lead


def plan_intervals(spec: ReplaySpec, interval_s: float, lead_s: float
                   ) -> list[tuple[Interval, list[team.Stream]]]:
    """The day's intervals (aligned to the clock) from the first request's to the last
    one's, each with the streams its replay sends."""
    if not MIN_INTERVAL_S <= interval_s <= team.DAY_S:
        raise InputError(f"--interval: expected {MIN_INTERVAL_S:g} s to a day, got "
                         f"{interval_s:g} s")
    t = spec.team
    assert t is not None
    ss = day_streams(spec)
    starts = [r.start_s for s in ss for r in s.requests]
    first = int(min(starts) // interval_s)
    last = int(max(starts) // interval_s)
    step = t.profile_step_s
    out: list[tuple[Interval, list[team.Stream]]] = []
    for k in range(first, last + 1):
        a, b = k * interval_s, (k + 1) * interval_s
        got, lead = _slice(ss, a, b, lead_s)
        judged_n = sum(len(s.requests) - n for s, n in zip(got, lead, strict=True))
        prof = t.day_profile[int(a // step):max(int(a // step) + 1, int(-(-b // step)))]
        iv = Interval(len(out), a, b, judged_n, sum(lead), max(prof, default=0), tuple(lead))
        out.append((iv, got if judged_n else []))
    return out


def interval_data(data: dict[str, Any], streams: Sequence[team.Stream], iv: Interval,
                  lead_s: float) -> dict[str, Any]:
    """The team scenario's data with its replay cut to one interval and its lead-in."""
    base = int((data.get("system") or {}).get("tokens") or 0)
    t0 = min(s.start_s for s in streams)
    sessions = [team.trace_session(s, t0, base) for s in streams]
    built = build_scenario(sessions, name=str(data.get("name", "team")),
                               fmt="team", seed=int(data.get("seed", 0)), base_prefix=base,
                               system_tokens=base, tool_tokens=0,
                               out_path=Path(os.devnull))
    out = copy.deepcopy({k: v for k, v in data.items() if k not in ("base_dir", "replay")})
    replay = {k: v for k, v in data["replay"].items()
              if k not in ("sessions", "span_tokens", "span_kinds", "team")}
    tday = dict(data["replay"]["team"])
    tday.update(replay_start_s=round(t0, 3), replay_end_s=iv.end_s,
                window=f"{clock(iv.start_s)}-{clock(iv.end_s)} (lead-in "
                       f"{lead_s / 60:g} min)",
                sessions=len({s.session for s in streams}))
    sliced = built.data
    replay.update(sessions=built.replay["sessions"], span_tokens=built.replay["span_tokens"],
                  span_kinds=built.replay["span_kinds"], team=tday)
    out.update(sessions=sliced["sessions"], turns=sliced["turns"], replay=replay,
               context_window_tokens=max(int(out.get("context_window_tokens") or 0),
                                         to_int(sliced["context_window_tokens"])),
               max_tokens=max(int(out.get("max_tokens") or 1), to_int(sliced["max_tokens"])))
    out["description"] = (f"{data.get('name', 'team')}: {clock(iv.start_s)}–"
                          f"{clock(iv.end_s)} UTC, {iv.requests} judged request(s) after "
                          f"{iv.lead_requests} lead-in")
    return out


def write_yaml(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    path.write_text(yaml.dump(data, Dumper=dumper, sort_keys=False,
                              default_flow_style=None, width=100), encoding="utf-8")


_SURROGATE = re.compile(r"\\ud[89a-fA-F]")


def _plain_scalars(data: Any) -> bool:
    """Every key a str and every float written by `json.dumps` with a '.' (YAML 1.1
    reads `1e-05` as a string): what `yaml_json` needs of the data."""
    stack = [data]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            if not all(isinstance(k, str) for k in v):
                return False
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, float) and "." not in repr(v):
            return False
    return True


def yaml_json(data: Any) -> str | None:
    """`data` as one line of JSON that a YAML 1.1 safe loader reads back as the same
    data (JSON is YAML's flow style), or None where it would not: a float without a
    '.', inf or NaN, a key not a str, an astral character (JSON escapes it as a
    surrogate pair, which YAML reads as two characters). A day's interval scenario is ~40 MB:
    PyYAML's Python representer took 12% of `size --interval` on 100,000 requests,
    `json.dumps` a few per cent of that."""
    if not _plain_scalars(data):
        return None
    try:
        text = json.dumps(data, allow_nan=False)
    except (TypeError, ValueError):
        return None
    if _SURROGATE.search(text):
        return None
    return text


def interval_source(path: Path, data: dict[str, Any]) -> ScenarioSource:
    """The interval's scenario written to `path` (the record of what its runs replayed)
    and passed to them as the value read back: plain JSON data, as YAML gives it back
    (`tests/sweep/test_team_hours_source.py`), so no probe parses the file again. It
    is written as JSON (`yaml_json`; still a YAML file) where that reads back the same,
    else as block YAML."""
    text = yaml_json(data)
    if text is None:
        write_yaml(path, data)
        text = json.dumps(data)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")
    plain = json.loads(text)
    plain.setdefault("name", path.stem)
    return ScenarioSource(str(path), plain)


def judged_figures(run_dir: str, lead: Sequence[int]) -> SummaryRecord:
    """The figures of the requests the interval judges: a stream's rows from its first
    request past the lead-in (`session_id` sK is stream K of the interval's scenario)."""
    path = Path(run_dir) / "turns.parquet"
    if not path.is_file():
        return {}
    rows = pd.read_parquet(path)
    k = rows["session_id"].astype(str).str[1:].astype(int) % max(1, len(lead))
    keep = rows["turn_index"].astype(int) >= k.map(lambda i: lead[i])
    return judged(summarize_run(read_manifest(Path(run_dir)), rows[keep]))


@dataclass
class _Search:
    hour: HourAnswer
    search: FleetSearch
    base: PointBase
    sessions: int
    known: dict[int, bool] = field(default_factory=dict)
    seen: dict[int, HourProbe] = field(default_factory=dict)
    streams: list[team.Stream] = field(default_factory=list)

    def needs_full(self) -> list[int]:
        """The probes decided early whose full figures the plateau check needs (the
        last two failing on the path, twice the cards apart): run again to the end."""
        path = serial_path(self.search, self.known)
        failing = [r for r in path if not self.known[r]]
        if len(failing) < 2 or failing[-1] < 2 * failing[-2]:
            return []
        return [r for r in failing[-2:] if self.seen[r].early is not None]


@dataclass
class TeamHoursProfile:
    """The intervals' searches as one profile of the one loop (module docstring)."""

    base: PointBase
    slos: tuple[Slo, ...]
    spec: ReplaySpec
    data: dict[str, Any]
    interval_s: float = 3600.0
    lead_s: float = LEAD_S
    router: str = "session_affinity"
    max_replicas: int = 64
    answers_interrupted: bool = True          # the loop hands Ctrl-C's result to plan
    result: TeamHours | None = None           # the answer so far (Ctrl-C between points)
    on_progress: Callable[[TeamHours], None] | None = None
    # the judged requests' figures of a probe's run (tests inject a toy server's)
    figures: Callable[[str, Sequence[int]], SummaryRecord] = judged_figures
    # stop a probe once its verdict is FAIL whatever the rest of it gives
    # (`analysis.early_verdict`); False: every probe runs to its end
    early_stop: bool = True
    # the peak interval's first probe from the twin's capacity (False: from 1 card)
    capacity_estimate: bool = True

    def _point(self, s: _Search, r: int, full: bool = False) -> Point:
        """The interval on `r` cards; stopped once decided unless `full` (a probe decided
        early run again to the end, in `cards-R-full`, for its figures)."""
        iv = s.hour.interval
        p = s.base.point(s.sessions, extra=(f"fleet.replicas={r}",
                                            f"fleet.router={self.router}",
                                            *NO_BLOCK_JOURNAL),
                         sub=f"cards-{r}-full" if full else f"cards-{r}",
                         coords={"interval": clock(iv.start_s), "replicas": r},
                         label=f"{clock(iv.start_s)}–{clock(iv.end_s)} on {r} card(s)")
        if full or not self.early_stop or not decidable(self.slos):
            return p
        return replace(p, early=EarlyRule(self.slos, iv.requests, iv.lead))

    def _searches(self, hours: list[HourAnswer],
                  plan: list[tuple[Interval, list[team.Stream]]]) -> dict[int, _Search]:
        """Each interval with requests: its scenario written under the folder."""
        out: dict[int, _Search] = {}
        for (iv, streams), h in zip(plan, hours, strict=True):
            if not iv.requests:
                h.cards, h.done = 0, True
                continue
            name = f"interval-{clock(iv.start_s).replace(':', '').replace(' ', '')}"
            path = self.base.folder / name / "scenario.yaml"
            base = replace(self.base, scenario_path=str(path), folder=self.base.folder / name,
                           source=interval_source(path, interval_data(
                               self.data, streams, iv, self.lead_s)))
            out[iv.index] = _Search(h, FleetSearch(1, self.max_replicas), base,
                                    len(streams), streams=list(streams))
        return out

    def plan(self, width: int) -> Generator[list[Point], list[PointResult], TeamHours]:
        plan = plan_intervals(self.spec, self.interval_s, self.lead_s)
        hours = [HourAnswer(iv) for iv, _ in plan]
        res = self.result = TeamHours(self.interval_s, self.lead_s, self.max_replicas,
                                      hours, self.base.target.price_per_hour)
        todo = self._searches(hours, plan)
        self._progress(res)
        if not todo:
            return res
        peak = max(todo.values(), key=lambda s: (s.hour.interval.requests, -s.hour.interval.index))
        if self.capacity_estimate:
            peak.search = FleetSearch(self._capacity_start(peak), self.max_replicas)
        if not (yield from self._run([peak], width, res)):
            return res
        top = peak.hour.cards or self.max_replicas
        rest = [s for s in todo.values() if s is not peak]
        for s in rest:
            s.search = FleetSearch(first_guess(top, peak.hour.interval.requests,
                                               s.hour.interval.requests), self.max_replicas)
        yield from self._run(rest, width, res)
        return res

    def _capacity_start(self, s: _Search) -> int:
        """The peak interval's first probe from the twin's capacity at the SLO's decode
        speed floor (`analysis.team_hours.capacity_start`); 1 without such a floor or
        against a real endpoint (no model of its card)."""
        floor = next((slo.threshold for slo in self.slos if slo.metric == "decode_tok_s_median"
                      and slo.op in (">=", ">")), None)
        if floor is None or self.base.target.endpoint_url is not None:
            return 1
        sc, _ = s.base.resolve()
        hw, model = parse_twin(self.base.target.twin) if self.base.target.twin \
            else (sc.twin.hardware, sc.twin.model)
        pm = build_perf_model(hw, model, spec=self.base.target.spec or sc.twin.spec,
                              overrides=sc.twin.engine_overrides())
        iv = s.hour.interval
        reqs = [r for st in s.streams for r in st.requests if iv.start_s <= r.start_s < iv.end_s]
        if not reqs:
            return 1
        ctx = int(statistics.median(r.input + r.cache_read + r.cache_write + r.output
                                    for r in reqs))
        per_card = batch_at_speed(lambda b: decode_tok_s(pm, b, ctx) / b, floor,
                                  pm.engine.max_num_seqs)
        in_flight = peak_overlap((r.start_s, r.start_s + (r.api_s or 0.0)) for r in reqs)
        return min(capacity_start(in_flight, per_card), self.max_replicas)

    def _run(self, active: list[_Search], width: int, res: TeamHours
             ) -> Generator[list[Point], list[PointResult], bool]:
        """Run these intervals' searches side by side; False when interrupted."""
        active = list(active)
        while active:
            share = max(1, width // len(active))
            asked: list[tuple[_Search, int, bool]] = []
            for s in active:
                full = s.needs_full()
                asked += [(s, r, True) for r in full] if full else [
                    (s, r, False) for r in frontier(s.search, s.known, share)]
            if not asked:
                break
            results = yield [self._point(s, r, full) for s, r, full in asked]
            cut = False
            for (s, r, _full), got in zip(asked, results, strict=False):
                if got.early is not None:     # FAILS whatever the rest would give
                    slo = got.early.split(" ", 1)[0]
                    s.known[r] = False
                    s.seen[r] = HourProbe(r, False, (slo,), {}, got.run_dir, got.early)
                    continue
                if got.status == "interrupted":
                    cut = True
                    continue
                if not got.ok:
                    got.raise_error(f"{clock(s.hour.interval.start_s)} on {r} card(s)")
                figs = self.figures(got.run_dir, s.hour.interval.lead)
                failed = interval_failures(figs, self.slos)
                s.known[r] = not failed
                s.seen[r] = HourProbe(r, not failed, failed, figs, got.run_dir)
                if res.price_per_hour is None and isinstance(
                        p := got.summary.get("price_per_hour"), int | float):
                    # a twin fleet records what its r cards rent for: one card's is 1/r
                    # (a price given with --price-per-hour is one card's: set up front)
                    res.price_per_hour = float(p) / r
            if cut:
                res.interrupted = True
                self._progress(res)
                return False
            for s in list(active):
                path = serial_path(s.search, s.known)
                s.hour.probes = [s.seen[r] for r in path]
                if s.needs_full():
                    continue
                flat = self._plateau(path, s)
                if flat or not frontier(s.search, s.known, 1):
                    s.hour.cards = None if flat else s.search.answer(s.known)
                    s.hour.plateau = flat
                    s.hour.done = True
                    active.remove(s)
            self._progress(res)
        return True

    def _plateau(self, path: list[int], s: _Search) -> bool:
        """Twice the cards failing by nearly as much: more cards stop helping."""
        failing = [r for r in path if not s.known[r]]
        if len(failing) < 2 or failing[-1] < 2 * failing[-2]:
            return False
        a, b = (s.seen[r].figures for r in failing[-2:])
        va, vb = (max(slo.violation(f) for slo in self.slos) for f in (a, b))
        return vb >= (1 - PLATEAU_GAIN) * va

    def _progress(self, res: TeamHours) -> None:
        """progress.json for the live view's bar (`live/watch.py`), and the caller's."""
        done = len(res.judged)
        state = {"what": "intervals judged", "done": done, "total": len(res.hours),
                 "probes": sum(len(h.probes) for h in res.hours),
                 "interrupted": res.interrupted}
        self.base.folder.mkdir(parents=True, exist_ok=True)
        (self.base.folder / PROGRESS).write_text(json.dumps(state) + "\n")
        if self.on_progress is not None:
            self.on_progress(res)
