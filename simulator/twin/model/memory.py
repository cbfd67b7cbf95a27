"""The memory vLLM leaves out of the KV cache, term by term, as vLLM computes it (issue 56).

vLLM sizes its KV cache once, at start-up (`Worker.determine_available_memory`,
vllm/v1/worker/gpu_worker.py):

    available_kv = total × gpu_memory_utilization − (weights + torch_peak + non_torch)

* `total` is what CUDA reports (`cudaMemGetInfo`, `MemorySnapshot.total_memory`), a little
  under what nvidia-smi lists: the driver keeps the difference (`driver_reserved`).
* `weights` is `model_memory_usage`, what loading left allocated ("Model loading took
  X GiB"): the checkpoint as the backend re-lays it out (`weights_loaded`). The MXFP4 MoE
  backends pad the expert matrices (`mxfp4_round_up_hidden_size_and_intermediate_size`):
  Marlin (the Hopper and Ampere fallback, vllm#23278) rounds the hidden size up to 256 and
  the intermediate size to 128; FlashInfer TRT-LLM (Blackwell) rounds both to 256.
* `torch_peak` is the torch allocator's peak during `GPUModelRunner.profile_run`: one
  forward pass of `max_num_batched_tokens` tokens, then `_dummy_sampler_run` on
  min(max_num_seqs, max_num_batched_tokens) rows. The two run one after the other, so
  the peak is the larger (`forward_peak`, `sampler_peak`). The sampler's dominates on
  large vocabularies: a (rows × vocab) tensor passes through the top-k/top-p path at
  `SAMPLER_BYTES_PER_ENTRY` (PyTorch's full sort, or FlashInfer's kernel).
* `non_torch` is memory allocated outside torch while profiling (cuBLAS workspaces,
  communicator buffers): a card's measured figure.

CUDA graphs are captured after the KV cache is sized, and vLLM up to 0.20 did not
subtract them (PR 21489 logs their size only as a hint); from 0.21 an estimate is
subtracted when `VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS` is on (PR 30515, on by default
from 0.21; measured by capturing, not derivable from the model's shapes). The published
logs this model is checked against (0.10–0.14) predate it, and the twin does not model it.

Pure: profiles in, terms out.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.twin.model import vllm_versions
from simulator.twin.model.profiles import (
    EngineSettings,
    HardwareProfile,
    ModelProfile,
    VllmMemory,
)

GIB = float(2**30)

# Bytes per (row, vocabulary entry) at the peak of the sampler warm-up, random sampling
# with top-k and top-p set (`_dummy_sampler_run` sets temperature 0.5, top_p 0.99, top_k
# vocab − 1), by the top-k/top-p path (v1/sample/ops/topk_topp_sampler.py):
# * "pytorch" (`apply_top_k_top_p`): the model's bf16 logits (2, held by the caller), the
#   sampler's fp32 copy (4), and inside the full-vocabulary sort its int64 index input
#   (8), the sorted fp32 values and int64 indices (12) and the radix sort's double
#   buffers of both (12) = 38;
# * "flashinfer" (`flashinfer_sample` → `top_k_top_p_sampling_from_logits`, no sort): bf16
#   logits (2), fp32 copy (4), the top-k-masked logits (4) and their softmax (4) = 14.
# Derived from the tensors the code allocates, not measured on a GPU; the pytorch figure
# is checked against vLLM's logs of gpt-oss-120b on one H100 (vllm#23278, vllm#27508:
# docs/twin-fidelity.md).
SAMPLER_BYTES_PER_ENTRY = {"pytorch": 38.0, "flashinfer": 14.0}
# FlashInfer's sampler is vLLM's default again from PR 40376 (merged 2026-04-20; it had
# been turned off in 0.11.1 by PR 26859): the twin takes it from 0.21, the release of
# that window (not checked against the release notes). Before: the PyTorch path, an upper
# bound for the releases that default to a Triton top-k/top-p kernel.
FLASHINFER_SAMPLER_FROM = (0, 21)
SAMPLER_CODE = {"pytorch": "apply_top_k_top_p", "flashinfer": "flashinfer_sample"}
ACT_BYTES = 2.0          # bf16 activations in the profile's forward pass

# MXFP4 MoE backends and the padding of their expert matrices (hidden, intermediate)
# (model_executor/layers/quantization/mxfp4.py, mxfp4_round_up_hidden_size_and_
# intermediate_size): Marlin below Blackwell (no native FP4: "Weight-only FP4
# compression will be used leveraging the Marlin kernel", vllm#23278), FlashInfer
# TRT-LLM on Blackwell
MXFP4_PADDING = {"marlin": (256, 128), "flashinfer-trtllm": (256, 256)}


@dataclass(frozen=True, slots=True)
class MemoryTerm:
    """One part of the memory vLLM keeps out of the KV cache, per GPU."""

    name: str
    bytes: float
    source: str


@dataclass(frozen=True, slots=True)
class NonKvMemory:
    """What vLLM subtracts from total × utilisation before the KV cache, per GPU."""

    budget_bytes: float              # utilisation × the card's memory (nvidia-smi)
    terms: tuple[MemoryTerm, ...]

    @property
    def total(self) -> float:
        return sum(t.bytes for t in self.terms)

    @property
    def available(self) -> float:
        """vLLM's "Available KV cache memory" (may be negative: nothing fits)."""
        return self.budget_bytes - self.total

    def term(self, name: str) -> float:
        return next(t.bytes for t in self.terms if t.name == name)


def _round_up(x: int, multiple: int) -> int:
    return -(-x // multiple) * multiple


def vocab_size(model: ModelProfile) -> int:
    """Vocabulary entries: the LM head's (or the tied embedding's) rows."""
    rows = model.params.lm_head or model.params.embedding
    return round(rows / model.hidden_size)


def mxfp4_backend(hw: HardwareProfile) -> str:
    """The MXFP4 MoE backend vLLM picks on this card (by compute capability)."""
    cc = hw.compute_capability or (0, 0)
    return "flashinfer-trtllm" if cc >= (10, 0) else "marlin"


def expert_layout_factor(model: ModelProfile, quantization: str,
                         hw: HardwareProfile) -> tuple[float, str]:
    """Loaded ÷ checkpoint bytes of the expert matrices, and why (1: no re-layout)."""
    if quantization != "mxfp4" or model.experts is None:
        return 1.0, "checkpoint layout"
    backend = mxfp4_backend(hw)
    h_mult, i_mult = MXFP4_PADDING[backend]
    h, i = model.hidden_size, model.experts.ffn_dim
    hp, ip = _round_up(h, h_mult), _round_up(i, i_mult)
    return (hp * ip) / (h * i), (f"MXFP4 {backend}: expert matrices padded to hidden {hp}, "
                                 f"intermediate {ip} (from {h}, {i})")


def dense_intermediate(model: ModelProfile) -> float:
    """A dense MLP's intermediate size, from the per-layer parameters less attention."""
    layers = max(1, model.layers.full_attention + model.layers.sliding_attention
                 + model.layers.linear_attention)
    h, hd = model.hidden_size, model.head_dim
    attn = h * (model.num_q_heads + 2 * model.num_kv_heads) * hd + model.num_q_heads * hd * h
    return max(0.0, (model.params.dense_other / layers - attn) / (3 * h))


def forward_peak_bytes(model: ModelProfile, tokens: int, tp: int = 1) -> float:
    """Activation peak of the profile's forward pass over `tokens` tokens: the residual
    stream and its normed copy, plus the widest transient, attention's projections or
    the MLP's (the fused-MoE kernel's three intermediate caches per routed expert copy:
    gate-up 2I, activation I, down H), per GPU of a TP group."""
    h, hd = model.hidden_size, model.head_dim
    attn = ((model.num_q_heads + 2 * model.num_kv_heads) * hd + model.num_q_heads * hd) / tp
    if model.experts is not None:
        inter = model.experts.ffn_dim / tp
        mlp = model.experts.active * (3 * inter + h)
    else:
        mlp = 3 * dense_intermediate(model) / tp
    return tokens * ACT_BYTES * (2 * h + max(attn, mlp))


def sampler_rows(engine: EngineSettings) -> int:
    """Rows of the sampler warm-up: min(max_num_seqs, max_num_batched_tokens)."""
    return min(engine.max_num_seqs, engine.max_num_batched_tokens)


def sampler_path(vllm_version: str) -> str:
    """The top-k/top-p path vLLM `vllm_version` runs by default on a CUDA card."""
    v = vllm_versions.parse_version(vllm_version)
    return "flashinfer" if v >= FLASHINFER_SAMPLER_FROM else "pytorch"


def sampler_peak_bytes(model: ModelProfile, rows: int, path: str) -> float:
    """Peak of `_dummy_sampler_run` on `rows` rows (full vocabulary on every GPU)."""
    return rows * vocab_size(model) * SAMPLER_BYTES_PER_ENTRY[path]


def non_kv_memory(hw: HardwareProfile, mem: VllmMemory, model: ModelProfile,
                  engine: EngineSettings, quantization: str, *, weights_per_gpu: float,
                  experts_per_gpu: float, residual_bytes: float,
                  residual_source: str) -> NonKvMemory:
    """The terms vLLM keeps out of the KV cache on one GPU of this card (module doc)."""
    tp, util = engine.tensor_parallel_size, engine.gpu_memory_utilization
    factor, layout = expert_layout_factor(model, quantization, hw)
    loaded = weights_per_gpu + experts_per_gpu * (factor - 1.0)
    fwd = forward_peak_bytes(model, engine.max_num_batched_tokens, tp)
    rows, path = sampler_rows(engine), sampler_path(engine.vllm_version)
    samp = sampler_peak_bytes(model, rows, path)
    peak_src = ("sampler warm-up" if samp >= fwd else "forward pass")
    terms = (
        MemoryTerm("driver_reserved", util * (hw.memory_bytes - mem.cuda_total_bytes),
                   f"utilisation × (nvidia-smi total − CUDA's total, "
                   f"{mem.cuda_total_bytes / GIB:.2f} GiB): {mem.cuda_total_source}"),
        MemoryTerm("weights_loaded", loaded,
                   f"'Model loading took': checkpoint per GPU, {layout} "
                   "(mxfp4.py; gpu_model_runner.load_model)"),
        MemoryTerm("torch_peak", max(fwd, samp),
                   f"profile_run peak, the {peak_src}'s: forward pass of "
                   f"{engine.max_num_batched_tokens:,} tokens {fwd / GIB:.2f} GiB; sampler "
                   f"warm-up ({path} top-k/top-p, vLLM {engine.vllm_version}) {rows:,} rows × "
                   f"{vocab_size(model):,} vocab × {SAMPLER_BYTES_PER_ENTRY[path]:g} B "
                   f"{samp / GIB:.2f} GiB "
                   "(gpu_model_runner.profile_run, _dummy_sampler_run; "
                   f"sample/ops/topk_topp_sampler.{SAMPLER_CODE[path]})"),
        MemoryTerm("non_torch", mem.non_torch_bytes,
                   f"memory_profiling's non_torch_increase: {mem.non_torch_source}"),
        MemoryTerm("cuda_graphs", 0.0,
                   "not subtracted: captured after the KV cache is sized (vLLM ≤ 0.20; "
                   "the estimate of PR 30515 is on by default from 0.21, not modelled)"),
        MemoryTerm("reserve_residual", residual_bytes, residual_source),
    )
    return NonKvMemory(util * hw.memory_bytes, terms)
