"""Live state of one request inside the twin engine (dropped when it finishes)."""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from simulator.twin.core.block_pool import NO_BARE, Snapshot
from simulator.twin.core.types import RequestResult
from simulator.twin.spec_decode.ngram import NgramIndex


@dataclass(slots=True, eq=False)
class Seq:
    """One request's engine state; token counts are in tokens, `blocks` are block ids.

    `blocks`, `n_cached`, `bare_from`, `hashes`, `state_blocks`, `hit_state` and
    `junction` are its KV state, written only by the `KVCacheManager`; the rest is the
    scheduler's."""

    rid: str
    tokens: array[int]         # prompt + planned output; tokens[:num_tokens] are known
    prompt_len: int
    total: int                 # len(tokens)
    result: RequestResult
    num_tokens: int            # known tokens: prompt + emitted
    num_computed: int = 0      # tokens whose KV is computed
    blocks: array[int] = field(default_factory=lambda: array("q"))   # numpy reads it in place
    n_cached: int = 0          # leading blocks already registered in the prefix cache
    # the first of them left without a hash (a duplicate of a block another request
    # registered first), NO_BARE when none: fixed while it holds them (held blocks
    # are neither evicted nor registered again), so a router need not check them
    bare_from: int = NO_BARE
    hashes: list[int] = field(default_factory=list)   # chain over known full blocks
    prefix_key: str | None = None   # `EngineRequest.prefix_key`: where to seed `hashes`
    given_hashes: Sequence[int] | None = None   # `EngineRequest.prefix_hashes`
    state_blocks: list[int] = field(default_factory=list)   # hybrids: running states
    hit_state: list[int] = field(default_factory=list)      # hybrids: the hit's saved
    #                                                         state, held for one step
    # the blocks it (or the request it follows) last held, to validate at its next
    # prefix-cache lookup instead of walking the hash map (`BlockPool.snapshot`)
    hint: Snapshot | None = None
    junction: int = 0          # hybrids: shared-prefix junction (vLLM
    #                            `Request.shared_prefix_boundary`), 0: none
    admitted: bool = False
    # `EngineRequest.kv_transfer`: the pull of a remote prefill's KV, until admission
    kv_transfer: Callable[[float, int], float] | None = None
    index: NgramIndex | None = None
    d_start: int = 0           # this step's draft: tokens[d_start:d_start+d_count]
    d_count: int = 0
    # what its sampling makes vLLM's (rejection) sampler do per draft row
    # (`SamplingParams.penalties_active`, `.top_k_top_p_active`)
    penalties: bool = False
    top_k_top_p: bool = False
