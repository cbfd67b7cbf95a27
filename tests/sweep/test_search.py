"""The serial searches as data (`analysis/search.py`): each asks exactly what its serial
algorithm asks, and K at a time (`frontier`) it reaches the serial answer, consuming
the serial probes (`serial_path`)."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.analysis.search import (
    FleetSearch,
    GallopSearch,
    SerialSearch,
    SloSearch,
    bisection_frontier,
    frontier,
    probe_counts,
    serial_path,
)


def _serial(search: SerialSearch, ok: Callable[[int], bool]) -> tuple[list[int], dict[int, bool]]:
    known: dict[int, bool] = {}
    asked = []
    while (n := search.next_probe(known)) is not None:
        assert n not in known, "a serial search never asks twice"
        asked.append(n)
        known[n] = ok(n)
    return asked, known


def _wide(search: SerialSearch, ok: Callable[[int], bool], k: int) -> tuple[dict[int, bool], int]:
    known: dict[int, bool] = {}
    rounds = 0
    while batch := frontier(search, known, k):
        assert len(batch) <= k and not set(batch) & set(known)
        known.update({n: ok(n) for n in batch})
        rounds += 1
    return known, rounds


# The searches as `size` and `size --team` ran them before they were data: the oracles.
def _old_size(max_sessions: int, ok: Callable[[int], bool]) -> tuple[list[int], int]:
    asked: list[int] = []
    seen: dict[int, bool] = {}

    def passes(n: int) -> bool:
        if n not in seen:
            asked.append(n)
            seen[n] = ok(n)
        return seen[n]
    lo, hi = 0, None
    for n in probe_counts(max_sessions):
        if not passes(n):
            hi = n
            break
        lo = n
    if hi is not None:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if passes(mid) else (lo, mid)
    return asked, lo


def _old_gallop(guess: int, max_sessions: int, ok: Callable[[int], bool]) -> tuple[list[int], int]:
    asked: list[int] = []
    cache: dict[int, bool] = {0: True}

    def passes(n: int) -> bool:
        if n not in cache:
            asked.append(n)
            cache[n] = ok(n)
        return cache[n]
    step = 1
    if passes(guess):
        lo, hi = guess, None
        while lo < max_sessions:
            n = min(max_sessions, lo + step)
            if not passes(n):
                hi = n
                break
            lo, step = n, step * 2
        if hi is None:
            return asked, lo
    else:
        hi, lo = guess, guess
        while lo > 0:
            lo = max(0, hi - step)
            if passes(lo):
                break
            hi, step = lo, step * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if passes(mid) else (lo, mid)
    return asked, lo


def _old_fleet(start: int, max_r: int, ok: Callable[[int], bool]) -> tuple[list[int], int | None]:
    asked: list[int] = []
    seen: dict[int, bool] = {}

    def passes(r: int) -> bool:
        if r not in seen:
            asked.append(r)
            seen[r] = ok(r)
        return seen[r]
    r = min(max(start, 1), max_r)
    if passes(r):
        while r > 1 and passes(r - 1):
            r -= 1
        return asked, r
    lo, hi = r, None
    while hi is None and lo < max_r:
        nxt = min(lo * 2, max_r)
        if passes(nxt):
            hi = nxt
        else:
            lo = nxt
    if hi is None:
        return asked, None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if passes(mid) else (mid, hi)
    return asked, hi


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 300), st.integers(0, 320), st.integers(1, 9))
def test_slo_search_asks_what_the_old_size_asked_and_k_wide_answers_alike(
        max_sessions: int, limit: int, k: int) -> None:
    ok = lambda n: n <= limit  # noqa: E731
    search = SloSearch(max_sessions)
    asked, known = _serial(search, ok)
    old_asked, old_answer = _old_size(max_sessions, ok)
    assert asked == old_asked and search.bounds(known)[0] == old_answer
    wide, rounds = _wide(search, ok, k)
    assert serial_path(search, wide) == asked                # the probes the serial one consumed
    assert search.bounds(wide)[0] == old_answer == min(limit, max_sessions)
    assert rounds <= len(asked)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 200), st.integers(1, 300), st.integers(0, 320), st.integers(1, 7))
def test_gallop_search_asks_what_the_old_repeat_asked(guess: int, max_sessions: int,
                                                       limit: int, k: int) -> None:
    guess = min(guess, max_sessions)
    ok = lambda n: n <= limit  # noqa: E731
    search = GallopSearch(guess, max_sessions)
    asked, known = _serial(search, ok)
    old_asked, old_answer = _old_gallop(guess, max_sessions, ok)
    assert asked == old_asked and search.answer(known) == old_answer
    wide, _ = _wide(search, ok, k)
    assert serial_path(search, wide) == asked and search.answer(wide) == old_answer


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 80), st.integers(1, 64), st.integers(1, 90), st.integers(1, 7))
def test_fleet_search_asks_what_the_old_fleet_search_asked(start: int, max_r: int,
                                                           need: int, k: int) -> None:
    ok = lambda r: r >= need  # noqa: E731
    search = FleetSearch(start, max_r)
    asked, known = _serial(search, ok)
    old_asked, old_answer = _old_fleet(start, max_r, ok)
    assert asked == old_asked and search.answer(known) == old_answer
    wide, _ = _wide(search, ok, k)
    assert serial_path(search, wide) == asked and search.answer(wide) == old_answer


def test_frontier_is_the_next_probe_first_then_both_outcomes_breadth_first() -> None:
    s = SloSearch(64)
    assert frontier(s, {}, 1) == [1]
    assert frontier(s, {}, 3) == [1, 2, 4]    # the geometric probes, run ahead
    known = {1: True, 2: True, 4: True, 8: True, 16: False}
    assert frontier(s, known, 3) == [12, 14, 10]   # the bisection tree, breadth first
    assert frontier(s, {**known, 12: True, 14: False, 13: True}, 4) == []   # 13 holds
    assert probe_counts(12) == [1, 2, 4, 8, 12] and probe_counts(1) == [1]


def test_bisection_frontier_is_the_bisection_tree_breadth_first() -> None:
    assert bisection_frontier(0, 16, 1) == [8]
    assert bisection_frontier(0, 16, 3) == [8, 4, 12]
    assert bisection_frontier(4, 8, 7) == [6, 5, 7]
    assert bisection_frontier(3, 4, 5) == []
