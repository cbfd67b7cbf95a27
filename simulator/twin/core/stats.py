"""The in-process twin's engine counters at the end of a run, typed: `EngineStats`.

The summary reads them as `engine_stats` (`analysis.summary.engine_figures`) and keeps
them under `engine` in summary.json; `to_dict` is that dict, key for key and in the
order earlier runs wrote it, so old and new summaries read alike."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SpecStats:
    """Why speculation won or lost (vLLM's spec_decode counters, derived)."""

    draft_tokens: int
    accepted_tokens_per_pos: tuple[int, ...]
    mean_acceptance_length: float | None    # 1 + accepted per draft (bonus included)
    tokens_per_forward_pass: float | None   # over forward passes that emitted any
    drafts: int = 0

    @property
    def acceptance_per_pos(self) -> list[float]:
        return [n / self.drafts if self.drafts else 0.0 for n in self.accepted_tokens_per_pos]


@dataclass(frozen=True, slots=True)
class EngineStats:
    prefix_cache_queries: int       # prompt tokens looked up in the prefix cache
    prefix_cache_hits: int          # of which found cached
    preemptions: int
    kv_usage_peak: float            # share of KV blocks in use, at its highest
    num_gpu_blocks: int
    block_size: int                 # tokens per KV block
    spec_drafts: int = 0
    spec_accepted_tokens: int = 0
    spec: SpecStats | None = None   # None: speculative decoding off

    @property
    def kv_capacity_tokens(self) -> int:
        return self.num_gpu_blocks * self.block_size

    @classmethod
    def summed(cls, per: Sequence[EngineStats]) -> EngineStats:
        """Several engines' counters as one (a fleet's, a P/D pair's): sums, the KV peak
        of the hottest; per-position speculation counters stay per engine."""
        return cls(
            sum(p.prefix_cache_queries for p in per), sum(p.prefix_cache_hits for p in per),
            sum(p.preemptions for p in per), max(p.kv_usage_peak for p in per),
            sum(p.num_gpu_blocks for p in per), per[0].block_size,
            sum(p.spec_drafts for p in per), sum(p.spec_accepted_tokens for p in per))

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "prefix_cache_queries": self.prefix_cache_queries,
            "prefix_cache_hits": self.prefix_cache_hits, "preemptions": self.preemptions,
            "kv_usage_peak": self.kv_usage_peak, "num_gpu_blocks": self.num_gpu_blocks,
            "block_size": self.block_size, "kv_capacity_tokens": self.kv_capacity_tokens,
            "spec_drafts": self.spec_drafts, "spec_accepted_tokens": self.spec_accepted_tokens}
        if self.spec is not None:
            out |= {"spec_draft_tokens": self.spec.draft_tokens,
                    "spec_accepted_tokens_per_pos": list(self.spec.accepted_tokens_per_pos),
                    "spec_acceptance_per_pos": self.spec.acceptance_per_pos,
                    "spec_mean_acceptance_length": self.spec.mean_acceptance_length,
                    "tokens_per_forward_pass": self.spec.tokens_per_forward_pass}
        return out
