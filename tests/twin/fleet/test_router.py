"""Routing policies as pure logic (`simulator/twin/fleet/router.py`)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulator.twin.fleet.router import (
    POLICIES,
    ReplicaLoad,
    Router,
    RouterConfig,
    dynamo_cost,
    prefix_scores,
    saturated,
)


def _loads(*in_flight: int, **kw: object) -> list[ReplicaLoad]:
    return [ReplicaLoad(in_flight=n, **kw) for n in in_flight]  # type: ignore[arg-type]


def test_round_robin_cycles_whatever_the_session() -> None:
    r = Router(RouterConfig("round_robin"), 3)
    assert [r.pick("s", _loads(0, 0, 0)) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_least_loaded_picks_fewest_in_flight_lowest_index_on_ties() -> None:
    r = Router(RouterConfig("least_loaded"), 3)
    assert r.pick("a", _loads(2, 1, 1)) == 1
    assert r.pick("a", _loads(0, 0, 0)) == 0


def test_session_affinity_sticks_until_its_replica_saturates() -> None:
    r = Router(RouterConfig("session_affinity", affinity_floor=2, affinity_tolerance=0.5), 2)
    assert r.pick("a", _loads(1, 0)) == 1          # new session: least loaded
    assert r.pick("a", _loads(0, 1)) == 1          # stays although 0 is idle (1 < floor)
    assert r.pick("a", _loads(2, 3)) == 1          # 3 ≥ floor but not > 1.5 × mean 2.5
    assert r.moves == 0
    assert r.pick("a", _loads(0, 2)) == 0          # 2 ≥ floor and 2 > 1.5 × mean 1: moves
    assert r.moves == 1
    assert r.pick("a", _loads(1, 1)) == 0          # and stays there


def test_session_affinity_moves_off_a_kv_bound_replica_with_a_queue() -> None:
    cfg = RouterConfig("session_affinity")
    loads = [ReplicaLoad(1, waiting=1, kv_usage=0.97), ReplicaLoad(1, waiting=0, kv_usage=0.2)]
    assert saturated(loads, 0, cfg) and not saturated(loads, 1, cfg)
    r = Router(cfg, 2)
    assert r.pick("a", [ReplicaLoad(0), ReplicaLoad(1)]) == 0
    assert r.pick("a", loads) == 1


def test_prefix_aware_prefers_the_cached_prefix_unless_load_outweighs_it() -> None:
    r = Router(RouterConfig("prefix_aware"), 2)
    cached_on_1 = [ReplicaLoad(1, kv_usage=0.1), ReplicaLoad(1, kv_usage=0.1, cached_blocks=90)]
    assert r.pick("a", cached_on_1, 100) == 1
    # 3 × 0.3 of prefix against 2 of queue: the idle replica wins
    busy = [ReplicaLoad(0, kv_usage=0.1), ReplicaLoad(8, kv_usage=0.1, cached_blocks=30)]
    assert r.pick("a", busy, 100) == 0


def test_prefix_scores_are_llm_d_weighted_sums() -> None:
    cfg = RouterConfig("prefix_aware")
    scores = prefix_scores([ReplicaLoad(0, kv_usage=0.5, cached_blocks=50),
                            ReplicaLoad(4, kv_usage=0.0, cached_blocks=0)], 100, cfg)
    assert scores == pytest.approx([3 * 0.5 + 2 * 1 + 2 * 0.5, 0 + 0 + 2 * 1])


def test_kv_cost_is_dynamos_prefill_plus_decode_blocks() -> None:
    assert dynamo_cost(ReplicaLoad(0, cached_blocks=40, active_blocks=500), 100) == 60 + 500 + 100
    r = Router(RouterConfig("kv_cost"), 2)
    assert r.pick("a", [ReplicaLoad(0, cached_blocks=90, active_blocks=500),
                        ReplicaLoad(0, cached_blocks=0, active_blocks=0)], 100) == 1


def test_unknown_policy_and_mismatched_loads_are_refused() -> None:
    with pytest.raises(ValueError, match="expected one of"):
        RouterConfig("random")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="2 loads for 3"):
        Router(RouterConfig(), 3).pick("a", _loads(0, 0))


@given(policy=st.sampled_from(POLICIES), r=st.integers(1, 6),
       requests=st.lists(st.tuples(st.integers(0, 5), st.lists(st.integers(0, 20), min_size=6,
                                                             max_size=6)), max_size=30))
def test_every_policy_returns_a_valid_replica(policy: str, r: int,
                                              requests: list[tuple[int, list[int]]]) -> None:
    router = Router(RouterConfig(policy), r)  # type: ignore[arg-type]
    for session, nums in requests:
        loads = [ReplicaLoad(n, waiting=n % 3, kv_usage=n / 20, cached_blocks=n,
                             active_blocks=10 * n) for n in nums[:r]]
        assert 0 <= router.pick(f"s{session}", loads, 20) < r


@given(r=st.integers(2, 6), sessions=st.lists(st.integers(0, 9), min_size=1, max_size=40))
def test_affinity_keeps_every_session_on_one_replica_under_even_load(
        r: int, sessions: list[int]) -> None:
    router = Router(RouterConfig("session_affinity"), r)
    homes: dict[int, int] = {}
    for s in sessions:
        picked = router.pick(f"s{s}", _loads(*([0] * r)))
        assert homes.setdefault(s, picked) == picked
    assert router.moves == 0
