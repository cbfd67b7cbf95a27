"""Hybrid state caching as vLLM 0.32's allocator keeps it (`MambaManager` in align mode,
`prefix_cache_retention_interval` 0): which states are kept, when they are released and
where they go in the free queue, what a hit needs, and what a lookup touches."""

from __future__ import annotations

from array import array

from simulator.twin.core.engine import TwinEngine
from simulator.twin.core.hybrid_prefill import aligned_split
from simulator.twin.core.kv_cache_manager import KVCacheManager
from simulator.twin.core.request import Seq
from simulator.twin.core.types import EngineRequest, RequestResult
from simulator.twin.model.perf_model import build_perf_model

KIMI = "kimi-linear-48b-a3b-awq"
BS = 1888            # Kimi's attention block on the a40


def _seq(rid: str, tokens: list[int], prompt: int) -> Seq:
    return Seq(rid, array("I", tokens), prompt, len(tokens), RequestResult(rid, prompt), prompt)


def _finish(engine: TwinEngine, rid: str, prompt: list[int], output: list[int],
            at: float) -> None:
    engine.submit(EngineRequest(rid, prompt, output, at))
    for _ in range(1000):
        if engine.result(rid).finished is not None:
            return
        engine.run_until(max(engine.now, at) + 100.0)
    raise AssertionError(f"{rid} did not finish")


def test_a_session_turn_hits_as_vllm_would() -> None:
    """Turn A: prompt P = 5 blocks + 37, output O = 2 blocks. Turn B = A's prompt and
    output + 40 tokens. vLLM 0.32 kept A's state only at its replay boundary
    ((P − 1) // block · block = 5 blocks) and none during decode, though A's attention
    blocks run to 7 blocks: B hits 5 blocks, its prefill stops at the junction (7 blocks)
    and keeps that state. Turn C extends B and hits at B's replay boundary (7 blocks)."""
    eng = TwinEngine(build_perf_model("a40", KIMI))
    p = 5 * BS + 37
    a_prompt = list(range(p))
    a_out = list(range(1_000_000, 1_000_000 + 2 * BS))
    _finish(eng, "a", a_prompt, a_out, 0.0)
    b_prompt = [*a_prompt, *a_out, *range(2_000_000, 2_000_040)]
    b_out = list(range(3_000_000, 3_000_000 + 100))
    _finish(eng, "b", b_prompt, b_out, 100.0)
    c_prompt = [*b_prompt, *b_out, *range(4_000_000, 4_000_040)]
    _finish(eng, "c", c_prompt, [5_000_000], 200.0)
    assert eng.result("b").cached_tokens == 5 * BS
    assert eng.result("c").cached_tokens == 7 * BS
    # under dense retention A's decode kept a state at every boundary it crossed
    dense = TwinEngine(build_perf_model(
        "a40", KIMI, overrides={"prefix_cache_retention_interval": None}))
    _finish(dense, "a", a_prompt, a_out, 0.0)
    _finish(dense, "b", b_prompt, b_out, 100.0)
    assert dense.result("b").cached_tokens == 7 * BS


def test_a_prefill_chunk_stops_at_the_junction() -> None:
    """`_mamba_block_aligned_split`: a chunk running past the shared-prefix junction stops
    there (so the state at the junction is written and kept); the last cacheable
    boundary leaves one token to recompute ((num_tokens − 1) // block · block)."""
    assert aligned_split(5 * BS, 8192, 7 * BS + 77, 7 * BS + 77, BS, junction=7 * BS) \
        == 2 * BS
    assert aligned_split(5 * BS, 8192, 7 * BS + 77, 7 * BS + 77, BS) == 2 * BS
    assert aligned_split(0, 8192, 3 * BS, 3 * BS, BS) == 2 * BS          # block-aligned
    assert aligned_split(0, 8192, 3 * BS, 3 * BS, BS, junction=BS) == BS


def test_a_lookup_touches_nothing() -> None:
    """Finding a hit has no side effect (vLLM's lookup; only admission touches): the
    free queue is the same before and after, though the state and blocks are found."""
    kv = KVCacheManager(40, 4, state_aligned=True, state_blocks=2)
    a = _seq("a", list(range(13)), 13)            # replay boundary: 12
    assert kv.allocate_slots(a, 12, kv.get_computed_blocks(a))
    a.num_computed = 12
    assert kv.allocate_slots(a, 1)
    a.num_computed = 13
    kv.free(a)
    order = kv._pool.free_order()
    b = _seq("b", [*range(13), 99, 98], 15)
    for _ in range(3):
        assert len(kv.get_computed_blocks(b)) == 3
    assert kv._pool.free_order() == order


def test_uncached_blocks_go_to_the_head_cached_ones_to_the_tail() -> None:
    """vLLM BlockPool.free_blocks: a request's blocks without a hash (its partial last
    block, its running states) are reused first; cached ones queue at the tail, the
    request's tail first."""
    kv = KVCacheManager(40, 4, state_aligned=True, state_blocks=2)
    a = _seq("a", list(range(10)), 10)            # 2 full blocks + a partial one
    assert kv.allocate_slots(a, 8, kv.get_computed_blocks(a))   # chunk to the replay
    a.num_computed = 8                                          # boundary (8), then
    assert kv.allocate_slots(a, 2)                              # the tail
    a.num_computed = 10
    blocks, running = list(a.blocks), list(a.state_blocks)
    kv.free(a)
    order = kv._pool.free_order()
    uncached = {blocks[2], *running}
    assert set(order[:len(uncached)]) == uncached
    assert order[-2:] == [blocks[1], blocks[0]]
    cached_states = [b for b in order if kv._pool.block_hash(b) is not None
                     and b not in blocks]
    assert len(cached_states) == 2                # the replay boundary's (8), 2 groups
    # no unhashed block of the request sits behind a hashed one
    first_hashed = next(i for i, b in enumerate(order) if kv._pool.block_hash(b) is not None)
    assert not uncached & set(order[first_hashed:])


def test_the_hit_state_is_held_for_one_step_then_queued_at_the_tail() -> None:
    """Admission takes the hit's state (it leaves the free queue); after the request's
    first step it goes back, to the tail: the hit refreshed it."""
    kv = KVCacheManager(40, 4, state_aligned=True, state_blocks=1)
    a = _seq("a", list(range(9)), 9)              # replay boundary: 8
    assert kv.allocate_slots(a, 8, kv.get_computed_blocks(a))
    a.num_computed = 8
    assert kv.allocate_slots(a, 1)
    a.num_computed = 9
    kv.free(a)
    b = _seq("b", [*range(9), 50, 51, 52], 12)
    hit = kv.get_computed_blocks(b)
    state = list(b.hit_state)
    assert len(hit) == 2 and len(state) == 1 and state[0] in kv._pool.free_order()
    assert kv.allocate_slots(b, 4, hit)
    assert state[0] not in kv._pool.free_order()
    b.num_computed = 12
    b.num_tokens += 1
    assert kv.allocate_slots(b, 1)                # its next step
    assert kv._pool.free_order()[-1] == state[0]


def test_running_state_blocks_grow_with_the_draft_depth() -> None:
    """MambaSpec.num_speculative_blocks = the draft depth for every method: a running
    request holds one running and k speculative state blocks per linear group."""
    kv = KVCacheManager(200, 4, state_aligned=True, state_blocks=3, spec_state_blocks=5)
    a = _seq("a", list(range(20)), 10)
    assert kv.allocate_slots(a, 8, kv.get_computed_blocks(a))
    assert kv.num_used == 2 + 3 * (1 + 5)
    kv.free(a)
    assert kv.num_used == 0
    pm = build_perf_model("a40", KIMI, spec="ngram:4")
    eng = TwinEngine(pm)
    assert eng.kv_cache_manager.running_state_blocks == 3 * 5
