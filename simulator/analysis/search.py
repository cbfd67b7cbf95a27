"""Serial searches over a count, and how to run K of their probes at once.

A search asks for one probe at a time (a session count, a replica count) and decides
its next from the answers so far: `next_probe(known)` walks the serial algorithm over
`known` (count → passed) and returns the first probe whose answer it lacks, None when
it is done. Pure and deterministic, so:

* `frontier(search, known, k)` gives up to k probes the serial search may ask for next
  — breadth first over the outcomes it does not know yet — which can run at once;
* `serial_path(search, known)` is the probes the serial search consumed, in order; the
  answer read from them is the serial answer whatever else ran ahead.

The searches: `SloSearch` (geometric 1, 2, 4, … up to the first failure, then a
bisection, or — given the SLOs and the probes' figures — a gallop from where the figures
say the boundary lies: `boundary_estimate`), `GallopSearch` (a repeat with another seed,
started at an answer: gallop towards the boundary, then bisect) and `FleetSearch` (the
fewest replicas from a first guess: walk down while passing, else gallop up and bisect).

Why the estimate: a probe is a whole run (10 simulated minutes on the twin, ten real
ones against a card), and past saturation the judged figures follow a power law in the
session count (per-session tok/s ∝ 1/n once the card's throughput is shared), so the
log-log line through the bracket's two probes lands within a session or two of the
boundary where a bisection needs log2(bracket) probes. The answer is still read from a
bracket of a passing count and the failing count one above it, as the bisection's is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from simulator.analysis.run_summary import Summary
from simulator.analysis.slo import Slo

Known = Mapping[int, bool]
Figures = Mapping[int, Summary]      # count → the figures its probe measured


class SerialSearch(Protocol):
    def next_probe(self, known: Known) -> int | None: ...


_MAX_EXPANSIONS = 4096       # states a frontier looks at (the tree is explored breadth first)


def frontier(search: SerialSearch, known: Known, k: int) -> list[int]:
    """Up to `k` probes the serial search may ask for next, the one it asks for now
    first; then, breadth first, the probes it would ask for after each outcome."""
    out: list[int] = []
    queue: list[dict[int, bool]] = [dict(known)]
    looked = 0
    while queue and len(out) < k and looked < _MAX_EXPANSIONS:
        state = queue.pop(0)
        looked += 1
        n = search.next_probe(state)
        if n is None:
            continue
        if n not in out:
            out.append(n)
        queue += [{**state, n: True}, {**state, n: False}]
    return out


def serial_path(search: SerialSearch, known: Known) -> list[int]:
    """The probes the serial search consumed from `known`, in the order it asked."""
    state: dict[int, bool] = {}
    path: list[int] = []
    while (n := search.next_probe(state)) is not None and n in known:
        state[n] = known[n]
        path.append(n)
    return path


def probe_counts(max_sessions: int) -> list[int]:
    """1, 2, 4, … up to max_sessions (max_sessions included as the last probe)."""
    out, n = [], 1
    while n < max_sessions:
        out.append(n)
        n *= 2
    return [*out, max_sessions]


def bisection_frontier(lo: int, hi: int, k: int) -> list[int]:
    """Up to `k` points a bisection of (lo, hi) may probe next, breadth first: the
    midpoint, then the midpoints of both halves, … (the next levels of its tree)."""
    out: list[int] = []
    queue = [(lo, hi)]
    while queue and len(out) < k:
        a, b = queue.pop(0)
        if b - a <= 1:
            continue
        mid = (a + b) // 2
        out.append(mid)
        queue += [(a, mid), (mid, b)]
    return out


def boundary_estimate(slos: Sequence[Slo], lo: int, at_lo: Summary,
                      hi: int, at_hi: Summary) -> int | None:
    """The largest count the figures say still meets every SLO that `hi` misses: each
    such SLO's judged figure on the log-log line through (lo, at lo) and (hi, at hi),
    solved for its threshold, rounded down; the smallest over those SLOs, inside
    (lo, hi). None when no missed SLO has two positive, different figures and a
    positive threshold (a run that never reached steady state, a missing figure)."""
    best: int | None = None
    for slo in slos:
        v_lo, v_hi = slo.value(at_lo), slo.value(at_hi)
        if slo.check(at_hi) or v_lo is None or v_hi is None:
            continue
        if min(v_lo, v_hi, slo.threshold) <= 0 or v_lo == v_hi:
            continue
        slope = (math.log(v_hi) - math.log(v_lo)) / (math.log(hi) - math.log(lo))
        log_n = math.log(lo) + (math.log(slo.threshold) - math.log(v_lo)) / slope
        n = math.floor(math.exp(log_n) + 1e-9) if log_n < math.log(hi) else hi
        guess = min(hi - 1, max(lo + 1, n))
        best = guess if best is None else min(best, guess)
    return best


def trend_estimate(slos: Sequence[Slo], a: int, at_a: Summary, b: int, at_b: Summary,
                   hi: int) -> int | None:
    """Where the passing counts' trend crosses an SLO, for a failing `hi` whose figures
    say nothing (a run with no steady window): each SLO's figure on the log-log line
    through the two passing counts a < b, solved for its threshold; the smallest that
    lands inside (b, hi). None when none does — an SLO whose line crosses at or past
    `hi` is not what failed there (the run's length, its steadiness), nor is one whose
    figures do not worsen."""
    best: int | None = None
    for slo in slos:
        v_a, v_b = slo.value(at_a), slo.value(at_b)
        if v_a is None or v_b is None or min(v_a, v_b, slo.threshold) <= 0 or v_a == v_b:
            continue
        slope = (math.log(v_b) - math.log(v_a)) / (math.log(b) - math.log(a))
        log_n = math.log(b) + (math.log(slo.threshold) - math.log(v_b)) / slope
        if not math.log(b) < log_n < math.log(hi):
            continue
        n = min(hi - 1, max(b + 1, math.floor(math.exp(log_n) + 1e-9)))
        best = n if best is None else min(best, n)
    return best


@dataclass(frozen=True)
class SloSearch:
    """The search `size` runs: geometric probes 1, 2, 4, … up to the first failure,
    then the boundary between the last pass and that failure. `steps` replaces the
    geometric probes (ascending counts: a ramp's steps).

    The boundary: without `slos`, a bisection. With `slos` and `figures` (each probed
    count's figures), a gallop inside the bracket from `boundary_estimate` (up while
    passing, +1, +2, +4 …, or down while failing, then a bisection of the last step).
    The estimate needs the figures of the bracket's two probes: in a state a `frontier`
    only supposes (their figures not measured yet) `next_probe` is None, so nothing is
    run ahead there."""

    max_sessions: int
    steps: tuple[int, ...] | None = None
    slos: tuple[Slo, ...] = ()
    figures: Figures = field(default_factory=dict)
    # where the bracket's failing probe has no figure to estimate from, gallop from
    # the passing probes' trend (`trend_estimate`) instead of bisecting
    trend: bool = False

    def probes(self) -> list[int]:
        return list(self.steps) if self.steps is not None else probe_counts(self.max_sessions)

    def _ascent(self, known: Known) -> tuple[int, int | None, bool]:
        """(highest count passing, first failure or None, every ascent probe known)."""
        lo = 0
        for n in self.probes():
            if n not in known:
                return lo, None, False
            if not known[n]:
                return lo, n, True
            lo = n
        return lo, None, True

    def _walk(self, known: Known) -> tuple[int | None, int, int | None, bool]:
        """(next probe or None, lo, hi, done) after the answers in `known`."""
        lo, hi, ascended = self._ascent(known)
        if not ascended:
            return next(n for n in self.probes() if n not in known), lo, None, False
        if hi is None or hi - lo <= 1:
            return None, lo, hi, True
        if not self.slos:
            return _bisect(known, lo, hi)
        if hi not in self.figures or (lo > 0 and lo not in self.figures):
            return None, lo, hi, False      # supposed, not measured: nothing to estimate
        guess = boundary_estimate(self.slos, lo, self.figures[lo], hi, self.figures[hi]) \
            if lo > 0 else None
        if guess is None and self.trend:
            guess = self._trend(known, lo, hi)
        if guess is None:
            return _bisect(known, lo, hi)
        return _gallop(known, guess, lo, hi)

    def _trend(self, known: Known, lo: int, hi: int) -> int | None:
        """`trend_estimate` through the two highest passing probes (lo and the one
        below it), when both were measured."""
        below = [n for n in self.probes() if n < lo and known.get(n) and n in self.figures]
        if lo <= 0 or not below or lo not in self.figures:
            return None
        a = max(below)
        return trend_estimate(self.slos, a, self.figures[a], lo, self.figures[lo], hi)

    def bounds(self, known: Known) -> tuple[int, int | None, bool]:
        """(highest count known to pass, lowest above it known to fail or None, done)."""
        _, lo, hi, done = self._walk(known)
        return lo, hi, done

    def next_probe(self, known: Known) -> int | None:
        return self._walk(known)[0]


def _bisect(known: Known, lo: int, hi: int) -> tuple[int | None, int, int | None, bool]:
    """Bisect (lo passes, hi fails) over `known`: (next probe or None, lo, hi, done)."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mid not in known:
            return mid, lo, hi, False
        lo, hi = (mid, hi) if known[mid] else (lo, mid)
    return None, lo, hi, True


def _gallop(known: Known, guess: int, lo: int, hi: int
            ) -> tuple[int | None, int, int | None, bool]:
    """From `guess` inside (lo passes, hi fails): up while passing (+1, +2, +4, …), or
    down while failing, never past the bracket; then bisect the last step."""
    if guess not in known:
        return guess, lo, hi, False
    step = 1
    if known[guess]:
        lo = guess
        while hi - lo > 1:
            n = min(hi - 1, lo + step)
            if n not in known:
                return n, lo, hi, False
            if not known[n]:
                hi = n
                break
            lo, step = n, step * 2
    else:
        hi = guess
        while hi - lo > 1:
            n = max(lo + 1, hi - step)
            if n not in known:
                return n, lo, hi, False
            if known[n]:
                lo = n
                break
            hi, step = n, step * 2
    return _bisect(known, lo, hi)


@dataclass(frozen=True)
class GallopSearch:
    """The largest passing count for another seed, started at `guess` (an earlier
    answer): gallop up from it while passing (+1, +2, +4, …), or down while failing,
    then bisect the last step. Count 0 always passes."""

    guess: int
    max_sessions: int

    def _walk(self, known: Known) -> tuple[int | None, int, int | None]:
        """(next probe or None, lo, hi) after the answers in `known`."""
        def ask(n: int) -> bool | None:
            return True if n == 0 else known.get(n)

        step = 1
        first = ask(self.guess)
        if first is None:
            return self.guess, 0, None
        if first:
            lo, hi = self.guess, None
            while lo < self.max_sessions:
                n = min(self.max_sessions, lo + step)
                got = ask(n)
                if got is None:
                    return n, lo, None
                if not got:
                    hi = n
                    break
                lo, step = n, step * 2
            if hi is None:
                return None, lo, None
        else:
            hi, lo = self.guess, self.guess
            while lo > 0:
                lo = max(0, hi - step)
                got = ask(lo)
                if got is None:
                    return lo, lo, hi
                if got:
                    break
                hi, step = lo, step * 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            got = ask(mid)
            if got is None:
                return mid, lo, hi
            lo, hi = (mid, hi) if got else (lo, mid)
        return None, lo, hi

    def next_probe(self, known: Known) -> int | None:
        return self._walk(known)[0]

    def answer(self, known: Known) -> int:
        return self._walk(known)[1]


@dataclass(frozen=True)
class FleetSearch:
    """The fewest replicas ≤ max_replicas that pass, from a first guess `start`: walk
    down while the fleet still passes, else gallop up (+1, +2, +4, …) and bisect the
    last step (more replicas are assumed never to make the figures worse). The guess is
    the division ⌈team / one card's answer⌉, which a router misses by a replica or two
    at most, so a gallop settles it in two or three fleet runs where doubling took four
    (7 → 14 → 10 → 8); each probe is a whole team's run."""

    start: int
    max_replicas: int

    def _walk(self, known: Known) -> tuple[int | None, int | None]:
        """(next probe or None, answer or None)."""
        r = min(max(self.start, 1), self.max_replicas)
        if r not in known:
            return r, None
        if known[r]:
            while r > 1:
                if r - 1 not in known:
                    return r - 1, None
                if not known[r - 1]:
                    break
                r -= 1
            return None, r
        lo, hi, step = r, None, 1
        while hi is None and lo < self.max_replicas:
            nxt = min(lo + step, self.max_replicas)
            if nxt not in known:
                return nxt, None
            if known[nxt]:
                hi = nxt
            else:
                lo, step = nxt, step * 2
        if hi is None:
            return None, None
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if mid not in known:
                return mid, None
            lo, hi = (lo, mid) if known[mid] else (mid, hi)
        return None, hi

    def next_probe(self, known: Known) -> int | None:
        return self._walk(known)[0]

    def answer(self, known: Known) -> int | None:
        return self._walk(known)[1]
