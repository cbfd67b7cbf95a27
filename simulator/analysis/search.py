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
bisection), `GallopSearch` (a repeat with another seed, started at an answer: gallop
towards the boundary, then bisect) and `FleetSearch` (the fewest replicas from a first
guess: walk down while passing, else double up and bisect).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

Known = Mapping[int, bool]


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


@dataclass(frozen=True)
class SloSearch:
    """The search `size` runs: geometric probes 1, 2, 4, … up to the first failure,
    then a bisection between the last pass and that failure. `steps` replaces the
    geometric probes (ascending counts: a ramp's steps), the bisection is the same."""

    max_sessions: int
    steps: tuple[int, ...] | None = None

    def probes(self) -> list[int]:
        return list(self.steps) if self.steps is not None else probe_counts(self.max_sessions)

    def bounds(self, known: Known) -> tuple[int, int | None, bool]:
        """(highest count known to pass, lowest above it known to fail or None, done)."""
        lo, hi = 0, None
        for n in self.probes():
            if n not in known:
                return lo, None, False
            if not known[n]:
                hi = n
                break
            lo = n
        if hi is None:
            return lo, None, True
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if mid not in known:
                return lo, hi, False
            lo, hi = (mid, hi) if known[mid] else (lo, mid)
        return lo, hi, True

    def next_probe(self, known: Known) -> int | None:
        lo, hi, done = self.bounds(known)
        if done:
            return None
        if hi is None:
            return next(n for n in self.probes() if n not in known)
        return (lo + hi) // 2


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
    down while the fleet still passes, else double up and bisect (more replicas are
    assumed never to make the figures worse)."""

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
        lo, hi = r, None
        while hi is None and lo < self.max_replicas:
            nxt = min(lo * 2, self.max_replicas)
            if nxt not in known:
                return nxt, None
            if known[nxt]:
                hi = nxt
            else:
                lo = nxt
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
