"""`size --team M --pd` as a profile of the one pipeline (`analysis.pd_sizing`).

Two serial searches, each probe a whole team's run on the twin: the fewest aggregated
replicas under session affinity (`search.FleetSearch` from the division's answer), then
the fewest cards split into prefill and decode instances (`FleetSearch` over the card
count from the aggregated answer; a card count passes when one of its `splits` does,
and its splits run as one batch). Then, if the aggregated fleet was not run on the P/D
answer's card count, that one run, so the two stand beside each other on the same cards.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from simulator.analysis.fleet_sizing import FleetProbe
from simulator.analysis.pd_sizing import PDProbe, PDSizing, splits
from simulator.analysis.search import FleetSearch, frontier
from simulator.analysis.slo import Slo, failures
from simulator.sweep.point import Point, PointResult
from simulator.sweep.profiles import PointBase


@dataclass
class PDProfile:
    base: PointBase
    slos: tuple[Slo, ...]
    team_sessions: int
    start: int | None                 # the division ⌈M / N⌉ (None: 1)
    max_cards: int = 64

    def _agg_point(self, r: int) -> Point:
        return self.base.point(self.team_sessions,
                               extra=(f"fleet.replicas={r}", "fleet.prefill=0",
                                      "fleet.router=session_affinity"),
                               sub=f"aggregated-{r}",
                               label=f"aggregated {r} × {self.team_sessions} sessions",
                               coords={"replicas": r, "prefill": 0})

    def _pd_point(self, p: int, d: int) -> Point:
        return self.base.point(self.team_sessions,
                               extra=(f"fleet.replicas={d}", f"fleet.prefill={p}"),
                               sub=f"pd-{p}p{d}d",
                               label=f"P/D {p}:{d} × {self.team_sessions} sessions",
                               coords={"prefill": p, "decode": d})

    def _passed(self, r: PointResult) -> bool:
        return r.ok and not failures(r.summary, self.slos)

    def _agg(self, r: int, got: PointResult) -> FleetProbe:
        r_failed = failures(got.summary, self.slos)
        return FleetProbe(r, not r_failed and got.ok, r_failed, got.summary)

    def plan(self, width: int) -> Generator[list[Point], list[PointResult], PDSizing]:
        res = PDSizing(self.team_sessions, None, None, self.max_cards)
        # 1. aggregated replicas under session affinity
        search = FleetSearch(self.start or 1, self.max_cards)
        agg: dict[int, bool] = {}
        while batch := frontier(search, agg, 1):
            results = yield [self._agg_point(r) for r in batch]
            for r, got in zip(batch, results, strict=True):
                got.raise_error(f"of the aggregated fleet at {r} replicas")
                res.agg_probes.append(self._agg(r, got))
                agg[r] = self._passed(got)
        res.aggregated = search.answer(agg)
        # 2. the fewest cards under P/D, a few splits per card count
        pd_search = FleetSearch(max(2, res.aggregated or self.start or 2), self.max_cards)
        known: dict[int, bool] = {1: False}          # one card cannot be split
        while cards := frontier(pd_search, known, 1):
            n = cards[0]
            pairs = splits(n)
            results = yield [self._pd_point(p, d) for p, d in pairs]
            for (p, d), got in zip(pairs, results, strict=True):
                got.raise_error(f"of the P/D split {p}:{d}")
                failed = failures(got.summary, self.slos)
                res.probes.append(PDProbe(p, d, not failed and got.ok, failed, got.summary))
            known[n] = any(pr.passed for pr in res.probes if pr.cards == n)
        n_pd = pd_search.answer(known)
        best = res.best_at(n_pd) if n_pd is not None else None
        res.split = (best.prefill, best.decode) if best is not None else None
        # 3. the aggregated fleet on the same cards, if the search did not run it
        if n_pd is not None and n_pd not in agg:
            got = (yield [self._agg_point(n_pd)])[0]
            got.raise_error(f"of the aggregated fleet at {n_pd} replicas")
            res.agg_probes.append(self._agg(n_pd, got))
        return res
