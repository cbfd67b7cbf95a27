"""A replica of several GPUs, vLLM's way: tensor parallelism (TP) and expert parallelism (EP).

With `--tensor-parallel-size N` vLLM shards every linear layer over N GPUs (Megatron's
column/row split, `model_executor/layers/linear.py`): the attention heads, the MLP (or each
expert's FFN), the vocabulary of the embedding and the LM head. Each GPU streams 1/N of the
weights and does 1/N of the FLOPs of a step; the partial sums are joined by two all-reduces
per layer, after attention's output projection and after the MLP (`RowParallelLinear`),
each of tokens-in-the-step × hidden × 2 bytes (bf16 activations). KV heads are split too:
a GPU holds num_kv_heads/N of them, or one replicated head where N > num_kv_heads
(`QKVParallelLinear`: N must then be a multiple of num_kv_heads), so the KV a token takes
on each GPU is the model's × max(1, kv_heads/N)/kv_heads, and the pool is what each GPU
has left after its weight shard.

The all-reduce is vLLM's choice (`device_communicators/cuda_communicator.py`,
`custom_all_reduce.py`, `all_reduce_utils.py`): its custom all-reduce for a message under
its `max_size` (8 MiB; with symmetric memory on, the per-architecture table: on Hopper
64/32 MiB at 2/4 GPUs, 512/256 KiB at 6/8), on 2 GPUs or a fully NVLink-connected group
only; one-shot (every GPU reads all peers' buffers) at 2 GPUs or under 512 KiB (≤ 4 GPUs)
/ 256 KiB (≤ 8), else two-shot (reduce-scatter then all-gather, `custom_all_reduce.cuh`);
above it NCCL's ring (or the symmetric-memory kernel; one bandwidth models both). Both are
priced as latency + bytes moved per GPU / the link's bandwidth (`TPLink`, per card).

With `--enable-expert-parallel` (and no data parallelism) the EP group is the TP group:
each GPU holds E/N whole experts instead of 1/N of every expert, attention stays split by
heads, and the MoE output is joined by the same all-reduce (vLLM's all-to-all dispatch and
combine run only with data-parallel attention, which the twin does not model). A step
waits for the GPU with the most work: its distinct experts touched (weights streamed) and
its share of the routed tokens (FLOPs), with expert popularity from the profile's routing
skew and the experts laid out linearly over the ranks (vLLM's default placement) in an
order unrelated to popularity, averaged over `EP_PLACEMENTS` seeded orders.

Direction of the error: the TP compute and memory terms keep the card's single-GPU
efficiencies on GEMMs N times narrower (optimistic at small batches); comm/compute
overlap is none (vLLM runs the all-reduce between the GEMMs), which is right for vLLM's
default; the replicated norms, router and (N > kv heads) K/V projections are ignored.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from simulator.errors import InputError
from simulator.twin.model.profiles import HardwareProfile, ModelProfile, TPLink

ACT_BYTES = 2.0                 # bf16 activations in the all-reduce
MIB = 1 << 20
CUSTOM_AR_MAX_BYTES = 8 * MIB   # CustomAllreduce(max_size=8192 * 1024)
CUSTOM_AR_WORLD_SIZES = (2, 4, 6, 8)
# all_reduce_utils.CUSTOM_ALL_REDUCE_MAX_SIZES: with symmetric memory on (vLLM's default
# since it landed), the custom all-reduce's limit per compute capability and world size
CUSTOM_AR_MAX_BY_CC: dict[tuple[int, int], dict[int, int]] = {
    (9, 0): {2: 64 * MIB, 4: 32 * MIB, 6: MIB // 2, 8: MIB // 4},
    (10, 0): {2: 2 * MIB, 4: 2 * MIB, 6: MIB, 8: MIB},
}
EP_PLACEMENTS = 16              # seeded expert orders averaged for EP's hottest GPU


@dataclass(frozen=True, slots=True)
class Layout:
    """A replica's parallel layout: `tp` GPUs, experts split whole (`ep`) or sliced."""

    tp: int = 1
    ep: bool = False

    @property
    def gpus(self) -> int:
        return self.tp


def kv_heads_per_gpu(model: ModelProfile, tp: int) -> int:
    """KV heads one GPU holds: split, or one replicated where TP exceeds them."""
    return max(1, model.num_kv_heads // tp)


def kv_share(model: ModelProfile, tp: int) -> float:
    """Share of a token's KV bytes one GPU holds (1 at TP 1)."""
    return kv_heads_per_gpu(model, tp) / model.num_kv_heads


def check_layout(hardware: HardwareProfile, model: ModelProfile, layout: Layout) -> None:
    """vLLM's start-up refusals of a layout, as one line each."""
    tp = layout.tp
    if layout.ep and model.experts is None:
        raise InputError(f"twin.ep: {model.name} has no experts (expert parallelism is for "
                         "MoE models)")
    if layout.ep and tp == 1:
        raise InputError("twin.ep: expert parallelism needs twin.tp ≥ 2 (the EP group is "
                         "the TP group)")
    if tp == 1:
        return
    if model.num_q_heads % tp:
        raise InputError(f"twin.tp {tp}: {model.name}'s {model.num_q_heads} attention heads "
                         f"do not divide by {tp} (vLLM requires it); try "
                         f"{_divisors(model.num_q_heads)}")
    kv = model.num_kv_heads
    if (tp >= kv and tp % kv) or (tp < kv and kv % tp):
        raise InputError(f"twin.tp {tp}: {model.name}'s {kv} KV heads neither divide by {tp} "
                         f"nor divide it (vLLM's QKVParallelLinear requires one or the other)")
    if layout.ep and model.experts is not None and model.experts.total % tp:
        raise InputError(f"twin.ep: {model.name}'s {model.experts.total} experts do not "
                         f"divide over {tp} GPUs")
    link = hardware.tp_link
    if link is None:
        raise InputError(f"twin.tp {tp}: hardware {hardware.name} has no tp_link in its "
                         "profile (the links between its GPUs): TP 1 only")
    if tp > link.max_gpus:
        raise InputError(f"twin.tp {tp}: more GPUs than one {hardware.name} {link.kind} "
                         f"domain holds ({link.max_gpus}); multi-node TP is not modelled")


def _divisors(n: int) -> str:
    return ", ".join(str(d) for d in (2, 4, 8, 16) if n % d == 0) or "1"


def custom_ar_max_bytes(link: TPLink, tp: int, cc: tuple[int, int] | None) -> int:
    """The largest message vLLM's custom all-reduce takes on this group (0: it is off)."""
    if tp not in CUSTOM_AR_WORLD_SIZES or (tp > 2 and not link.fully_connected):
        return 0
    table = CUSTOM_AR_MAX_BY_CC.get(cc) if cc is not None else None
    return min(table[tp], CUSTOM_AR_MAX_BYTES) if table else CUSTOM_AR_MAX_BYTES


@dataclass(frozen=True, slots=True)
class AllReduce:
    """One all-reduce's algorithm and time (s) for a message of `nbytes`."""

    algorithm: str          # "custom one-shot" | "custom two-shot" | "nccl"
    seconds: float


def all_reduce(link: TPLink, tp: int, nbytes: float,
               cc: tuple[int, int] | None) -> AllReduce:
    """vLLM's all-reduce of `nbytes` over `tp` GPUs: the algorithm its code picks, priced
    as latency + bytes each GPU moves / bandwidth. One-shot: each GPU reads its tp − 1
    peers' whole buffers; two-shot and NCCL's ring: 2(tp − 1)/tp of the message each way
    (the bus bandwidth nccl-tests reports is defined on the same factor)."""
    if tp <= 1:
        return AllReduce("none", 0.0)
    if nbytes < custom_ar_max_bytes(link, tp, cc):
        one_shot = tp == 2 or (tp <= 4 and nbytes < 512 * 1024) or nbytes < 256 * 1024
        if one_shot:
            return AllReduce("custom one-shot", link.custom_latency_s
                             + (tp - 1) * nbytes / link.p2p_bytes_s)
        return AllReduce("custom two-shot", 2 * link.custom_latency_s
                         + 2 * (tp - 1) / tp * nbytes / link.p2p_bytes_s)
    return AllReduce("nccl", link.nccl_latency_s
                     + 2 * (tp - 1) / tp * nbytes / link.nccl_bus_bytes_s)


def all_reduces_per_step(model: ModelProfile) -> int:
    """Two per layer: after attention's output projection and after the MLP/MoE."""
    lay = model.layers
    return 2 * (lay.full_attention + lay.linear_attention + lay.sliding_attention)


def comm_table(hardware: HardwareProfile, model: ModelProfile, tp: int,
               max_tokens: int) -> tuple[float, ...]:
    """Seconds of all-reduce per step of T tokens, T = 0..max_tokens (all zero at TP 1)."""
    if tp <= 1 or hardware.tp_link is None:
        return (0.0,) * (max_tokens + 1)
    return _comm_table(hardware.tp_link, tp, hardware.compute_capability, model.hidden_size,
                       all_reduces_per_step(model), max_tokens)


@functools.lru_cache(maxsize=32)
def _comm_table(link: TPLink, tp: int, cc: tuple[int, int] | None, hidden: int, calls: int,
                max_tokens: int) -> tuple[float, ...]:
    per_tok = hidden * ACT_BYTES
    return (0.0, *(calls * all_reduce(link, tp, t * per_tok, cc).seconds
                   for t in range(1, max_tokens + 1)))


@dataclass(frozen=True, slots=True)
class ExpertSplit:
    """Expert parallelism's hottest GPU: per step of T tokens the distinct experts it
    touches per MoE layer (`touched[T]`), its most experts (`most`), and its share of the
    routed token-expert pairs (`token_share`, 1/N when the load is even)."""

    touched: tuple[float, ...]
    most: float
    token_share: float


@functools.lru_cache(maxsize=16)
def expert_split(probs: tuple[float, ...], tp: int, max_tokens: int) -> ExpertSplit:
    """`ExpertSplit` for routing probabilities `probs` (per expert, popularity order) laid
    out linearly over `tp` ranks in `EP_PLACEMENTS` seeded orders, averaged."""
    p = np.asarray(probs, dtype=float)
    e = p.size
    per = e // tp
    rng = np.random.default_rng(0)
    t = np.arange(0, max_tokens + 1, dtype=float)
    with np.errstate(divide="ignore"):
        log_miss = np.log1p(-np.minimum(p, 1.0))           # −inf where π = 1
    touched = np.zeros(max_tokens + 1)
    share = 0.0
    for _ in range(EP_PLACEMENTS):
        order = rng.permutation(e).reshape(tp, per)         # rank r holds order[r]
        best = np.zeros(max_tokens + 1)
        for experts in order:
            with np.errstate(invalid="ignore"):
                miss = np.nan_to_num(np.exp(np.outer(t, log_miss[experts])))
            best = np.maximum(best, per - miss.sum(axis=1))
        touched += best
        share += float(max(p[experts].sum() for experts in order) / p.sum())
    touched /= EP_PLACEMENTS
    return ExpertSplit(tuple(touched.tolist()), float(per), share / EP_PLACEMENTS)
