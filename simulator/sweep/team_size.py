"""`size` on a team replay (`import claude-code-otel | otel-genai`): the fewest cards
whose replay of the team's slice meets every SLO.

The load is the team's own — every recorded session at its recorded time — so the
search is over cards, not sessions: a fleet of R twin replicas behind the router
replays the slice, R walking up from 1 (`search.FleetSearch`: gallop, then bisect).
Each probe is judged on the whole replay's figures (`analysis.team_day.judged`). At
the answer (or the largest fleet tried) the replay's fidelity and its concurrency
profile are read back from the run's rows.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from simulator.analysis import replay_fidelity
from simulator.analysis.search import FleetSearch, frontier, serial_path
from simulator.analysis.slo import Slo
from simulator.analysis.target import target_of_runs
from simulator.analysis.team_day import (
    TeamProbe,
    TeamSizing,
    format_profile,
    format_team_sizing,
    judged,
    replayed_profile,
    team_failures,
)
from simulator.errors import InputError
from simulator.scenario.replay import ReplaySpec
from simulator.sweep.point import Point, PointResult
from simulator.sweep.profiles import PointBase

PLATEAU_GAIN = 0.1     # twice the cards must cut the worst SLO miss by 10% to go on


def _fig(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3g}"


@dataclass
class TeamSizeProfile:
    base: PointBase
    slos: tuple[Slo, ...]
    spec: ReplaySpec
    router: str = "session_affinity"
    max_replicas: int = 64
    start: int = 1                # the first probe (`--interval`: the peak interval's)

    def __post_init__(self) -> None:
        if not self.slos:
            raise InputError("size: give at least one SLO, e.g. --slo 'ttft_p95_s<=5'")
        if self.spec.team is None:
            raise InputError("size: not a team replay (import claude-code-otel / otel-genai)")

    def _point(self, r: int) -> Point:
        return self.base.point(len(self.spec.sessions),
                               extra=(f"fleet.replicas={r}", f"fleet.router={self.router}"),
                               sub=f"cards-{r}", label=f"the team's slice on {r} card(s)",
                               coords={"replicas": r})

    def plan(self, width: int) -> Generator[list[Point], list[PointResult], TeamSizing]:
        res = TeamSizing(self.slos, self.router, self.max_replicas, team=self.spec.team)
        search = FleetSearch(self.start, self.max_replicas)
        seen: dict[int, PointResult] = {}
        known: dict[int, bool] = {}
        while batch := frontier(search, known, width):
            results = yield [self._point(r) for r in batch]
            for r, got in zip(batch, results, strict=False):
                seen[r] = got
                known[r] = got.ok and not team_failures(got.summary, self.slos)
            for r in serial_path(search, known):
                seen[r].raise_error(f"on {r} card(s)")
            if (flat := self._plateau(serial_path(search, known), seen, known)) is not None:
                res.notes.append(flat)
                break
        for r in serial_path(search, known):
            failed = team_failures(seen[r].summary, self.slos)
            fid = self._fidelity(seen[r].run_dir)
            res.probes.append(TeamProbe(r, not failed, failed, seen[r].summary,
                                        seen[r].run_dir, None if fid is None
                                        else (fid[0].figures()["arrivals_held"],
                                              fid[0].figures()["held_median_s"])))
        res.replicas = None if res.notes else search.answer(known)  # notes: the plateau
        at = res.replicas if res.replicas is not None else max(seen)
        self._read_back(res, seen[at].run_dir)
        held = next((p.held for p in res.probes if p.replicas == at), None)
        if res.replicas is not None and held is not None and held[0] > 0.05 * max(
                1, res.fidelity.get("requests_recorded", 1)):
            res.notes.append(
                f"at {at} card(s) the team is slowed down: {held[0]} request(s) waited for "
                f"a reply past their recorded start (median {held[1]:.1f} s) — this card "
                "answers slower than the recorded service; an SLO near the recorded speed "
                "(e.g. decode_tok_s_median) keeps the team's pace")
        return res

    def _fidelity(self, run_dir: str) -> tuple[replay_fidelity.Fidelity,
                                               list[dict[str, Any]]] | None:
        path = Path(run_dir) / "turns.parquet"
        if not path.is_file():
            return None
        rows: list[dict[str, Any]] = [
            {str(k): v for k, v in r.items()} for r in pd.read_parquet(path).to_dict("records")]
        return replay_fidelity.compare(self.spec, rows), rows

    def _plateau(self, path: list[int], seen: dict[int, PointResult],
                 known: dict[int, bool]) -> str | None:
        """Why the search stops early: twice the cards (or more) failing by nearly as
        much — the SLO is bound by each request's own time (a long prefill, a cold
        start), which more cards do not shorten."""
        failing = [r for r in path if not known[r]]
        if len(failing) < 2 or failing[-1] < 2 * failing[-2]:
            return None
        a, b = failing[-2], failing[-1]
        va, vb = (max(s.violation(judged(seen[r].summary)) for s in self.slos) for r in (a, b))
        if vb < (1 - PLATEAU_GAIN) * va:
            return None
        figs = ", ".join(f"{s.metric} {_fig(s.value(judged(seen[a].summary)))} → "
                         f"{_fig(s.value(judged(seen[b].summary)))}" for s in self.slos)
        return (f"more cards stop helping: from {a} to {b} card(s) {figs}; the SLO is bound "
                "by each request's own time (prefill of a long context, a cold start), "
                "not by the load")

    def _read_back(self, res: TeamSizing, run_dir: str) -> None:
        """The fidelity and the replayed concurrency profile of one probe's run."""
        got = self._fidelity(run_dir)
        if got is None:
            res.fidelity = {"note": f"no turns.parquet in {run_dir}"}
            return
        fid, rows = got
        res.fidelity = {**fid.figures(), "run_dir": run_dir,
                        "worst": [{"session": w.session, "call": w.call,
                                   "prompt": w.prompt, "recorded_prompt": w.recorded_prompt,
                                   "output": w.output, "recorded_output": w.recorded_output,
                                   "at_s": w.at_s, "recorded_at_s": w.recorded_at_s}
                                  for w in replay_fidelity.worst(fid)]}
        team = self.spec.team
        assert team is not None
        res.profile_replayed = replayed_profile(self.spec, rows, team.profile_step_s,
                                                team.replay_start_s % team.profile_step_s)


def team_replay(base: PointBase) -> ReplaySpec | None:
    """The scenario's replay when it is a team's day (`replay.team`), else None."""
    return team_scenario(base)[0]


def is_team_day(base: PointBase) -> bool:
    """Whether the scenario is a team's day, read from the source's `replay.team`
    unless an override touches `replay` (then resolved)."""
    src = base.source
    if src is None or any(o.split("=", 1)[0].strip().split(".")[0] == "replay"
                          for o in base.overrides):
        return team_replay(base) is not None
    replay = src.data.get("replay")
    return isinstance(replay, dict) and replay.get("team") is not None


def team_scenario(base: PointBase) -> tuple[ReplaySpec | None, dict[str, Any]]:
    """The team day's replay (None: not a team replay) and the scenario's data, from
    one load (a day of 100,000 requests takes minutes to load)."""
    s, data = base.resolve()
    team = s.replay if s.replay is not None and s.replay.team is not None else None
    return team, data


def team_report(res: TeamSizing, folder: Path) -> tuple[dict[str, Any], str]:
    """size.json's data (written to `folder`) and the console text: the answer, the
    probes, the fidelity at the answer, the concurrency profile."""
    data = res.to_dict()
    data["target"] = target_of_runs(p.run_dir for p in res.probes)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "size.json").write_text(json.dumps(data, indent=2, default=str) + "\n")
    parts = [format_team_sizing(res, data["target"] or "(no probe's target could be read)")]
    if "requests_recorded" in res.fidelity:
        parts.append(replay_fidelity.format_fidelity(res.fidelity))
    if res.team is not None and res.profile_replayed:
        parts.append(format_profile(res.team, res.profile_replayed))
    parts.append(str(folder))
    return data, "\n".join(parts)
