"""The serial searches as data (`analysis/search.py`): each asks exactly what its serial
algorithm asks, and K at a time (`frontier`) it reaches the serial answer, consuming
the serial probes (`serial_path`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.analysis.search import (
    FleetSearch,
    GallopSearch,
    SerialSearch,
    SloSearch,
    bisection_frontier,
    boundary_estimate,
    frontier,
    probe_counts,
    serial_path,
    trend_estimate,
)
from simulator.analysis.slo import failures, parse_slo


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


# The searches as `size` and `size --team` ran them before they were data: the oracles
# (the fleet's upward walk a gallop since issue 36, was a doubling).
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
    lo, hi, step = r, None, 1
    while hi is None and lo < max_r:
        nxt = min(lo + step, max_r)
        if passes(nxt):
            hi = nxt
        else:
            lo, step = nxt, step * 2
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
    assert old_answer == (need if need <= max_r else None)       # the fewest that pass


def test_a_fleet_one_replica_short_of_its_guess_takes_two_fleet_runs() -> None:
    """The H100 team of 256: the division says 7, the router needs 8 (doubling ran
    7, 14, 10, 8)."""
    asked, known = _serial(FleetSearch(7, 64), lambda r: r >= 8)
    assert asked == [7, 8] and FleetSearch(7, 64).answer(known) == 8
    asked, known = _serial(FleetSearch(7, 64), lambda r: r >= 12)
    assert asked == [7, 8, 10, 14, 12, 11] and FleetSearch(7, 64).answer(known) == 12


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


# -- the guided boundary: a gallop from where the bracket's figures put it ------------------
def _figure(n: int, top: float, knee: float, power: float) -> dict[str, Any]:
    """A run's judged figures: per-session speed flat, then falling as n^-power past the
    knee (a card's throughput shared); TTFT growing with n."""
    speed = top / (1.0 + n / knee) ** power
    return {"requested_sessions": n, "window_per_session_tok_s": speed,
            "window_ttft_p95_s": 0.05 * n, "steady_state": True}


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 300), st.floats(5, 400), st.floats(0.5, 200), st.floats(0.3, 2.0),
       st.floats(1, 300), st.integers(1, 7))
def test_the_guided_search_answers_as_the_bisection_does_in_no_more_probes_give_or_take(
        max_sessions: int, top: float, knee: float, power: float, need: float,
        k: int) -> None:
    slos = (parse_slo(f"per_session_tok_s>={need}"), parse_slo("ttft_p95_s<=9"))
    figures: dict[int, dict[str, Any]] = {}

    def ok(n: int) -> bool:
        figures[n] = _figure(n, top, knee, power)
        return not failures(figures[n], slos)
    guided = SloSearch(max_sessions, slos=slos, figures=figures)
    asked, known = _serial(guided, ok)
    old_asked, old_answer = _old_size(max_sessions, ok)
    assert guided.bounds(known)[0] == old_answer           # a monotone figure: one answer
    lo, hi, done = guided.bounds(known)
    assert done and (hi is None or (hi - lo == 1 and not known[hi]))
    assert lo == 0 or known[lo]
    # the same ascent; the bracket costs at most two probes more than its bisection
    ascent = [n for n in asked if n in probe_counts(max_sessions)]
    assert asked[:len(ascent)] == old_asked[:len(ascent)]
    assert len(asked) <= len(old_asked) + 2
    # K at a time: the serial probes and answer
    figures.clear()
    wide, rounds = _wide(guided, ok, k)
    assert serial_path(guided, wide) == asked and guided.bounds(wide)[0] == old_answer
    assert rounds <= len(asked)


def test_the_estimate_on_a_shared_card_lands_on_the_boundary() -> None:
    """Past saturation per-session speed is throughput / n: the log-log line through the
    bracket is exact, so two probes settle it where the bisection of 32..64 took five
    (the H100 `size` search: 48, 40, 44, 42, 43)."""
    slos = (parse_slo("per_session_tok_s>=30"), parse_slo("ttft_p95_s<=10"))
    figures = {n: {"requested_sessions": n, "window_per_session_tok_s": 1264.0 / n,
                   "window_ttft_p95_s": 0.01 * n} for n in range(1, 65)}
    assert boundary_estimate(slos, 32, figures[32], 64, figures[64]) == 42
    search = SloSearch(64, slos=slos, figures=figures)
    asked, known = _serial(search, lambda n: not failures(figures[n], slos))
    assert asked == [1, 2, 4, 8, 16, 32, 64, 42, 43] and search.bounds(known) == (42, 43, True)
    old_asked, _ = _old_size(64, lambda n: not failures(figures[n], slos))
    assert old_asked[7:] == [48, 40, 44, 42, 43]


def test_the_estimate_reads_latency_slos_and_the_tightest_wins() -> None:
    lat = parse_slo("ttft_p95_s<=10")
    at = lambda n, t: {"requested_sessions": n, "window_ttft_p95_s": t}  # noqa: E731
    # TTFT p95 ∝ n²: 2.5 s at 16, 10 s at 32 exactly … 40 s at 64 → the boundary is 32
    assert boundary_estimate((lat,), 16, at(16, 2.5), 64, at(64, 40.0)) == 32
    speed = parse_slo("per_session_tok_s>=30")
    both = {"window_ttft_p95_s": 40.0, "window_per_session_tok_s": 1264 / 64,
            "requested_sessions": 64}
    lo = {"window_ttft_p95_s": 2.5, "window_per_session_tok_s": 1264 / 16,
          "requested_sessions": 16}
    assert boundary_estimate((speed, lat), 16, lo, 64, both) == 32      # not 42
    assert boundary_estimate((lat, speed), 16, lo, 64, both) == 32


@pytest.mark.parametrize("at_lo, at_hi, why", [
    ({}, {"window_per_session_tok_s": 10.0}, "a figure missing at the pass"),
    ({"window_per_session_tok_s": 40.0}, {"window_per_session_tok_s": 0.0}, "zero"),
    ({"window_per_session_tok_s": 40.0}, {"window_per_session_tok_s": 40.0}, "flat (and met)"),
    ({"window_per_session_tok_s": 20.0}, {"window_per_session_tok_s": 20.0}, "flat"),
    ({"window_per_session_tok_s": 40.0}, {"window_per_session_tok_s": 40.0,
                                          "steady_state": False}, "failed for steadiness"),
])
def test_no_estimate_without_two_usable_figures_of_a_missed_slo(
        at_lo: dict[str, Any], at_hi: dict[str, Any], why: str) -> None:
    slos = (parse_slo("per_session_tok_s>=30"),)
    lo = {"requested_sessions": 8, **at_lo}
    hi = {"requested_sessions": 16, **at_hi}
    assert boundary_estimate(slos, 8, lo, 16, hi) is None, why


def test_the_estimate_stays_inside_the_bracket() -> None:
    slo = parse_slo("per_session_tok_s>=30")
    at = lambda n, v: {"requested_sessions": n, "window_per_session_tok_s": v}  # noqa: E731
    assert boundary_estimate((slo,), 8, at(8, 1e6), 16, at(16, 29.9)) == 15   # far above
    assert boundary_estimate((slo,), 8, at(8, 30.0), 16, at(16, 1e-9)) == 9   # at the pass
    assert boundary_estimate((slo,), 8, at(8, 20.0), 16, at(16, 25.0)) == 15  # upside down


def test_without_figures_or_slos_the_search_bisects_and_runs_nothing_ahead_on_a_guess() -> None:
    slos = (parse_slo("per_session_tok_s>=30"),)
    known = {1: True, 2: True, 4: True, 8: True, 16: False}
    # the bracket's figures not measured (a frontier's supposition): nothing to ask
    assert SloSearch(64, slos=slos, figures={}).next_probe(known) is None
    assert frontier(SloSearch(64, slos=slos, figures={}), {}, 9) == [1, 2, 4, 8, 16, 32, 64]
    # figures that give no estimate: the bisection's probes
    blank: dict[int, dict[str, Any]] = {n: {} for n in (8, 16)}
    assert SloSearch(64, slos=slos, figures=blank).next_probe(known) == 12


# -- the passing probes' trend, where the failing probe has no figures (issue 59) ------------
def _unsteady_past(n: int, cut: int) -> dict[str, Any]:
    """Speed 1264 / n while the run finds a steady window; none at `cut` or more (a run
    too short for its sessions): no figure to estimate from at the bracket's top."""
    if n >= cut:
        return {"requested_sessions": n, "steady_state": False}
    return {"requested_sessions": n, "window_per_session_tok_s": 1264.0 / n,
            "window_ttft_p95_s": 0.01 * n, "steady_state": True}


def test_the_trend_of_the_passes_lands_where_a_bisection_does_in_fewer_probes() -> None:
    """As the TP4 search of `size --node 8xh100` (128 passed, 256 ran no steady window,
    then a bisection of seven runs of 144 to 192 sessions): here 32 passes and 64 has no
    figures; the trend through 16 and 32 puts the boundary at 1264 / 30 = 42: two runs
    where the bisection took five, the same answer."""
    slos = (parse_slo("per_session_tok_s>=30"), parse_slo("ttft_p95_s<=10"))
    figures: dict[int, dict[str, Any]] = {}

    def ok(n: int) -> bool:
        figures[n] = _unsteady_past(n, 64)
        return not failures(figures[n], slos)
    bisected, known_b = _serial(SloSearch(64, slos=slos, figures=figures), ok)
    figures.clear()
    trended = SloSearch(64, slos=slos, figures=figures, trend=True)
    asked, known = _serial(trended, ok)
    assert trended.bounds(known) == SloSearch(64, slos=slos, figures=figures).bounds(known_b) \
        == (42, 43, True)
    assert bisected[7:] == [48, 40, 44, 42, 43] and asked[7:] == [42, 43]
    figures.clear()
    wide, _ = _wide(trended, ok, 4)                 # K at a time: the serial probes
    assert serial_path(trended, wide) == asked


def test_no_trend_past_the_failing_probe_nor_from_figures_that_do_not_worsen() -> None:
    slo = parse_slo("per_session_tok_s>=30")
    at = lambda n, v: {"requested_sessions": n, "window_per_session_tok_s": v}  # noqa: E731
    # speed ∝ n^-0.585 (60 at 32, 40 at 64) meets 30 at 64 × 0.75^(-1/0.585) = 104.6
    assert trend_estimate((slo,), 32, at(32, 60.0), 64, at(64, 40.0), 128) == 104
    # a line that crossed below the pass (42 < 64) says nothing about (64, 128)
    assert trend_estimate((slo,), 32, at(32, 1264 / 32), 64, at(64, 1264 / 64), 128) is None
    # the TP8 search: speed falls slowly, its line crosses 30 past 128 — what failed at
    # 128 was the run's length, not the speed: no guess (the bisection runs)
    assert trend_estimate((slo,), 32, at(32, 152.1), 64, at(64, 105.2), 128) is None
    assert trend_estimate((slo,), 32, at(32, 40.0), 64, at(64, 50.0), 128) is None
    assert trend_estimate((slo,), 32, at(32, 40.0), 64, at(64, 40.0), 128) is None
    lat = parse_slo("ttft_p95_s<=10")
    both = (slo, lat)
    lo = {"requested_sessions": 64, "window_per_session_tok_s": 71.1,
          "window_ttft_p95_s": 0.11}
    hi = {"requested_sessions": 128, "window_per_session_tok_s": 35.9,
          "window_ttft_p95_s": 4.08}
    # the TP4 search's figures (rounded): speed's line crosses at 153, TTFT's at 152
    assert trend_estimate((slo,), 64, lo, 128, hi, 256) == 153
    assert trend_estimate(both, 64, lo, 128, hi, 256) == 152
