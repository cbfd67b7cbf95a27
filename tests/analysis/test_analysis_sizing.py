"""Sweep rows, SLO parsing and the size search on synthetic monotone servers."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.analysis.sizing import (
    format_sizing,
    format_sweep_table,
    kv_capacity_sessions,
    parse_slo,
    probe_counts,
    size,
    sweep,
)
from simulator.errors import InputError


def toy_server(n: int, *, knee: int = 10, kv_limit: int | None = None) -> dict[str, Any]:
    """Per-session speed halves at `knee` sessions; TTFT grows linearly; preemptions past kv."""
    per = 100.0 / (1.0 + n / knee)
    return {"sessions": n, "per_session_tok_s": per, "aggregate_tok_s": per * n,
            "ttft_p50_s": 0.1 * n, "ttft_p95_s": 0.2 * n, "cache_shared_pct": 80.0,
            "usd_per_mtok": 1.0, "simulated": True,
            "preemptions": (5 if kv_limit is not None and n > kv_limit else 0),
            "kv_usage_peak": min(1.0, n / 20)}


class Counter:
    def __init__(self, **kw: Any) -> None:
        self.calls: list[int] = []
        self.kw = kw

    def __call__(self, n: int) -> dict[str, Any]:
        self.calls.append(n)
        return toy_server(n, **self.kw)


def test_sweep_rows_have_contract_keys() -> None:
    rows = sweep(Counter(), [1, 2, 4])
    assert [r["sessions"] for r in rows] == [1, 2, 4]
    for key in ("sessions", "aggregate_tok_s", "per_session_tok_s", "ttft_p50_s",
                "ttft_p95_s", "cache_shared_pct", "usd_per_mtok", "simulated"):
        assert key in rows[0]
    assert rows[2]["aggregate_tok_s"] == pytest.approx(4 * 100 / 1.4)
    table = format_sweep_table(rows)
    assert "SIMULATED" in table and len(table.splitlines()) == 5
    with pytest.raises(InputError):
        sweep(Counter(), [0, 2])


def test_parse_slo() -> None:
    s = parse_slo(" per_session_tok_s >= 50 ")
    assert (s.metric, s.op, s.threshold) == ("per_session_tok_s", ">=", 50.0)
    assert str(parse_slo("ttft_p95_s<=5")) == "ttft_p95_s<=5"
    for bad in ("per_session_tok_s=>50", "speed>=5", "ttft_p95_s<=", "", "x y"):
        with pytest.raises(InputError) as e:
            parse_slo(bad)
        assert "\n" not in str(e.value)


def test_size_throughput_bound() -> None:
    run = Counter()
    res = size(run, [parse_slo("per_session_tok_s>=50")], max_sessions=64)
    assert res.sessions == 10                         # 100/(1+n/10) >= 50 ⇔ n <= 10
    assert res.confirmed and run.calls.count(10) == 2  # confirmed by a repeat run
    assert res.binding == "per_session_tok_s>=50" and res.binding_kind == "throughput"
    assert run.calls[:5] == [1, 2, 4, 8, 16]
    assert "10 session(s)" in format_sizing(res)


def test_size_latency_and_kv_binding() -> None:
    res = size(Counter(), [parse_slo("per_session_tok_s>=20"), parse_slo("ttft_p95_s<=2")], 64)
    assert res.sessions == 10 and res.binding_kind == "latency"
    res = size(Counter(kv_limit=6), [parse_slo("per_session_tok_s>=50"),
                                     parse_slo("preemptions<=0")], 64)
    assert res.sessions == 6 and res.binding_kind == "kv_capacity"


def test_size_edges() -> None:
    res = size(Counter(), [parse_slo("per_session_tok_s>=1")], max_sessions=12)
    assert res.sessions == 12 and res.binding_kind == "max_sessions"
    res = size(Counter(), [parse_slo("per_session_tok_s>=99")], max_sessions=12)
    assert res.sessions == 0 and not res.confirmed and "no session count" in format_sizing(res)
    assert probe_counts(12) == [1, 2, 4, 8, 12] and probe_counts(1) == [1]


def test_unconfirmed_answer_is_reported() -> None:
    seen: dict[int, int] = {}

    def flaky(n: int) -> dict[str, Any]:
        seen[n] = seen.get(n, 0) + 1
        ok = n <= 5 and not (n == 5 and seen[n] > 1)
        return {"per_session_tok_s": 60.0 if ok else 40.0, "simulated": False}

    res = size(flaky, [parse_slo("per_session_tok_s>=50")], 32)
    assert res.sessions == 5 and not res.confirmed and "marginal" in res.notes[0]


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 300), st.integers(1, 300))
def test_size_finds_threshold(limit: int, max_sessions: int) -> None:
    res = size(lambda n: {"per_session_tok_s": 1.0 if n <= limit else 0.0},
               [parse_slo("per_session_tok_s>=1")], max_sessions)
    assert res.sessions == min(limit, max_sessions)


def test_kv_capacity_sessions() -> None:
    assert kv_capacity_sessions(160_000, 35_000, 20_000) == 9   # 140k / 15k
    with pytest.raises(InputError):
        kv_capacity_sessions(1000, 10, 20)


def test_size_reports_kv_bound() -> None:
    def run(n: int) -> dict[str, Any]:
        return toy_server(n) | {"context_tokens_max": 35_000, "kv_capacity_tokens": 160_000}

    res = size(run, [parse_slo("per_session_tok_s>=50")], 64, shared_prefix_tokens=20_000)
    assert res.kv_capacity_sessions == 9
    res = size(Counter(), [parse_slo("per_session_tok_s>=50")], 64, kv_capacity_tokens=1000)
    assert res.kv_capacity_sessions is None        # no peak context known
    assert "KV-capacity bound" in format_sizing(
        size(run, [parse_slo("per_session_tok_s>=50")], 8))


def test_sweep_plot_is_written(tmp_path: Any) -> None:
    from simulator.analysis.render import write_sweep_plot

    rows = sweep(Counter(), [1, 2, 4, 8])
    png = write_sweep_plot(rows, tmp_path / "out" / "sweep.png")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_size_repeats_give_a_range_and_cards_for_a_team() -> None:
    """Each repeat searches from the answer with another seed; the knee moves per seed."""
    knees = {0: 10, 1: 12, 2: 7}
    calls: list[tuple[int, int]] = []

    def seeded(n: int, k: int) -> dict[str, Any]:
        calls.append((n, k))
        return toy_server(n, knee=knees[k])

    res = size(lambda n: seeded(n, 0), [parse_slo("per_session_tok_s>=50")], 64,
               repeats=2, run_seeded=seeded, team_sessions=40)
    assert res.answers == [10, 12, 7] and res.sessions_range == (7, 12)
    assert res.cards() == (4, 6)                     # ceil(40/12), ceil(40/7)
    assert len(set(calls)) == len(calls)             # no point run twice with one seed
    text = format_sizing(res)
    assert "range over 3 seeds: 7–12" in text and "needs 4–6 cards" in text
    assert res.to_dict()["sessions_range"] == [7, 12]


def test_a_probe_that_never_reached_steady_state_fails() -> None:
    def run(n: int) -> dict[str, Any]:
        out = toy_server(n)
        if n > 4:
            out |= {"steady_state": False, "steady_state_reason": "ramp longer than the sessions"}
        return out

    res = size(run, [parse_slo("per_session_tok_s>=1")], 64)
    assert res.sessions == 4 and res.binding_kind == "not_steady"
    assert res.binding is not None and "ramp longer" in res.binding


def test_the_search_as_data_asks_for_what_size_probes_in_the_same_order() -> None:
    """`SizeSearch` is the one sizing search: serially it asks for exactly the counts
    `size` probes, and K at a time for a superset, in rounds (the CLI's --parallel
    prefetch renders it instead of re-implementing it, issue 23)."""
    from pathlib import Path

    from simulator.analysis.sizing import SizeSearch
    limit = 11
    probed: list[int] = []

    def run_point(n: int) -> dict[str, Any]:
        probed.append(n)
        return {"per_session_tok_s": 100.0 if n <= limit else 10.0}

    res = size(run_point, [parse_slo("per_session_tok_s>=50")], 40, repeats=0)
    search, order = SizeSearch(40), []
    while counts := search.next_counts():
        order += counts
        search.passed[counts[0]] = counts[0] <= limit
    assert order == probed and search.bounds() == (limit, limit + 1, True) \
        and res.sessions == limit
    wide, rounds = SizeSearch(40), 0
    while counts := wide.next_counts(3):
        assert len(counts) <= 3
        rounds += 1
        wide.passed.update({n: n <= limit for n in counts})
    assert set(probed) <= set(wide.passed) and wide.bounds()[0] == limit and rounds < len(probed)
    cli = (Path(__file__).resolve().parents[2] / "simulator" / "cli" / "sweep.py").read_text()
    assert "probe_counts" not in cli and "bisection_frontier" not in cli
