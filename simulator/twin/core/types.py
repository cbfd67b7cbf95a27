"""Interfaces between the twin's parts: performance model, engine, and its drivers.

The engine is pure simulation with its own clock (`Engine.now`, seconds). Two drivers
run it: the in-process endpoint under virtual time (fast-forwards many steps at once
with `run_until`) and the HTTP server in real time (one `step()` at a time, streaming
what each step emitted).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from simulator.twin.core.sampling import SamplingParams


@dataclass(frozen=True, slots=True)
class StepShape:
    """What one forward pass processes, aggregated for the performance model.

    num_seqs:        sequences in the batch (decoding + prefilling)
    num_tokens:      tokens in the forward pass (decode: 1 or 1+k each; prefill: chunk)
    kv_tokens_read:  Σ over sequences of the context attended (tokens already in KV
                     plus the tokens of this step)
    prefill_tokens:  tokens of prefill chunks in this step
    attn_token_pairs: Σ over prefill chunks of chunk × (context + chunk/2): attention
                     FLOPs scale with it
    draft_tokens:    Σ draft tokens verified in this pass (speculation; part of num_tokens)
    spec_seqs:       decoding sequences the proposer ran for (drafted or not)
    proposer_context: Σ context tokens the n-gram proposer scanned (its CPU cost)
    prefill_context_tokens: Σ over prefill chunks of the context already in KV (MLA
                     re-expands it through kv_b_proj every chunk)
    verify_pairs:    Σ over decodes with drafts of the query rows the attention kernel
                     computes per head (its tiles, `PerfModel.verify_rows`) × (context +
                     q/2): the verification attention's work, in attention pairs
    verify_context:  Σ context of the decodes with drafts (the KV their verification reads)
    demoted_context: Σ context of the decodes an MLA backend with uniform query lengths
                     runs on its prefill path (a length other than the first decode's)
    uniform_decode:  every scheduled request is a decode of exactly 1 + k tokens
    penalty_draft_rows: Σ draft rows (1 + drafts) of the decodes with drafts, when a
                     request in the batch carries a penalty
                     (`SamplingParams.penalties_active`; batch-wide in vLLM)
    penalty_pad_tokens: those rows × the longest output among them: the history
                     tensor vLLM pads every row to (`make_tensor_with_pad`)
    topk_draft_rows: Σ draft rows of the decodes with drafts, when a request in the
                     batch has an active top-k/top-p cut
                     (`SamplingParams.top_k_top_p_active`; batch-wide in vLLM)
    """

    num_seqs: int
    num_tokens: int
    kv_tokens_read: int
    prefill_tokens: int = 0
    attn_token_pairs: float = 0.0
    draft_tokens: int = 0
    spec_seqs: int = 0
    proposer_context: int = 0
    prefill_context_tokens: int = 0
    verify_pairs: float = 0.0
    verify_context: int = 0
    demoted_context: int = 0
    uniform_decode: bool = False
    penalty_draft_rows: int = 0
    penalty_pad_tokens: int = 0
    topk_draft_rows: int = 0


class PerfModel(Protocol):
    def step_time(self, shape: StepShape) -> float:
        """Duration of one engine step in seconds."""
        ...

    def kv_capacity_tokens(self) -> int:
        """Tokens of KV cache the card holds for this model and engine settings."""
        ...


@dataclass(frozen=True, slots=True)
class EngineRequest:
    """A request as the engine sees it: token ids in, planned token ids out.

    `output_plan` is what the twin will emit (its length is the natural reply
    length, already capped at max_tokens); n-gram speculation is scored against it.
    """

    request_id: str
    prompt_tokens: Sequence[int]
    output_plan: Sequence[int]
    arrival: float
    # the conversation this request continues (the in-process twin: the session id),
    # if the client says: the KV manager seeds its hash chain from that one's last
    # request instead of searching (or rehashing) for it; never changes a result
    prefix_key: str | None = None
    # the chained hashes of the prompt's full blocks (`block_pool.extend_hash_chain`
    # at this engine's block size), when the sender has them already: a fleet's router
    # hashed the prompt to score the replicas. The engine takes them instead of
    # hashing the prompt again; never changes a result
    prefix_hashes: Sequence[int] | None = None
    # what the request samples with, resolved by the serving side (the model's
    # generation config where the request said nothing); None: vLLM's neutral values
    sampling: SamplingParams | None = None
    # disaggregated serving (`twin/pd`): the prompt was prefilled on another instance
    # and its KV past this engine's own prefix-cache hit is pulled from there (vLLM's
    # NixlConnector: `get_num_new_matched_tokens` returns prompt − local hit, loaded
    # asynchronously). Called once, at admission, with (now, tokens to pull); returns
    # when the pull is done. None: an ordinary request
    kv_transfer: Callable[[float, int], float] | None = None


@dataclass(slots=True)
class RequestResult:
    """What happened to one request inside the engine (engine-clock seconds)."""

    request_id: str
    prompt_len: int
    cached_tokens: int = 0            # prefix-cache hit at (first) admission, tokens
    first_scheduled: float | None = None
    token_times: list[float] = field(default_factory=list)   # one per emitted token
    finished: float | None = None
    num_preemptions: int = 0
    spec_drafts: int = 0
    spec_draft_tokens: int = 0
    spec_accepted_tokens: int = 0
    decode_steps: int = 0             # steps that emitted tokens for it (tokens/pass)
    host_cached_tokens: int = 0       # of cached_tokens, loaded from the host KV tier
    kv_load_s: float = 0.0            # waiting for host → HBM loads (engine seconds)
    remote_tokens: int = 0            # P/D: prompt tokens whose KV came from a prefill
    kv_transfer_wait_s: float = 0.0   # P/D: admission → their pull done (engine seconds)

    @property
    def first_token(self) -> float | None:
        return self.token_times[0] if self.token_times else None


@dataclass(frozen=True, slots=True)
class StepOutcome:
    start: float
    end: float
    emitted: tuple[tuple[str, int], ...]   # (request_id, tokens emitted this step)
    finished: tuple[str, ...]
    admitted: tuple[str, ...] = ()          # requests scheduled for the first time


@dataclass(slots=True)
class EngineCounters:
    """Cumulative counters with vLLM's meanings (see /metrics)."""

    prefix_cache_queries: int = 0   # prompt tokens looked up
    prefix_cache_hits: int = 0      # of which found cached
    prompt_tokens: int = 0
    generation_tokens: int = 0
    preemptions: int = 0
    requests_finished: int = 0
    spec_drafts: int = 0
    spec_draft_tokens: int = 0
    spec_accepted_tokens: int = 0
    spec_accepted_per_pos: list[int] = field(default_factory=list)   # index = position
    steps: int = 0                  # forward passes run
    decode_steps: int = 0           # of which emitted at least one token
    # host KV tier (vLLM's OffloadingConnector; zero with it off)
    external_prefix_cache_queries: int = 0   # tokens looked up in the tier
    external_prefix_cache_hits: int = 0      # of which loaded from it
    offload_load_bytes: int = 0
    offload_load_time_s: float = 0.0
    offload_store_bytes: int = 0
    offload_store_time_s: float = 0.0
    offload_stall_s: float = 0.0    # steps delayed by a store channel behind (fence)
    busy_s: float = 0.0             # engine seconds spent in forward passes (utilisation)


class Engine(Protocol):
    now: float
    counters: EngineCounters

    def submit(self, request: EngineRequest) -> None:
        """Queue a request; it arrives at max(request.arrival, now)."""
        ...

    def step(self) -> StepOutcome | None:
        """Run one step starting at `now` (None when idle); `now` moves to its end."""
        ...

    def run_until(self, t: float) -> list[str]:
        """Run steps while `now < t`; stop after the first step that finishes a request.
        Returns the ids finished. Idle engines jump `now` to `t`."""
        ...

    def result(self, request_id: str) -> RequestResult:
        ...

    def pop_result(self, request_id: str) -> RequestResult:
        ...

    def is_idle(self) -> bool:
        ...

    def num_running(self) -> int:
        ...

    def num_waiting(self) -> int:
        ...

    def kv_usage(self) -> float:
        """Fraction of KV blocks in use by running requests (0..1)."""
        ...

    @property
    def block_size(self) -> int:
        ...

    @property
    def num_blocks(self) -> int:
        ...
