"""A TP replica's terms (`parallel`), each with its value, formula and source: what
`endurance twin show --tp N` prints. Pure: reads the perf model and its profiles."""

from __future__ import annotations

from simulator.twin.model import parallel
from simulator.twin.model.perf_model import RooflinePerfModel
from simulator.twin.model.spec_terms import SpecTerm

VLLM_AR = ("vLLM device_communicators/cuda_communicator.py (custom all-reduce, else "
           "symmetric memory / NCCL), custom_all_reduce.py should_custom_ar, "
           "all_reduce_utils.CUSTOM_ALL_REDUCE_MAX_SIZES, csrc/custom_all_reduce.cuh "
           "(one-shot vs two-shot)")


def _time(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds >= 1e-4 else f"{seconds * 1e6:.3g} µs"


def parallel_terms(pm: RooflinePerfModel, tokens: tuple[int, ...] = (1, 64, 2048)
                   ) -> list[SpecTerm]:
    """The layout's memory split, its all-reduces at a few step sizes, and EP's skew."""
    tp, m, hw = pm.layout.tp, pm.model, pm.hardware
    link = hw.tp_link
    if tp == 1 or link is None:
        return [SpecTerm("tp", "one GPU", "1", "n/a", "twin.tp (vLLM --tensor-parallel-size)")]
    heads = parallel.kv_heads_per_gpu(m, tp)
    rep = " (replicated: TP exceeds the KV heads)" if tp > m.num_kv_heads else ""
    out = [
        SpecTerm("weights per GPU", "W / TP", f"{pm.weights_per_gpu / 1e9:.2f} GB", "derived",
                 "vLLM linear.py Column/RowParallelLinear, VocabParallelEmbedding: every "
                 "matrix split over the group (norms and router replicated, ignored)"),
        SpecTerm("KV heads per GPU", "max(1, kv_heads / TP)", f"{heads} of {m.num_kv_heads}{rep}",
                 "derived", "vLLM QKVParallelLinear (num_kv_head_replicas)"),
        SpecTerm("KV bytes per token per GPU", "kv_token · heads_per_gpu / kv_heads",
                 f"{pm.kv_bytes_per_token:,.0f} B", "derived", m.sources.get(
                     "kv_bytes_per_token_bf16", "model profile")),
        SpecTerm("KV capacity", "(util·mem − W/TP − reserve) / kv_per_gpu, whole blocks",
                 f"{pm.kv_capacity_tokens():,} tokens", "derived",
                 "vLLM determine_available_memory per rank; the pool is the smallest rank's"),
        SpecTerm("all-reduces per step", "2 × layers",
                 str(parallel.all_reduces_per_step(m)), "derived",
                 "RowParallelLinear after attention's o_proj and the MLP/MoE (reduce_results)"),
    ]
    for t in tokens:
        nbytes = t * m.hidden_size * parallel.ACT_BYTES
        ar = parallel.all_reduce(link, tp, nbytes, hw.compute_capability)
        out.append(SpecTerm(
            f"all-reduce, {t:,} tokens", "T · hidden · 2 B; latency + bytes/GPU / bandwidth",
            f"{_time(ar.seconds)} each, {_time(pm.comm_time(t))} a step ({ar.algorithm}, "
            f"{nbytes / 1024:,.0f} KiB)", "derived", VLLM_AR))
    out.append(SpecTerm(
        f"link ({link.kind})", "p2p / NCCL bus bandwidth, latency",
        f"{link.p2p_bytes_s / 1e9:.0f} / {link.nccl_bus_bytes_s / 1e9:.0f} GB/s, "
        f"{_time(link.custom_latency_s)} / {_time(link.nccl_latency_s)}",
        f"own ({hw.name})", link.source))
    if pm.layout.ep and m.experts is not None:
        out.append(SpecTerm(
            "experts per GPU (EP)", "E / TP, whole", f"{m.experts.total // tp}", "derived",
            "vLLM FusedMoE determine_expert_map, linear placement"))
        out.append(SpecTerm(
            "hottest GPU's experts touched", "max over ranks of Σ 1 − (1 − π_e)^T, T = 1 / max",
            f"{pm.experts_touched(1):.2f} / {pm.experts_touched(10**9):.0f}", "derived",
            f"routing skew {pm.efficiency.routing_skew:g} ({pm.efficiency_source}); "
            f"{parallel.EP_PLACEMENTS} seeded expert orders"))
    return out
