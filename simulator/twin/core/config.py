"""The twin engine's configuration, typed: what the scheduler and the KV cache run with.

vLLM splits its engine settings by consumer (`SchedulerConfig`: sequence and token
budgets and `max_model_len`; `CacheConfig`: block size, number of GPU blocks, prefix
caching); the twin does the same, built once from the performance model and the model
profile, so nothing reads a setting off the performance model by `getattr` with a
fallback. One did, for an attribute that never existed (`max_model_len`), so every
model served a 262,144-token window whatever its card said (issue 23)."""

from __future__ import annotations

from dataclasses import dataclass

from simulator.errors import InputError
from simulator.twin.model.perf_model import RooflinePerfModel

# The window served for a model profile that states no `context_length` (a user's own
# profile file); every shipped profile states its own, sourced.
DEFAULT_CONTEXT_LENGTH = 262_144


@dataclass(frozen=True)
class SchedulerConfig:
    """Per-step budgets and the longest sequence (prompt + output) admitted, tokens."""

    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int


@dataclass(frozen=True)
class CacheConfig:
    """The paged KV cache: tokens per block, blocks on the card, prefix caching."""

    block_size: int
    num_gpu_blocks: int
    enable_prefix_caching: bool


@dataclass(frozen=True)
class TwinEngineConfig:
    scheduler: SchedulerConfig
    cache: CacheConfig


def engine_config(perf: RooflinePerfModel, *,
                  context_window: int | None = None) -> TwinEngineConfig:
    """The engine configuration of `perf`; `context_window` (`--context-window`) serves
    a shorter window than the model's, never a longer one (vLLM refuses a
    `--max-model-len` above the model's `max_position_embeddings` too)."""
    native = perf.model.context_length or DEFAULT_CONTEXT_LENGTH
    if context_window is not None and not 0 < context_window <= native:
        raise InputError(f"twin: max_model_len {context_window} must be within "
                         f"(0, {native}] for model {perf.model.name} (its context length)")
    return TwinEngineConfig(
        SchedulerConfig(max_num_seqs=perf.max_num_seqs,
                        max_num_batched_tokens=perf.max_num_batched_tokens,
                        max_model_len=context_window or native),
        CacheConfig(block_size=perf.block_size, num_gpu_blocks=perf.num_blocks,
                    enable_prefix_caching=perf.engine.enable_prefix_caching))
