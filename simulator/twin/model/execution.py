"""How vLLM 0.32 runs a speculative step on a card: attention backend, CUDA-graph mode,
verification tiles (pure: nothing here reads a file or a clock).

Which attention backend a card gets (`vllm/platforms/cuda.py` `_get_backend_priorities`,
the first that supports the KV dtype):

    MLA:      sm 10.x FlashInfer-MLA · sm 12.x Triton MLA · sm 9.x FlashAttention-MLA ·
              older Triton MLA (FlashAttention-MLA needs sm90, FlashMLA sm90/100)
    standard: sm 10.x FlashInfer · otherwise FlashAttention (FA3 on sm 9.x, FA2 else),
              or FlashInfer when FlashAttention cannot read the KV dtype (an fp8 KV cache
              needs FA3: `fa_utils.flash_attn_supports_kv_cache_dtype`)

What each offers under speculation (`_cudagraph_support`, `get_cudagraph_support`,
`query_len_support`):

    backend        CUDA graphs with drafts        verification query tile
    FA3            ALWAYS: full graphs            128 rows, GQA heads packed (hopper/
                                                  tile_size.h, heuristics.h should_pack_gqa)
    FA2            UNIFORM_BATCH: full graphs     64 rows per head (flash_fwd_launch_template.h
                   only if every decode has 1+k   run_mha_fwd_splitkv_dispatch: kBlockM 64;
                   tokens, else piecewise         no GQA packing for q > 1)
    FlashInfer     UNIFORM_SINGLE_TOKEN_DECODE    GQA heads packed, tile 16 / 64 / 128 by the
    (no trtllm)    on sm8x: piecewise             packed query length (FA2DetermineCtaTileQ)
    Triton MLA     UNIFORM_BATCH; UNIFORM query   heads packed (one latent per token)
                   lengths: a decode whose length
                   differs from the first is run
                   on the prefill path
    FlashAttn-MLA  UNIFORM_BATCH, VARLEN queries  heads packed

A step with more tokens than the capture ceiling (`VllmConfig._set_cudagraph_sizes`:
min(max_num_seqs · (1 + k) · 2, 512; 1024 on data-center Blackwell)) runs eager. A
linear-attention (Mamba/GDN/KDA) group is UNIFORM_BATCH (`mamba_attn.py`, `gdn_attn.py`):
the step's support is the minimum over the model's backends
(`CompilationConfig.resolve_cudagraph_mode_and_sizes`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

GraphSupport = Literal["always", "uniform_batch", "single_token", "never"]
Mode = Literal["full", "piecewise", "eager"]
_LEVEL: dict[GraphSupport, int] = {"never": 0, "single_token": 1, "uniform_batch": 2,
                                   "always": 3}


@dataclass(frozen=True, slots=True)
class Backend:
    """An attention backend as speculation sees it."""

    name: str
    graphs: GraphSupport
    tile_rows: tuple[int, ...]     # query tile sizes, smallest first (one: fixed)
    packs_gqa: bool                # GQA heads packed into the query tile
    uniform_queries: bool          # MLA: decodes must share one query length

    def tile(self, packed_rows: int) -> int:
        """The query tile for `packed_rows` rows (FlashInfer FA2DetermineCtaTileQ: 128
        above 64 rows, 64 above 16, else 16; a one-size backend: its size)."""
        if len(self.tile_rows) == 1:
            return self.tile_rows[0]
        small, mid, big = self.tile_rows
        return big if packed_rows > 64 else (mid if packed_rows > 16 else small)

    def verify_rows(self, q: int, group: int) -> float:
        """Query rows the kernel computes for one sequence verifying q tokens, per query
        head (so `rows × context × attention FLOPs per pair` is its work): its q tokens
        rounded up to whole tiles, over the GQA heads packed into a tile."""
        if self.packs_gqa:
            packed = q * group
            t = self.tile(packed)
            return math.ceil(packed / t) * t / group
        t = self.tile(q)
        return float(math.ceil(q / t) * t)


FA3 = Backend("flash_attn_3", "always", (128,), True, False)
FA2 = Backend("flash_attn_2", "uniform_batch", (64,), False, False)
FLASHINFER = Backend("flashinfer", "single_token", (16, 64, 128), True, False)
FLASHINFER_TRTLLM = Backend("flashinfer_trtllm", "uniform_batch", (16, 64, 128), True, False)
TRITON_MLA = Backend("triton_mla", "uniform_batch", (16, 64, 128), True, True)
FLASH_ATTN_MLA = Backend("flash_attn_mla", "uniform_batch", (128,), True, False)
FLASHINFER_MLA = Backend("flashinfer_mla", "always", (128,), True, False)


def attention_backend(compute_capability: tuple[int, int] | None, kv_dtype: str,
                      mla: bool) -> Backend | None:
    """The backend vLLM 0.32 picks on a CUDA card of this compute capability for this KV
    dtype (None: not a CUDA card; the twin then models no CUDA graphs)."""
    if compute_capability is None:
        return None
    major = compute_capability[0]
    if mla:
        if major == 10:
            return FLASHINFER_MLA
        if major == 9:
            return FLASH_ATTN_MLA
        return TRITON_MLA
    if major == 10:
        return FLASHINFER_TRTLLM
    if major == 9:
        return FA3
    return FLASHINFER if kv_dtype.startswith("fp8") else FA2


def graph_support(backend: Backend, hybrid: bool) -> GraphSupport:
    """The step's CUDA-graph support: the lowest of the attention backend's and, for a
    hybrid, its linear-attention backend's (UNIFORM_BATCH)."""
    if hybrid and _LEVEL[backend.graphs] > _LEVEL["uniform_batch"]:
        return "uniform_batch"
    return backend.graphs


def capture_ceiling(max_num_seqs: int, k: int, compute_capability: tuple[int, int]) -> int:
    """Most tokens a captured CUDA graph holds with k draft tokens per request."""
    default = 1024 if compute_capability[0] == 10 else 512
    return min(max_num_seqs * (1 + k) * 2, default)


def spec_mode(support: GraphSupport, num_tokens: int, ceiling: int, uniform: bool) -> Mode:
    """How a pure-decode step with drafts runs (`CudagraphDispatcher.dispatch`): eager past
    the ceiling or with no support, full where the backend takes any batch or the batch
    is uniform (every decode 1 + k tokens) on a UNIFORM_BATCH backend, else piecewise."""
    if num_tokens > ceiling or support == "never":
        return "eager"
    if support == "always" or (support == "uniform_batch" and uniform):
        return "full"
    return "piecewise"


def spec_off_mode(num_seqs: int, ceiling_off: int) -> Mode:
    """The same pure-decode step with speculation off: a full decode graph (every
    backend captures single-token decodes) up to the capture ceiling."""
    return "full" if num_seqs <= ceiling_off else "eager"
