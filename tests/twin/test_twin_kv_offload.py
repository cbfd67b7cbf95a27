"""Host-memory KV tier (vLLM's OffloadingConnector, `--kv-offloading-size`) in the twin.

Tier off must be today's engine bit for bit; a workload that fits HBM gains nothing;
one larger than HBM re-prefills fewer tokens and starts its post-idle turns sooner;
the tier never holds more blocks than its capacity.
"""

from __future__ import annotations

import hashlib

import pytest

from simulator.twin.engine import TwinEngine
from simulator.twin.perf_model import build_perf_model
from tests.twin.kv_workload import Turn, Workload, run_workload

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
