"""The twin engine's configuration, typed: what the scheduler and the KV cache run with.

vLLM splits its engine settings by consumer (`SchedulerConfig`: sequence and token
budgets and `max_model_len`; `CacheConfig`: block size, number of GPU blocks, prefix
caching, the offloading connector; `SpeculativeConfig`); the twin does the same, built
once from the performance model and the model profile (`engine_config`) where an engine
is made, so nothing reads a setting off the performance model by attribute name with a
fallback. One did, for an attribute that never existed (`max_model_len`), so every
model served a 262,144-token window whatever its card said (issue 23).

A performance model that is only `PerfModel` (a test's stand-in) runs with vLLM's
defaults (`plain_config`): no host tier, no hybrid state cache, no speculation unless
asked for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from simulator.errors import InputError
from simulator.twin.core.kv_offload import HostLinkTimes
from simulator.twin.core.types import PerfModel
from simulator.twin.model.profiles import with_version_defaults
from simulator.twin.spec_decode.ngram import MAX_SPEC_TOKENS, Spec

if TYPE_CHECKING:
    from simulator.twin.model.perf_model import RooflinePerfModel

# The window served for a model profile that states no `context_length` (a user's own
# profile file); every shipped profile states its own, sourced.
DEFAULT_CONTEXT_LENGTH = 262_144
# vLLM's defaults, for a performance model that carries no engine settings
DEFAULT_MAX_NUM_SEQS = 256
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
DEFAULT_BLOCK_SIZE = 16
# query rows per head the attention kernel computes to verify q tokens, by q: one a token
# for a model that knows no kernel tiles
PLAIN_VERIFY_ROWS: tuple[float, ...] = tuple(range(MAX_SPEC_TOKENS + 2))


@dataclass(frozen=True)
class SchedulerConfig:
    """Per-step budgets and the longest sequence (prompt + output) admitted, tokens."""

    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int


@dataclass(frozen=True)
class KVOffloadConfig:
    """A host-memory KV tier (vLLM's `--kv-offloading-size`): its size and the link."""

    gib: float
    link: HostLinkTimes


@dataclass(frozen=True)
class CacheConfig:
    """The paged KV cache: tokens per block, blocks on the card, prefix caching; a
    hybrid's state blocks (vLLM's `align` mode, `hybrid_prefill`) and the states it
    keeps (`prefix_cache_retention_interval`); the host tier (None: off)."""

    block_size: int
    num_gpu_blocks: int
    enable_prefix_caching: bool
    kv_bytes_per_token: float = 0.0
    state_aligned: bool = False
    state_blocks_per_seq: int = 0
    retention_interval: int | None = 0
    offload: KVOffloadConfig | None = None


@dataclass(frozen=True)
class SpecConfig:
    """Speculative decoding (None: off) and the verification kernel's rows by q."""

    spec: Spec | None = None
    verify_rows: tuple[float, ...] = PLAIN_VERIFY_ROWS


@dataclass(frozen=True)
class TwinEngineConfig:
    scheduler: SchedulerConfig
    cache: CacheConfig
    speculative: SpecConfig = SpecConfig()


def engine_config(perf: RooflinePerfModel, *, context_window: int | None = None,
                  spec: Spec | None = None) -> TwinEngineConfig:
    """The engine configuration of `perf`; `context_window` (`--context-window`) serves
    a shorter window than the model's, never a longer one (vLLM refuses a
    `--max-model-len` above the model's `max_position_embeddings` too); `spec` drafts
    with another speculation setting than the model's (None: its own)."""
    native = perf.model.context_length or DEFAULT_CONTEXT_LENGTH
    if context_window is not None and not 0 < context_window <= native:
        raise InputError(f"twin: max_model_len {context_window} must be within "
                         f"(0, {native}] for model {perf.model.name} (its context length)")
    engine, link = perf.engine, perf.hardware.host_link
    offload = None
    if engine.kv_offload_gib > 0 and link is not None:
        # vLLM's --kv-offloading-size is the sum over a TP group's ranks; the twin's
        # blocks are one GPU's shard (each rank moves its own over its own link)
        offload = KVOffloadConfig(float(engine.kv_offload_gib) / perf.layout.tp, HostLinkTimes(
            link.h2d_bytes_s, link.d2h_bytes_s, link.latency_s))
    return TwinEngineConfig(
        SchedulerConfig(max_num_seqs=perf.max_num_seqs,
                        max_num_batched_tokens=perf.max_num_batched_tokens,
                        max_model_len=context_window or native),
        CacheConfig(block_size=perf.block_size, num_gpu_blocks=perf.num_blocks,
                    enable_prefix_caching=engine.enable_prefix_caching,
                    kv_bytes_per_token=float(perf.kv_bytes_per_token),
                    state_aligned=perf.state_align_block is not None,
                    state_blocks_per_seq=perf.state_blocks_per_seq,
                    retention_interval=_retention(perf),
                    offload=offload),
        SpecConfig(spec if spec is not None else perf.spec, perf.verify_rows))


def _retention(perf: RooflinePerfModel) -> int | None:
    """The hybrids' state retention; "auto" (settings made without `load_engine_settings`)
    is resolved for the settings' vLLM version, as loading them does."""
    kept = perf.engine.prefix_cache_retention_interval
    if kept == "auto":
        kept = with_version_defaults(perf.engine).prefix_cache_retention_interval
    return kept if isinstance(kept, int) else None


def plain_config(perf: PerfModel, *, block_size: int = DEFAULT_BLOCK_SIZE,
                 num_blocks: int | None = None, max_num_seqs: int = DEFAULT_MAX_NUM_SEQS,
                 max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS,
                 spec: Spec | None = None,
                 verify_rows: tuple[float, ...] = PLAIN_VERIFY_ROWS) -> TwinEngineConfig:
    """vLLM's defaults for a performance model that carries no engine settings; the KV
    pool holds what `perf.kv_capacity_tokens()` says unless `num_blocks` is given."""
    blocks = num_blocks if num_blocks is not None else perf.kv_capacity_tokens() // block_size
    return TwinEngineConfig(
        SchedulerConfig(max_num_seqs, max_num_batched_tokens, DEFAULT_CONTEXT_LENGTH),
        CacheConfig(block_size=block_size, num_gpu_blocks=blocks, enable_prefix_caching=True),
        SpecConfig(spec, verify_rows))
