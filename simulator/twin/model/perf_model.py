"""Step time of one vLLM forward pass: a roofline with named, fitted efficiency terms.

    t_step = t0 + t_seq·n + max(t_mem, t_comp) + (1 − η_o)·min(t_mem, t_comp)
    t_mem  = (W_dense + L_moe·b_expert·E_eff(T)) / (η_w·BW)
           + kv_tok·(Σ context read + T written)·(1 + h/n) / (η_kv·BW)
           + 2·S_rec·n / (η_s·BW)
    t_comp = 2·N_gemm·T / (η_c·F) + 2·N_head·n / (η_c·F)
           + attention_flops_per_pair·pairs / (η_attn·F)

(the twin's roofline design; N_gemm = the dense layers + the routed experts a token
activates, `ModelProfile.gemm_params`: the input embedding is a gather, not a GEMM). One
change from its starting point, forced by the calibration data: the KV-read efficiency grows
with the number of sequences, η_kv·n/(n + h). A single stream's attention kernel cannot
fill the card (34.3 tok/s at 119k context means ~39% of the A40's
bandwidth), yet 32 sessions reach 1,160 tok/s, which needs near-peak KV reads. A GPU
overlaps weight streaming with compute (η_o = 1); a CPU's cores do them in turn (η_o = 0,
measured on vLLM CPU: its forward pass grows ~1.8 ms per token from 1 token up).
`step_time` is called for every simulated step, so everything is precomputed and the call
is a handful of float operations.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from simulator.errors import InputError
from simulator.twin.core.decode_burst import DecodeTerms
from simulator.twin.core.hybrid_prefill import prefill_chunks
from simulator.twin.core.types import StepShape
from simulator.twin.model import execution, parallel
from simulator.twin.model.memory import NonKvMemory, non_kv_memory
from simulator.twin.model.profiles import (
    KV_DTYPE_BYTES,
    Efficiency,
    EngineSettings,
    HardwareProfile,
    ModelProfile,
    efficiency_for,
    kernel_family,
    load_engine_settings,
    load_hardware,
    load_model,
)
from simulator.twin.spec_decode.ngram import (
    MAX_SPEC_TOKENS,
    ModelDraftSpec,
    Spec,
    parse_spec,
)
from simulator.util.jsontypes import JSONObject
from simulator.util.numbers import to_float

# The rejection sampler's bytes per vocabulary entry per draft row, random sampling
# (v1/sample/rejection_sampler.py rejection_sample): bf16 logits read (2) and written as
# fp32 (4), the fp32 softmax read and written (8), probabilities read for the recovered
# token and for acceptance (8), plus the bonus row's sampler share: ≈ 30. Claude-Code-like
# traffic samples at temperature 1 (agent-sessions reference), hence the random path.
REJECTION_BYTES_PER_VOCAB = 30.0
# A penalty's device work per draft row (model_executor/layers/utils.apply_penalties via
# RejectionSampler.apply_penalties), bytes per vocabulary entry: two int64 bincount
# tensors zeroed (16) and compared to masks (16 read, 2 written), the repetition-penalty
# kernel (fp32 logits read and written, both masks read: 10), the frequency and presence
# terms (counts read and cast, logits read and written twice: 8 + 4 + 16 + 2) ≈ 74.
# Derived from the ops' tensors, not measured on a GPU.
PENALTY_BYTES_PER_VOCAB = 74.0
# top-k/top-p per draft row on the device (ops/topk_topp_sampler.apply_top_k_top_p_pytorch):
# a full-vocabulary sort of fp32 logits with int64 indices (a 4-pass radix sort reads and
# writes 12 bytes a pass: 96), the top-p softmax and cumulative sum (16), and the
# scatter back with its mask (17) ≈ 129. Derived, not measured on a GPU.
TOPK_BYTES_PER_VOCAB = 129.0


def routing_probabilities(num_experts: int, k: int, skew: float) -> np.ndarray:
    """Per-token probability that each expert is chosen: π_e = min(1, c·rank^−s), Σπ = k.

    Zipf-like popularity; the cap at 1 matters for strong skew (the top experts are then
    always touched). c is found by bisection on the monotone Σ min(1, c·r^−s)."""
    if not 0 < k <= num_experts:
        raise InputError(f"experts: active ({k}) must be in 1..total ({num_experts})")
    ranks = np.arange(1, num_experts + 1, dtype=float) ** (-skew)
    lo, hi = 0.0, float(num_experts) ** max(skew, 0.0) * k + 1.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if float(np.minimum(1.0, mid * ranks).sum()) > k:
            hi = mid
        else:
            lo = mid
    return np.asarray(np.minimum(1.0, lo * ranks))


@functools.lru_cache(maxsize=32)
def _eeff_table(num_experts: int, k: int, skew: float, max_tokens: int) -> tuple[float, ...]:
    """Cached per routing shape: fitting rebuilds the model many times."""
    probs = routing_probabilities(num_experts, k, skew)
    return tuple(expected_distinct_experts(probs, max_tokens))


def expected_distinct_experts(probs: np.ndarray, max_tokens: int) -> list[float]:
    """Table of E_eff(T) = Σ_e 1 − (1 − π_e)^T for T = 0..max_tokens (per MoE layer)."""
    with np.errstate(divide="ignore"):
        log_miss = np.log1p(-np.minimum(probs, 1.0))          # −inf where π = 1
    table = [0.0]
    for lo in range(1, max_tokens + 1, 1024):
        t = np.arange(lo, min(lo + 1024, max_tokens + 1), dtype=float)[:, None]
        with np.errstate(invalid="ignore"):
            miss = np.exp(t * log_miss)
        table.extend((probs.size - np.nan_to_num(miss).sum(axis=1)).tolist())
    return table


@dataclass(frozen=True, slots=True)
class WeightBytes:
    """Bytes of the loaded weights: total, read every step, one expert of one layer."""

    total: float
    dense_read: float
    per_expert: float


def weight_bytes(model: ModelProfile, quantization: str | None = None) -> WeightBytes:
    """Derived from parameter counts × bytes/param, rescaled to the checkpoint if known."""
    q, p = model.quant(quantization), model.params
    head = p.lm_head * q.head_bytes_per_param
    dense = p.dense_other * q.dense_bytes_per_param
    expert = model.experts.params_per_expert * q.expert_bytes_per_param if model.experts else 0.0
    n_exp = model.experts.moe_layers * model.experts.total if model.experts else 0
    total = p.embedding * q.head_bytes_per_param + head + dense + n_exp * expert
    scale = q.checkpoint_bytes / total if q.checkpoint_bytes else 1.0
    return WeightBytes(total * scale, (dense + head) * scale, expert * scale)


# terms added after manifests recorded every term: left out of `describe` while 0, so
# a twin without them records what it recorded before
UNSET_WHEN_ZERO = ("mixed_step_s", "mixed_seq_s", "allreduce_s")

# The twin's block pool holds per-block lists (~150 bytes a block): 2M blocks (32M
# tokens at 16 per block) keep it near 300 MiB; a larger budget is refused, not allocated.
MAX_KV_BLOCKS = 2**21


class RooflinePerfModel:
    """`simulator.twin.core.types.PerfModel` for one (card, model, engine settings)."""

    def __init__(self, hardware: HardwareProfile, model: ModelProfile, engine: EngineSettings,
                 efficiency: Efficiency, *, efficiency_source: str = "",
                 quantization: str | None = None) -> None:
        self.hardware, self.model, self.engine = hardware, model, engine
        self.efficiency, self.efficiency_source = efficiency, efficiency_source
        self.quantization = quantization or model.quantization
        self.weights = weight_bytes(model, self.quantization)
        self.kv_bytes_per_token = model.kv_bytes_per_token_bf16 * KV_DTYPE_BYTES[
            engine.kv_dtype] / 2.0
        self.state_bytes_per_seq = self._state_bytes_per_seq()
        self.block_size = self._block_size()
        # vLLM's `align` state cache (`hybrid_prefill`): hybrids with prefix caching
        # resume hits and end prefill chunks on these blocks; None: a plain model
        self.state_blocks_per_seq = self._state_groups()
        self.state_align_block: int | None = (
            self.block_size if model.is_hybrid and engine.enable_prefix_caching else None)
        if self.state_align_block and engine.max_num_batched_tokens < self.block_size:
            # vLLM refuses this at start-up with the same words: a whole-block prefill
            # chunk would never fit the budget
            raise InputError(
                f"twin ({model.name}): in Mamba cache align mode, block_size "
                f"({self.block_size}) must be <= max_num_batched_tokens "
                f"({engine.max_num_batched_tokens}), as vLLM requires: raise "
                "--max-num-batched-tokens or turn prefix caching off")
        # a replica of TP GPUs (`parallel`): per-GPU weights, KV and state from here on
        self.layout = parallel.Layout(engine.tensor_parallel_size,
                                      engine.enable_expert_parallel)
        parallel.check_layout(hardware, model, self.layout)
        self.weights_per_gpu = self.weights.total
        if self.layout.tp > 1:
            self._shard()
        self.num_blocks = self._num_blocks()
        self.max_num_seqs = engine.max_num_seqs
        self.max_num_batched_tokens = engine.max_num_batched_tokens
        self.spec: Spec | None = self._spec_with_curve(parse_spec(engine.spec))
        self.peak_flops = hardware.peak_flops(model.quant(self.quantization).compute_dtypes)
        self._precompute()

    def _spec_with_curve(self, spec: Spec | None) -> Spec | None:
        """A drafter spec gets its acceptance curve from the model profile."""
        if not isinstance(spec, ModelDraftSpec):
            return spec
        drafter = self.model.drafters.get(spec.kind)
        if drafter is None:
            known = ", ".join(sorted(self.model.drafters)) or "none"
            raise InputError(f"model {self.model.name}: no '{spec.kind}' drafter in its "
                             f"profile (drafters: {known})")
        return replace(spec, acceptance=tuple(drafter.acceptance))

    # -- memory ---------------------------------------------------------------------
    def _shard(self) -> None:
        """Per-GPU bytes of a TP replica: 1/TP of the weights, the GPU's KV heads of each
        token (`parallel.kv_share`), 1/TP of the recurrent states and its share of the
        sliding-window KV. Block size and state groups stay the model's (vLLM sizes its
        pages per rank with both sides divided alike)."""
        tp, m = self.layout.tp, self.model
        share = parallel.kv_share(m, tp)
        self.weights_per_gpu = self.weights.total / tp
        self.kv_bytes_per_token = self.kv_bytes_per_token * share
        sliding = m.layers.sliding_attention * m.sliding_window * self._kv_per_layer_token()
        self.state_bytes_per_seq = (m.layers.linear_attention
                                    * m.recurrent_state_bytes_per_layer / tp + sliding)

    def _kv_per_layer_token(self) -> float:
        return self.kv_bytes_per_token / max(1, self.model.layers.full_attention)

    def _state_bytes_per_seq(self) -> float:
        """Constant per-sequence memory: linear-attention state and sliding-window KV."""
        m = self.model
        sliding = m.layers.sliding_attention * m.sliding_window * self._kv_per_layer_token()
        return m.layers.linear_attention * m.recurrent_state_bytes_per_layer + sliding

    def _block_size(self) -> int:
        """vLLM enlarges a hybrid's attention block until its page holds a state page."""
        bs = self.engine.block_size
        if not self.model.is_hybrid or self.model.recurrent_state_bytes_per_layer <= 0:
            return bs
        per_block = self._kv_per_layer_token() * bs
        return bs * max(1, math.ceil(self.model.recurrent_state_bytes_per_layer / per_block))

    def _state_groups(self) -> int:
        """Pool blocks a running hybrid request holds for its linear-attention states:
        one per KV cache group of linear layers. vLLM groups each layer type into groups
        of `group_size` layers, the fewest layers of any type (or the most, when that is
        under 1.5× the fewest) (`kv_cache_utils._get_kv_cache_groups_uniform_page_size`)."""
        lay = self.model.layers
        if lay.linear_attention <= 0 or self.model.recurrent_state_bytes_per_layer <= 0:
            return 0
        counts = [c for c in (lay.full_attention, lay.sliding_attention,
                              lay.linear_attention) if c > 0]
        size = min(counts)
        if max(counts) < 1.5 * size:
            size = max(counts)
        return -(-lay.linear_attention // size)

    def _pool_bytes(self) -> float:
        """KV pool in bytes. Like vLLM's logged capacity, hybrids' per-sequence states are
        not subtracted: they take blocks from the same pool only while sequences run
        (`state_blocks_per_seq`) and where states are saved for the prefix cache."""
        return self._pool_bytes_with(self.weights, self.layout.tp, self.quantization)

    def memory_terms(self) -> NonKvMemory | None:
        """What vLLM keeps out of the KV cache on one GPU, term by term (`memory`); None:
        the card has no `memory` block (its pool is utilisation × memory − weights −
        reserve_bytes) or a fixed KV budget."""
        return self._non_kv(self.weights, self.layout.tp, self.quantization)

    def _non_kv(self, weights: WeightBytes, tp: int, quantization: str) -> NonKvMemory | None:
        hw, m = self.hardware, self.model
        if hw.memory is None or hw.kv_cache_bytes is not None:
            return None
        n_exp = m.experts.moe_layers * m.experts.total if m.experts else 0
        engine = (self.engine if tp == self.engine.tensor_parallel_size
                  else self.engine.model_copy(update={"tensor_parallel_size": tp}))
        own = hw.card_terms is not None and hw.card_terms.reserve_bytes is not None
        return non_kv_memory(
            hw, hw.memory, m, engine, quantization, weights_per_gpu=weights.total / tp,
            experts_per_gpu=weights.per_expert * n_exp / tp,
            residual_bytes=self.efficiency.reserve_bytes,
            residual_source=(f"reserve_bytes fitted on {hw.name}, on top of these terms"
                             if own else "reserve_bytes on top of these terms (0: none "
                             "fitted; the a40's reserve is not borrowed)"))

    def kv_pool_tokens(self) -> float:
        """KV capacity before rounding to whole blocks (smooth, for fitting)."""
        return self._pool_bytes() / self.kv_bytes_per_token

    def _num_blocks(self) -> int:
        blocks = int(self._pool_bytes() // (self.block_size * self.kv_bytes_per_token))
        if blocks > MAX_KV_BLOCKS:
            raise InputError(
                f"twin: a KV cache of {blocks:,} blocks ({self.hardware.name}, "
                f"{self.model.name}) is more than the twin models ({MAX_KV_BLOCKS:,} "
                f"blocks, about {MAX_KV_BLOCKS * 150 // 2**20} MiB of its own memory): "
                "lower twin.kv_cache_gib or twin.gpu_memory_utilization")
        if blocks <= 0 and self.layout.tp > 1:
            raise InputError(self._shard_shortfall())
        if blocks <= 0:
            raise InputError(
                f"model {self.model.name} ({self.quantization}, "
                f"{self.weights.total / 1e9:.1f} GB of weights) leaves no KV cache on "
                f"{self.hardware.name} ({self.hardware.memory_bytes / 1e9:.0f} GB at "
                f"utilisation {self.engine.gpu_memory_utilization}: "
                f"{self._weights_short() / 1e9:.1f} GB short){self._tp_hint()}"
                f"{self._fitting_hint()}")
        return blocks

    def _shard_shortfall(self) -> str:
        """A TP shard that leaves no KV: by how much it misses, and the TP that fits."""
        hw, tp = self.hardware, self.layout.tp
        loaded, room = self._weight_room()
        return (f"twin.tp {tp}: {self.model.name} ({self.quantization}) needs "
                f"{loaded / 1e9:.1f} GB of weights per GPU, "
                f"{self._weights_short() / 1e9:.1f} GB more than a {hw.name} has for them "
                f"({room / 1e9:.1f} GB at utilisation "
                f"{self.engine.gpu_memory_utilization}), leaving no KV cache"
                f"{self._tp_hint()}")

    def _weight_room(self) -> tuple[float, float]:
        """(bytes one GPU's weights take as loaded, bytes the card leaves them)."""
        budget = self.engine.gpu_memory_utilization * self.hardware.memory_bytes
        mem = self.memory_terms()
        if mem is None:
            return self.weights_per_gpu, budget - self.efficiency.reserve_bytes
        loaded = mem.term("weights_loaded")
        return loaded, budget - (mem.total - loaded)

    def _weights_short(self) -> float:
        """Bytes by which one GPU's weights overrun what the card leaves them (≥ 0)."""
        loaded, room = self._weight_room()
        return max(0.0, loaded - room)

    def _tp_hint(self) -> str:
        """The smallest wider TP group whose shard leaves KV on this card, if any."""
        link = self.hardware.tp_link
        if link is None or self.hardware.kv_cache_bytes is not None:
            return ""
        block = self.block_size * self.kv_bytes_per_token / parallel.kv_share(
            self.model, self.layout.tp)
        for tp in (2, 4, 8, 16, 32, 64):
            if tp <= self.layout.tp or tp > link.max_gpus:
                continue
            try:
                parallel.check_layout(self.hardware, self.model, parallel.Layout(tp))
            except InputError:
                continue
            pool = self._pool_bytes_with(self.weights, tp, self.quantization)
            if pool // (block * parallel.kv_share(self.model, tp)) > 0:
                return f"; twin.tp {tp} fits (--tp {tp} or --set twin.tp={tp})"
        return f"; no TP up to {link.max_gpus} GPUs fits it"

    def _fitting_hint(self) -> str:
        """The model's other quantizations that leave KV on this card, as the fix."""
        block = self.block_size * self.kv_bytes_per_token
        kv = {q: int(self._pool_bytes_with(weight_bytes(self.model, q), self.layout.tp, q)
                     // block)
              * self.block_size for q in self.model.quantizations if q != self.quantization}
        fits = sorted((q for q in kv if kv[q] > 0), key=lambda q: -kv[q])
        if not fits:
            return "; no quantization of it fits this card: pick a larger card or model"
        hw, m = self.hardware.name, self.model.name
        listed = ", ".join(f"{q} ({kv[q]:,} KV tokens)" for q in fits)
        return (f"; quantizations that fit: {listed} (e.g. --twin {hw}/{m}:{fits[0]}"
                f" or --set twin.model={m}:{fits[0]})")

    def _pool_bytes_with(self, weights: WeightBytes, tp: int, quantization: str) -> float:
        """The KV pool of one GPU with these weights split over `tp` GPUs."""
        hw = self.hardware
        if hw.kv_cache_bytes is not None:
            return float(hw.kv_cache_bytes)
        mem = self._non_kv(weights, tp, quantization)
        if mem is not None:
            return mem.available
        return (self.engine.gpu_memory_utilization * hw.memory_bytes - weights.total / tp
                - self.efficiency.reserve_bytes)

    def kv_capacity_tokens(self) -> int:
        """Tokens of KV the card holds (what vLLM logs as 'GPU KV cache size')."""
        return self.num_blocks * self.block_size

    # -- time -----------------------------------------------------------------------
    def _precompute(self) -> None:
        eff, bw, m = self.efficiency, self.hardware.bandwidth_bytes_s, self.model
        self._t0, self._t_seq, self._kv_half = eff.t0_s, eff.t_seq_s, eff.kv_half_seqs
        self._t_mixed, self._t_mixed_seq = eff.mixed_step_s, eff.mixed_seq_s
        self._tw_dense = self.weights.dense_read / (eff.eta_w * bw)
        self._tw_expert = 0.0
        self._eeff: list[float] = [0.0]
        self._eeff_max = 0.0
        if m.experts is not None:
            self._tw_expert = m.experts.moe_layers * self.weights.per_expert / (eff.eta_w * bw)
            self._eeff = list(_eeff_table(m.experts.total, m.experts.active,
                                          eff.routing_skew, self.engine.max_num_batched_tokens))
            self._eeff_max = float(m.experts.total)
        self._t_kv_tok = self.kv_bytes_per_token / (eff.eta_kv * bw)
        self._t_state = 2.0 * self.state_bytes_per_seq / (eff.eta_s * bw)
        self._serial = 1.0 - eff.eta_overlap      # 0 on a GPU: the step is the longer of the two
        head = m.params.lm_head
        self._t_flop_tok = 2.0 * m.gemm_params / (eff.eta_c * self.peak_flops)
        self._t_flop_seq = 2.0 * head / (eff.eta_c * self.peak_flops)
        fpp = m.attn_flops_per_pair
        if fpp is None:
            fpp = 4.0 * m.num_q_heads * m.head_dim * m.layers.full_attention
        self._t_pair = fpp / (eff.eta_attn * self.peak_flops)
        # hybrids: MLA's context expansion is a GEMM (η_c); the chunked linear-attention
        # kernels run apart from the GEMMs, their own roofline (η_attn, η_kv) per token
        self._t_ctx_tok = m.context_flops_per_token / (eff.eta_c * self.peak_flops)
        self._t_lin_tok = max(m.linear_attn_flops_per_token / (eff.eta_attn * self.peak_flops),
                              m.linear_attn_bytes_per_token / (eff.eta_kv * bw))
        self._comm: list[float] | None = None
        if self.layout.tp > 1:
            self._precompute_parallel()
        self._precompute_spec()

    def _precompute_parallel(self) -> None:
        """A TP replica's step terms (`parallel`): each GPU streams and computes its
        share, then the group all-reduces twice a layer (`_comm`, by tokens in the step).
        With EP the expert terms are the hottest GPU's (`parallel.expert_split`)."""
        eff, bw, m, tp = self.efficiency, self.hardware.bandwidth_bytes_s, self.model, self.layout.tp
        f = eff.eta_c * self.peak_flops
        self._tw_dense = self.weights.dense_read / tp / (eff.eta_w * bw)
        dense_active = m.gemm_params
        expert_flops = 0.0
        if m.experts is not None:
            x = m.experts
            if self.layout.ep:
                probs = routing_probabilities(x.total, x.active, eff.routing_skew)
                split = parallel.expert_split(tuple(probs.tolist()), tp,
                                              self.engine.max_num_batched_tokens)
                self._eeff, self._eeff_max = list(split.touched), split.most
                routed = x.routed_active
                dense_active -= routed
                expert_flops = 2.0 * routed * split.token_share / f
            else:
                self._tw_expert = self._tw_expert / tp
        self._t_flop_tok = 2.0 * dense_active / tp / f + expert_flops
        self._t_flop_seq = self._t_flop_seq / tp
        self._t_pair = self._t_pair / tp
        self._t_ctx_tok = self._t_ctx_tok / tp
        self._t_lin_tok = self._t_lin_tok / tp
        # a fitted residual per all-reduce beyond the priced one (`allreduce_s`, 0: none)
        self._comm_fixed = parallel.all_reduces_per_step(m) * eff.allreduce_s
        table = parallel.comm_table(self.hardware, m, tp, self.engine.max_num_batched_tokens)
        self._comm = [c + self._comm_fixed for c in table] if self._comm_fixed else list(table)

    def comm_time(self, num_tokens: int) -> float:
        """Seconds of TP all-reduce in a step of `num_tokens` tokens (0 at TP 1)."""
        comm = self._comm
        if comm is None:
            return 0.0
        if num_tokens < len(comm):
            return comm[num_tokens]
        link = self.hardware.tp_link
        assert link is not None, "a TP replica's card has a tp_link (check_layout)"
        return self._comm_fixed + parallel.all_reduces_per_step(self.model) * parallel.all_reduce(
            link, self.layout.tp, num_tokens * self.model.hidden_size * parallel.ACT_BYTES,
            self.hardware.compute_capability).seconds

    def _precompute_spec(self) -> None:
        """Speculation's terms, each named in `spec_time` with its source."""
        eff, spec, bw, m = self.efficiency, self.spec, self.hardware.bandwidth_bytes_s, self.model
        self._t_spec_step = self._t_verify = self._t_ngram = self._t_spec_seq = 0.0
        self._t_pen_row = self._t_pen_pad = self._t_topk_row = 0.0
        self._t_draft_w = self._t_draft_tok = self._t_rs_row = 0.0
        self._t_piecewise = self._t_eager = 0.0
        self._draft_k = 0
        self._eager_always = self._mla_uniform = False
        self.backend = execution.attention_backend(
            self.hardware.compute_capability, self.engine.kv_dtype, m.attention_kind == "mla")
        self._support: execution.GraphSupport = "never"
        self._ceiling = self._ceiling_off = 0
        group = max(1, m.num_q_heads // max(1, m.num_kv_heads))
        # query rows per head the verification kernel computes for q tokens, by q
        self.verify_rows: tuple[float, ...] = tuple(
            float(q) if self.backend is None else self.backend.verify_rows(q, group)
            for q in range(MAX_SPEC_TOKENS + 2))
        if spec is None:
            return
        k = spec.num_speculative_tokens
        if not isinstance(spec, ModelDraftSpec):
            # async scheduling is refused with CPU n-gram drafting (config/vllm.py): the
            # host's work per step and per sequence runs in series with the forward pass;
            # a draft model and an MTP head keep it (the drafter runs on the GPU)
            self._t_spec_step = eff.spec_step_s
            self._t_spec_seq = eff.spec_seq_s + eff.spec_req_s
            self._t_ngram = eff.ngram_ctx_tok_s
        self._t_verify = eff.spec_verify_tok_s
        # the sampler on the draft rows (issue 48): host work measured on vLLM's code, and
        # on a GPU the device traffic of the penalty and the top-k/top-p sort through the
        # bandwidth (on a CPU card the measured host figure is the whole of it)
        gpu = self.hardware.compute_capability is not None
        vocab_rows = m.params.lm_head / m.hidden_size / bw if gpu else 0.0
        self._t_pen_row = eff.penalty_row_s + PENALTY_BYTES_PER_VOCAB * vocab_rows
        self._t_pen_pad = eff.penalty_pad_tok_s
        self._t_topk_row = eff.topk_row_s + TOPK_BYTES_PER_VOCAB * vocab_rows
        # rejection sampler (v1/sample/rejection_sampler.py, random sampling): per draft
        # row the target logits are read, cast to fp32, soft-maxed and read again for
        # the recovered token: ~REJECTION_BYTES_PER_VOCAB bytes per vocabulary entry
        vocab = m.params.lm_head / m.hidden_size
        self._t_rs_row = REJECTION_BYTES_PER_VOCAB * vocab / bw
        self._t_piecewise, self._t_eager = eff.piecewise_step_s, eff.eager_step_s
        self._eager_always = m.spec_disables_cuda_graphs
        cc = self.hardware.compute_capability
        if self.backend is not None and cc is not None:
            self._support = execution.graph_support(self.backend, m.is_hybrid)
            self._ceiling = execution.capture_ceiling(self.engine.max_num_seqs, k, cc)
            self._ceiling_off = execution.capture_ceiling(self.engine.max_num_seqs, 0, cc)
            self._mla_uniform = self.backend.uniform_queries
        if isinstance(spec, ModelDraftSpec):
            d = m.drafters[spec.kind]
            self._t_draft_w = d.bytes_per_pass / (eff.eta_w * bw)
            self._t_draft_tok = 2.0 * d.params_active / (eff.eta_c * self.peak_flops)
            self._draft_k = k

    def drafter_pass_time(self, num_tokens: int) -> float:
        """One drafter forward pass over `num_tokens` tokens (s): weights or FLOPs."""
        comp = self._t_draft_tok * num_tokens
        return self._t_draft_w if self._t_draft_w > comp else comp

    def mode_time(self, shape: StepShape) -> float:
        """What the step's CUDA-graph mode costs beyond the same step with speculation
        off (s): a pure-decode step that would replay a full graph runs piecewise (a
        batch of unequal drafts on a backend short of ALWAYS) or eager (more tokens than
        the capture ceiling); a model whose backend drops graphs under speculation runs
        every step eager (`spec_disables_cuda_graphs`). Steps with prefill run piecewise
        either way."""
        if self._eager_always:
            return self._t_eager
        if self.backend is None or shape.prefill_tokens:
            return 0.0
        cost = {"full": 0.0, "piecewise": self._t_piecewise, "eager": self._t_eager}
        on = execution.spec_mode(self._support, shape.num_tokens, self._ceiling,
                                 shape.uniform_decode)
        off = execution.spec_off_mode(shape.num_seqs, self._ceiling_off)
        return max(0.0, cost[on] - cost[off])

    def verify_attention_time(self, shape: StepShape) -> float:
        """The verification queries' attention beyond its KV read (s): a decode with
        drafts attends 1 + k queries over its context in the attention kernel's query
        tiles (`execution`), a kernel of its own between the GEMMs; its KV read is
        already in the roofline's memory term, so what its FLOPs take beyond that read
        is added."""
        if not shape.verify_pairs:
            return 0.0
        comp = self._t_pair * shape.verify_pairs
        kv = (self._t_kv_tok * shape.verify_context
              * (1.0 + self._kv_half / max(1, shape.num_seqs)))
        return comp - kv if comp > kv else 0.0

    def spec_time(self, shape: StepShape) -> float:
        """What speculation adds to a step outside the roofline (s): 0 with spec off.

        t_spec = spec_step_s + (spec_req_s + spec_seq_s) · n_spec   host work, serial (n-gram)
               + ngram_ctx_tok_s · Σ context scanned            n-gram proposer (CPU)
               + t_pen_row · penalty rows + penalty_pad_tok_s · padded history tokens
               + t_topk_row · top-k/top-p rows                  sampler on the draft rows
               + (κ·V/BW + spec_verify_tok_s) · Σk_i            rejection sampler
               + max(0, FLOPs of the verification tiles − their KV read)   attention
               + t_ctx_tok · Σ context of demoted decodes       MLA prefill path
               + mode_time                                      piecewise / eager graphs
               + drafter(T) + (k − 1) · drafter(n_spec)          draft model, MTP
        Inside the roofline: the verification tokens' compute, KV writes and extra MoE
        experts (they are in `num_tokens`), and the LM head on every verified row."""
        if self.spec is None:
            return 0.0
        t = (self._t_spec_step + self._t_spec_seq * shape.spec_seqs
             + (self._t_verify + self._t_rs_row) * shape.draft_tokens
             + self._t_ngram * shape.proposer_context)
        if shape.penalty_draft_rows:
            t += self._t_pen_row * shape.penalty_draft_rows + self._t_pen_pad * shape.penalty_pad_tokens
        if shape.topk_draft_rows:
            t += self._t_topk_row * shape.topk_draft_rows
        if shape.verify_pairs:
            t += self.verify_attention_time(shape)
        if self._mla_uniform and shape.demoted_context:
            t += self._t_ctx_tok * shape.demoted_context
        if self._eager_always or self.backend is not None:
            t += self.mode_time(shape)
        if self._draft_k and shape.spec_seqs:
            # pass 1 runs over every token the target processed (prefill chunks too:
            # llm_base_proposer.propose), then k − 1 passes of one token per request
            t += (self.drafter_pass_time(shape.num_tokens)
                  + (self._draft_k - 1) * self.drafter_pass_time(shape.spec_seqs))
        return t

    def experts_touched(self, num_tokens: int) -> float:
        """E_eff(T): expected distinct experts per MoE layer for a step of T tokens."""
        if num_tokens < len(self._eeff):
            return self._eeff[num_tokens]
        return self._eeff_max

    def step_time(self, shape: StepShape) -> float:
        """Duration of one engine step in seconds (O(1): a table look-up and arithmetic)."""
        n, t = shape.num_seqs, shape.num_tokens
        if n <= 0:
            return self._t0
        eeff = self._eeff[t] if t < len(self._eeff) else self._eeff_max
        t_mem = (self._tw_dense + self._tw_expert * eeff
                 + self._t_kv_tok * (shape.kv_tokens_read + t) * (1.0 + self._kv_half / n)
                 + self._t_state * n)
        # the LM head runs on every verified row, drafts included
        # (gpu_model_runner._calc_spec_decode_metadata: logits_indices)
        t_comp = (self._t_flop_tok * t + self._t_flop_seq * (n + shape.draft_tokens)
                  + self._t_pair * shape.attn_token_pairs)
        roof = t_mem if t_mem > t_comp else t_comp
        if self._serial:
            # a CPU card: the cores stream and compute in turn (`eta_overlap` < 1)
            roof += self._serial * (t_comp if t_mem > t_comp else t_mem)
        if self._comm is None:
            step = self._t0 + self._t_seq * n + roof
        else:   # a TP replica: its all-reduces run between the GEMMs, in series
            step = self._t0 + self._t_seq * n + self.comm_time(t) + roof
        if shape.prefill_tokens:
            # the mixed step: prefill chunks (beside decodes) leave the full CUDA graph
            step += self._t_mixed + self._t_mixed_seq * n
            if self._t_lin_tok or self._t_ctx_tok:
                step += self.hybrid_prefill_time(shape)
        if self.spec is not None:
            step += self.spec_time(shape)
        return step

    def hybrid_prefill_time(self, shape: StepShape) -> float:
        """What a hybrid's prefill adds to a step (s), 0 for other models:
        linear-attention chunk kernels per prefill token + MLA context expansion."""
        return (self._t_lin_tok * shape.prefill_tokens
                + self._t_ctx_tok * shape.prefill_context_tokens)

    def decode_terms(self, n: int) -> DecodeTerms | None:
        """`step_time`'s terms for a pure-decode step of n sequences (one token each), so
        the engine's decode fast path can compute step times inline; None for n ≤ 0, a
        subclass with its own `step_time`, or a card that adds memory and compute time
        (`eta_overlap` < 1: the terms hold the longer of the two only). Ordered exactly
        as `step_time` computes."""
        if n <= 0 or type(self).step_time is not RooflinePerfModel.step_time or self._serial:
            return None
        eeff = self._eeff[n] if n < len(self._eeff) else self._eeff_max
        base = self._t0 + self._t_seq * n
        if self._comm is not None:
            base = base + self.comm_time(n)
        return DecodeTerms(
            n, base, self._tw_dense + self._tw_expert * eeff,
            self._t_kv_tok, 1.0 + self._kv_half / n, self._t_state * n,
            self._t_flop_tok * n + self._t_flop_seq * n + self._t_pair * 0.0)

    def describe(self) -> JSONObject:
        """What a manifest records about the twin that produced a result."""
        hw, m = self.hardware, self.model
        return {
            "simulated": True,
            "hardware": {"name": hw.name, "description": hw.description,
                         "memory_bytes": hw.memory_bytes,
                         "bandwidth_bytes_s": hw.bandwidth_bytes_s,
                         "peak_flops": self.peak_flops,
                         # a replica's price: its GPUs' (one card at TP 1)
                         "usd_per_hour": (hw.usd_per_hour if self.layout.tp == 1
                                          else hw.usd_per_hour * self.layout.tp)},
            "model": {"name": m.name, "description": m.description,
                      "quantization": self.quantization,
                      "weights_bytes": round(self.weights.total),
                      "kv_bytes_per_token": self.kv_bytes_per_token,
                      "state_bytes_per_seq": self.state_bytes_per_seq},
            "engine": {**self.engine.model_dump(exclude=self._undescribed()),
                       "attention_block_size": self.block_size},
            "kv_capacity_tokens": self.kv_capacity_tokens(),
            **self._describe_tier(),
            "num_blocks": self.num_blocks,
            "efficiency": {k: v for k, v in self.efficiency.model_dump(
                exclude={"source"}).items() if not (k in UNSET_WHEN_ZERO and v == 0)},
            "calibration_source": self.efficiency_source,
            **self._describe_parallel(),
            **self._describe_memory(),
        }

    def _describe_memory(self) -> JSONObject:
        """vLLM's non-KV memory terms, on a card with a `memory` block only (absent
        elsewhere, leaving the manifest as it was)."""
        mem = self.memory_terms()
        if mem is None:
            return {}
        return {"memory": {"budget_bytes": round(mem.budget_bytes),
                           "terms_bytes": {t.name: round(t.bytes) for t in mem.terms},
                           "available_kv_bytes": round(mem.available)}}

    def _describe_parallel(self) -> JSONObject:
        """A TP replica's layout (absent at TP 1, leaving the manifest as it was)."""
        if self.layout.tp == 1:
            return {}
        link = self.hardware.tp_link
        return {"parallel": {"tp": self.layout.tp, "ep": self.layout.ep,
                             "gpus": self.layout.gpus,
                             "weights_bytes_per_gpu": round(self.weights_per_gpu),
                             "kv_bytes_per_token_per_gpu": self.kv_bytes_per_token,
                             "usd_per_hour_per_gpu": self.hardware.usd_per_hour,
                             "tp_link": link.model_dump() if link else None}}


    def _undescribed(self) -> set[str]:
        out = {"sources"} if self.engine.kv_offload_gib > 0 else {"sources", "kv_offload_gib"}
        if self.layout.tp == 1 and not self.layout.ep:
            out |= {"tensor_parallel_size", "enable_expert_parallel"}
        return out

    def _describe_tier(self) -> JSONObject:
        """The host KV tier's size and link, only when one is configured (tier off
        leaves the manifest as it was)."""
        gib, link = self.engine.kv_offload_gib, self.hardware.host_link
        if gib <= 0 or link is None:
            return {}
        block = self.block_size * self.kv_bytes_per_token * self.layout.tp
        return {"kv_offload": {"gib": gib, "blocks": int(gib * 2**30 // block),
                               "tokens": int(gib * 2**30 // block) * self.block_size,
                               "host_link": link.model_dump()}}


def split_quantization(model: str) -> tuple[str, str | None]:
    """`llama-3.1-70b:fp8` → (`llama-3.1-70b`, `fp8`): a profile name with one of its
    `quantizations` picked (`--twin h100/llama-3.1-70b:fp8`); a path is left alone."""
    name, sep, quant = model.rpartition(":")
    if not sep or not name or not quant or "/" in quant or "\\" in quant or "." in quant:
        return model, None
    return name, quant


def build_perf_model(hardware: str, model: str, *, spec: str = "off",
                     overrides: Mapping[str, object] | None = None) -> RooflinePerfModel:
    """The twin's performance model from profile names (or YAML paths).

    `overrides` may set engine settings (`max_num_seqs`, `kv_dtype` …), efficiency terms
    (`eta_w`, `t0_s` …) and `quantization`; anything else is an InputError."""
    over = dict(overrides or {})
    model, suffix = split_quantization(model)
    hw, mp = load_hardware(hardware), load_model(model)
    quant = over.pop("quantization", None) or suffix
    kv_gib = over.pop("kv_cache_gib", None)
    if kv_gib is not None:          # vLLM --kv-cache-memory: a fixed KV budget
        card_gib = hw.memory_bytes / 2**30
        if not 0 < to_float(kv_gib) <= card_gib:    # also refuses NaN and inf
            raise InputError(f"twin: kv_cache_gib {to_float(kv_gib):g} must be > 0 and at "
                             f"most the {hw.name} card's memory ({card_gib:.1f} GiB)")
        hw = hw.model_copy(update={"kv_cache_bytes": int(to_float(kv_gib) * 2**30)})
    if over.get("kv_dtype", "auto") in ("auto", None):
        over.pop("kv_dtype", None)
        if mp.kv_dtype_default is not None and "kv_dtype" not in hw.engine:
            over["kv_dtype"] = mp.kv_dtype_default
    eff, source = efficiency_for(hw, kernel_family(mp, str(quant) if quant else None))
    eff_keys = {k: over.pop(k) for k in list(over) if k in Efficiency.model_fields}
    if eff_keys:
        eff = eff.model_copy(update=eff_keys)
        source = f"{source}; overridden: {', '.join(sorted(eff_keys))}"
    unknown = [k for k in over if k not in EngineSettings.model_fields]
    if unknown:
        raise InputError(f"twin overrides: unknown setting(s) {', '.join(unknown)}")
    if spec.strip().lower() not in ("", "off", "none") and "max_num_batched_tokens" not in over:
        # vLLM of the calibration period lowered the budget with speculation on
        # (published vLLM measurements, profiles/calibration/); an explicit setting wins
        base = load_engine_settings(hw, {**over, "spec": spec})
        over["max_num_batched_tokens"] = base.spec_max_num_batched_tokens
    engine = load_engine_settings(hw, {**over, "spec": spec})
    if engine.kv_offload_gib > 0 and hw.host_link is None:
        raise InputError(f"hardware {hw.name}: --kv-offload-gib needs the card's host_link "
                         f"(bandwidth to host memory) in its profile; it has none")
    return RooflinePerfModel(hw, mp, engine, eff, efficiency_source=source,
                             quantization=str(quant) if quant else None)


def decode_tok_s(pm: RooflinePerfModel, batch: int, context: int) -> float:
    """Aggregate decode tokens/s of `batch` sequences, each at `context` tokens of KV."""
    shape = StepShape(num_seqs=batch, num_tokens=batch, kv_tokens_read=batch * (context + 1))
    return batch / pm.step_time(shape)


def prefill_seconds(pm: RooflinePerfModel, prompt: int, cached: int = 0) -> float:
    """Time to first token of one prompt alone on the card: chunked prefill of its
    uncached part (chunks of max_num_batched_tokens) over the cached context.

    A hybrid (`pm.state_align_block`) resumes at the last block boundary ≤ `cached`
    (the request that cached the prefix ended there) and ends every chunk on a block
    boundary, as vLLM's `align` state cache does (`hybrid_prefill`)."""
    total = 0.0
    for done, chunk in prefill_chunks(prompt, cached, pm.max_num_batched_tokens,
                                      pm.state_align_block):
        shape = StepShape(num_seqs=1, num_tokens=chunk, kv_tokens_read=done + chunk,
                          prefill_tokens=chunk, attn_token_pairs=chunk * (done + chunk / 2),
                          prefill_context_tokens=done)
        total += pm.step_time(shape)
    return total
