"""Host-memory KV tier (vLLM's OffloadingConnector, `--kv-offloading-size`) in the twin.

Tier off must be today's engine bit for bit; a workload that fits HBM gains nothing;
one larger than HBM re-prefills fewer tokens and starts its post-idle turns sooner;
the tier never holds more blocks than its capacity.
"""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.twin.core.engine import TwinEngine
from simulator.twin.core.kv_offload import HostTier
from simulator.twin.model.perf_model import build_perf_model
from tests.twin.core.kv_workload import Turn, Workload, run_workload

MODEL = "qwen3-coder-30b-a3b-awq"

# sha256 of every request's results and the engine counters, taken with the engine
# before the host tier existed (commit 612d138) on the same workload: tier off must
# reproduce them exactly. Block hashes are per-process (Python's salted bytes hash),
# but which blocks hit does not depend on their values, so the digest is stable.
GOLDEN = {
    1.0: "90200d6cb53889ed70951d9536878889b43c05a739fc5aa58d003ce6b3cc290b",
    8.0: "847ffb267cafb2b909bb4f80e128cbf47a2472ce152472be7a5954e814dd6e55",
}


def _engine(kv_gib: float, offload_gib: float | None = None, hw: str = "a40") -> TwinEngine:
    over: dict[str, object] = {"kv_cache_gib": kv_gib}
    if offload_gib is not None:
        over["kv_offload_gib"] = offload_gib
    return TwinEngine(build_perf_model(hw, MODEL, overrides=over))


def _digest(eng: TwinEngine, turns: list[Turn]) -> str:
    h = hashlib.sha256()
    for t in sorted(turns, key=lambda t: t.result.request_id):
        r = t.result
        h.update(repr((r.request_id, r.prompt_len, r.cached_tokens, r.first_scheduled,
                       r.token_times, r.finished, r.num_preemptions,
                       r.decode_steps)).encode())
    c = eng.counters
    h.update(repr((c.prefix_cache_queries, c.prefix_cache_hits, c.prompt_tokens,
                   c.generation_tokens, c.preemptions, c.steps, c.decode_steps,
                   eng.now)).encode())
    return h.hexdigest()


@pytest.mark.parametrize("kv_gib", sorted(GOLDEN))
@pytest.mark.parametrize("offload", [None, 0.0])
def test_tier_off_is_bit_identical_to_the_engine_before_it(kv_gib: float,
                                                           offload: float | None) -> None:
    eng = _engine(kv_gib, offload)
    assert _digest(eng, run_workload(eng, Workload())) == GOLDEN[kv_gib]


def _computed(eng: TwinEngine) -> int:
    """Prompt tokens the engine had to prefill (not found in HBM nor the host tier)."""
    c = eng.counters
    return c.prefix_cache_queries - c.prefix_cache_hits - c.external_prefix_cache_hits


def _post_idle_ttft(turns: list[Turn]) -> float:
    after = [t.result.first_token - t.arrival for t in turns
             if t.gap_before_s > 0 and t.result.first_token is not None]
    return sum(after) / len(after)


def test_a_workload_that_fits_hbm_gains_nothing_and_loses_at_most_the_store_cost() -> None:
    w = Workload()
    base, tier = _engine(8.0), _engine(8.0, 64.0)
    b_turns, t_turns = run_workload(base, w), run_workload(tier, w)
    assert base.counters.preemptions == 0                # it does fit
    assert tier.counters.external_prefix_cache_hits == 0 and tier.counters.offload_load_bytes == 0
    assert tier.counters.offload_store_bytes > 0         # stores ran all the same
    assert _computed(tier) == _computed(base)
    stall = tier.counters.offload_stall_s
    by_id = {t.result.request_id: t.result for t in b_turns}
    for t in t_turns:
        b = by_id[t.result.request_id]
        assert t.result.first_token is not None and b.first_token is not None
        assert t.result.first_token - b.first_token <= stall + 1e-9
    assert tier.now - base.now <= stall + 1e-9


def test_a_workload_larger_than_hbm_reprefills_less_and_starts_post_idle_turns_sooner() -> None:
    w = Workload()
    base, tier = _engine(1.0), _engine(1.0, 64.0)
    b_turns, t_turns = run_workload(base, w), run_workload(tier, w)
    assert base.counters.preemptions > 0                 # HBM is short
    assert _computed(tier) < 0.5 * _computed(base)
    assert _post_idle_ttft(t_turns) < 0.5 * _post_idle_ttft(b_turns)
    host = sum(t.result.host_cached_tokens for t in t_turns)
    # a readmission (preempted, or a load that lost its room) loads again; per request
    # only the first admission counts, as for cached_tokens
    assert 0 < host <= tier.counters.external_prefix_cache_hits
    assert all(t.result.host_cached_tokens <= t.result.cached_tokens for t in t_turns)
    assert tier.counters.offload_load_bytes > 0 and tier.counters.offload_load_time_s > 0
    assert all(t.result.kv_load_s > 0 for t in t_turns if t.result.host_cached_tokens)


def test_offload_needs_the_cards_host_link() -> None:
    from simulator.errors import InputError
    with pytest.raises(InputError, match="host_link"):
        build_perf_model("cpu-2core", "tiny-llama-2l", overrides={"kv_offload_gib": 1.0})


@settings(max_examples=60, deadline=None)
@given(capacity=st.integers(1, 40),
       ops=st.lists(st.tuples(st.booleans(), st.lists(st.integers(0, 80), max_size=30)),
                    max_size=40))
def test_the_tier_never_holds_more_than_its_capacity_and_evicts_lru(
        capacity: int, ops: list[tuple[bool, list[int]]]) -> None:
    tier = HostTier(capacity)
    model: list[int] = []                     # reference LRU: most recent last
    for is_store, hashes in ops:
        if is_store:
            new = tier.store(hashes)
            fresh = 0
            for h in hashes:
                if h in model:
                    model.remove(h)
                else:
                    fresh += 1
                    if len(model) >= capacity:
                        model.pop(0)
                model.append(h)
            assert new == fresh
        else:
            n = tier.lookup(hashes, 0, len(hashes))
            run = 0
            for h in hashes:
                if h not in model:
                    break
                model.remove(h)
                model.append(h)
                run += 1
            assert n == run
        assert len(tier) <= capacity and sorted(model) == sorted(h for h in model if h in tier)
        assert len(tier) == len(model)


def test_engine_tier_stays_within_capacity_under_pressure() -> None:
    eng = _engine(1.0, 2.0)                   # a tier smaller than the working set
    turns = run_workload(eng, Workload(sessions=8, turns=4))
    tier = eng.host_tier
    assert tier is not None and len(tier) <= tier.capacity and tier.evicted > 0
    assert any(t.result.host_cached_tokens for t in turns)


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith((name + "{", name + " ")):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


async def test_the_http_twin_exposes_offload_counters_under_vllms_names() -> None:
    import httpx2

    from simulator.twin.serve.server import ServerConfig, create_app, serving

    perf = build_perf_model("a40", MODEL, overrides={"kv_cache_gib": 0.5, "kv_offload_gib": 4})
    cfg = ServerConfig(model=MODEL, hardware="a40", context_window=32_768, time_scale=1000.0)

    def body(word: str) -> dict[str, object]:
        system = f"You are a careful {word} agent working on a repository. " * 700
        return {"model": "x", "max_tokens": 8, "stream": False, "system": system,
                "messages": [{"role": "user", "content": "go"}]}

    async with serving(create_app(TwinEngine(perf), cfg)) as url, \
            httpx2.AsyncClient(base_url=url, timeout=30.0) as c:
        for word in ("coding", "testing", "coding"):   # the third reloads from the host
            r = await c.post("/v1/messages", json=body(word))
            assert r.status_code == 200
        text = (await c.get("/metrics")).text
    assert _metric(text, "vllm:kv_offload_store_bytes_total") > 0
    assert _metric(text, "vllm:kv_offload_load_bytes_total") > 0
    assert _metric(text, "vllm:kv_offload_load_time_total") > 0
    hits = _metric(text, "vllm:external_prefix_cache_hits_total")
    assert hits > 0 and _metric(text, "vllm:external_prefix_cache_queries_total") >= hits
    assert f'vllm:prompt_tokens_cached_by_source_total{{model_name="{MODEL}",source="host"}} {hits}' in text
    assert r.json()["usage"]["cache_read_input_tokens"] >= hits


async def test_the_http_twin_without_a_tier_shows_no_offload_counters() -> None:
    import httpx2

    from simulator.twin.serve.server import ServerConfig, create_app, serving

    perf = build_perf_model("a40", MODEL, overrides={"kv_cache_gib": 0.5})
    cfg = ServerConfig(model=MODEL, hardware="a40", context_window=32_768, time_scale=1000.0)
    async with serving(create_app(TwinEngine(perf), cfg)) as url, \
            httpx2.AsyncClient(base_url=url, timeout=30.0) as c:
        text = (await c.get("/metrics")).text
    assert "kv_offload" not in text and "vllm:prefix_cache_hits_total" in text
