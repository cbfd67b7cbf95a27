"""The twin's engine: vLLM V1 continuous batching over a paged, prefix-cached KV pool.

Each step is one forward pass. Scheduling follows vLLM V1: a token budget
(`max_num_batched_tokens`) and a cap on running sequences (`max_num_seqs`); running
requests first (a decode is 1 token, or 1 + k with n-gram speculation; an unfinished
prefill continues with a chunk), then waiting requests in FCFS order with chunked
prefill, skipped entirely in a step that had to preempt. Blocks are allocated for the
tokens scheduled in the step (as vLLM's `allocate_slots`); when a running request needs
a block and none is free, the most recently admitted running request is preempted
(recompute: its blocks are freed tail first, hashes kept, and it goes to the front of
the waiting queue with its generated tokens now part of its prompt). A prefix-cache
lookup runs at every admission. The step that computes a sequence's last known token
samples a new one, so the first token comes from the step that ends the prefill.
Step durations come from the performance model; the clock is `now` (seconds). The
engine is the scheduler; blocks, prefix-cache lookups and their counters belong to the
`KVCacheManager` it holds (`block_manager`). With a host KV tier (`kv_offload_gib` > 0,
vLLM's `--kv-offloading-size`; see `kv_offload`) newly full blocks are stored to host
memory as they fill, and an admission whose prefix continues in the tier loads it
instead of recomputing it: the request holds its blocks and waits off the batch while
the copy runs, then is scheduled with those tokens computed. Tier off runs none of it.
"""

from __future__ import annotations

import heapq
from array import array
from collections import deque
from dataclasses import replace

from simulator.twin.core.config import (
    CacheConfig,
    TwinEngineConfig,
    engine_config,
    plain_config,
)
from simulator.twin.core.decode_burst import DecodeTerms, burst_len, decode_terms, run_burst
from simulator.twin.core.hybrid_prefill import aligned_split
from simulator.twin.core.kv_cache_manager import KVCacheManager
from simulator.twin.core.kv_offload import HostLinkTimes, HostTier, tier_blocks
from simulator.twin.core.request import Seq
from simulator.twin.core.types import (
    EngineCounters,
    EngineRequest,
    PerfModel,
    RequestResult,
    StepOutcome,
    StepShape,
)
from simulator.twin.model.perf_model import RooflinePerfModel
from simulator.twin.spec_decode.ngram import (
    ModelDraftSpec,
    NgramIndex,
    NgramSpec,
    Spec,
    accepted_length,
    drafting_slots,
)

SPARE_INDEXES = 8         # n-gram indexes of finished requests kept for adoption


class RequestTooLong(ValueError):
    """A request whose prompt + planned output can never fit the KV pool."""


class TwinEngine:
    """Simulated vLLM V1 engine implementing `simulator.twin.core.types.Engine`.

    `config` is the engine's settings, built once where the engine is made
    (`engine_config` for the roofline model); None: the roofline model's own, or vLLM's
    defaults (`plain_config`) for any other performance model."""

    def __init__(self, perf_model: PerfModel, config: TwinEngineConfig | None = None) -> None:
        if config is None:
            config = (engine_config(perf_model) if isinstance(perf_model, RooflinePerfModel)
                      else plain_config(perf_model))
        self.config = config
        sched, cache, spec = config.scheduler, config.cache, config.speculative.spec
        bs = cache.block_size
        self.max_num_seqs = sched.max_num_seqs
        self.max_num_batched_tokens = sched.max_num_batched_tokens
        self.spec: Spec | None = spec
        # this step's proposer work (see `_draft`): sequences it ran for, context scanned
        self._spec_seqs = self._spec_ctx = 0
        # the batch gate (`parse_spec`'s @N): drafting only while the running batch holds
        # at most this many requests; None: always
        self._spec_gate: int | None = spec.max_batch_size if spec is not None else None
        self._link, tier = self._host_tier(cache)
        # a hybrid with prefix caching: vLLM's `align` state cache (`hybrid_prefill`)
        self._align = cache.state_aligned
        self.kv_cache_manager = KVCacheManager(
            cache.num_gpu_blocks, bs, enable_caching=cache.enable_prefix_caching, tier=tier,
            state_aligned=self._align, state_blocks=cache.state_blocks_per_seq,
            spec_state_blocks=spec.num_speculative_tokens if spec else 0,
            retention=cache.retention_interval)
        self._block_bytes = bs * cache.kv_bytes_per_token
        self._loading: list[tuple[float, int, Seq]] = []   # heap: (load done, n, seq)
        self._store_free_at = self._load_free_at = 0.0     # host link busy until
        self._store_fence = 0.0     # stores issued before the last boundary done by then
        self._slots = drafting_slots(self.spec)   # budget per request beyond its tokens
        # query rows per head the attention kernel computes to verify q tokens, by q
        self._verify_rows: tuple[float, ...] = config.speculative.verify_rows
        self.perf_model = perf_model
        self._step_time = perf_model.step_time
        self.now = 0.0
        self.counters = EngineCounters()
        self._pending: list[tuple[float, int, Seq]] = []     # heap of future arrivals
        self._seqno = 0
        self._waiting: deque[Seq] = deque()
        self._running: list[Seq] = []
        self._results: dict[str, RequestResult] = {}
        # the last admission pass stopped for want of blocks or seats, and nothing has
        # freed any since: pure decode steps can then be batched (see `_burst`)
        self._admit_blocked = False
        self._spare_indexes: deque[NgramIndex] = deque(maxlen=SPARE_INDEXES)
        self._terms: dict[int, DecodeTerms | None] = {}   # batch size → inline step terms
        # what the last burst leaves for the next while the batch stays as it is (only
        # a step through the scheduler changes it): the steps `burst_len` would give,
        # and the batch's `room` with the decode steps run since it was taken
        self._burst_left: int | None = None
        self._room: list[int] = []
        self._room_since = 0
        self._peak_used = 0                                # most blocks in use after a step

    @staticmethod
    def _host_tier(cache: CacheConfig) -> tuple[HostLinkTimes | None, HostTier | None]:
        """The host tier and its link (None, None: off)."""
        if cache.offload is None or cache.offload.gib <= 0:
            return None, None
        block_bytes = cache.block_size * cache.kv_bytes_per_token
        return cache.offload.link, HostTier(max(1, tier_blocks(cache.offload.gib, block_bytes)))

    @property
    def host_tier(self) -> HostTier | None:
        return self.kv_cache_manager.tier

    # -- Engine protocol: introspection ------------------------------------------------
    @property
    def block_size(self) -> int:
        return self.kv_cache_manager.block_size

    @property
    def num_blocks(self) -> int:
        return self.kv_cache_manager.num_blocks

    def kv_usage(self) -> float:
        return self.kv_cache_manager.usage()

    @property
    def kv_usage_peak(self) -> float:
        """Highest KV usage (blocks in use / total, 0..1) seen at the end of any step's
        scheduling, i.e. with that step's blocks allocated."""
        return self._peak_used / self.kv_cache_manager.num_blocks

    def num_running(self) -> int:
        return len(self._running)

    def num_waiting(self) -> int:
        return len(self._waiting) + len(self._pending) + len(self._loading)

    def is_idle(self) -> bool:
        return not (self._running or self._waiting or self._pending or self._loading)

    def result(self, request_id: str) -> RequestResult:
        return self._results[request_id]

    def pop_result(self, request_id: str) -> RequestResult:
        return self._results.pop(request_id)

    # -- Engine protocol: driving ------------------------------------------------------
    def submit(self, request: EngineRequest) -> None:
        """Queue a request; it arrives at max(request.arrival, now)."""
        rid = request.request_id
        if rid in self._results:
            raise ValueError(f"request id {rid!r} already submitted")
        # uint32, as the prompt tokenizer makes them: 4 bytes a token (a list costs ~36,
        # pointer + int object), copied with one memcpy, hashed block by block as bytes
        prompt = request.prompt_tokens
        prompt_len = len(prompt)
        if prompt_len == 0:
            raise ValueError(f"request {rid!r} has an empty prompt")
        # one allocation of the final size (extending a ~100 kB array reallocates and
        # copies it again: that cost ~90 µs a request)
        if isinstance(prompt, array) and prompt.typecode == "I":
            tokens = prompt + array("I", request.output_plan)
        else:
            tokens = array("I", prompt)
            tokens.extend(request.output_plan)
        capacity = self.kv_cache_manager.capacity_tokens
        if len(tokens) > capacity:
            raise RequestTooLong(f"request {rid!r}: {len(tokens)} tokens exceed the KV "
                                 f"cache of {capacity} tokens")
        res = RequestResult(request_id=rid, prompt_len=prompt_len)
        self._results[rid] = res
        seq = Seq(rid, tokens, prompt_len, len(tokens), res, prompt_len)
        seq.prefix_key = request.prefix_key
        seq.given_hashes = request.prefix_hashes
        seq.kv_transfer = request.kv_transfer
        if request.sampling is not None:
            seq.penalties = request.sampling.penalties_active
            seq.top_k_top_p = request.sampling.top_k_top_p_active
        arrival = max(request.arrival, self.now)
        if arrival <= self.now:
            self._waiting.append(seq)
        else:
            self._seqno += 1
            heapq.heappush(self._pending, (arrival, self._seqno, seq))

    def step(self) -> StepOutcome | None:
        """Run one step from `now` (None when nothing has arrived to run)."""
        self._take_arrivals()
        if not (self._running or self._waiting):
            if not self._loading:
                return None
            self.now = max(self.now, self._loading[0][0])    # only loads in flight
            self._take_arrivals()
        start = self.now
        emitted: list[tuple[str, int]] = []
        admitted: list[str] = []
        finished = self._run_step(emitted, admitted)
        return StepOutcome(start, self.now, tuple(emitted), tuple(finished), tuple(admitted))

    def run_until(self, t: float) -> list[str]:
        """Run steps while now < t; return the ids finished by the first step that
        finishes any. An idle engine jumps to the next arrival, or to t."""
        while self.now < t:
            if (self._pending and self._pending[0][0] <= self.now) or (
                    self._loading and self._loading[0][0] <= self.now):
                self._take_arrivals()
            if not (self._running or self._waiting):
                nxt = self._next_event()
                if nxt is not None and nxt < t:
                    self.now = nxt
                    continue
                self.now = t
                break
            if self.spec is None and (self._admit_blocked or not self._waiting):
                k = self._burst_left
                if k is None:
                    k = burst_len(self._running, self.max_num_batched_tokens)
                    if k > 0:
                        self._room = self.kv_cache_manager.room(self._running)
                        self._room_since = 0
                if k > 0 and self._burst(k, t):
                    continue
            finished = self._run_step(None, None)
            if finished:
                return finished
        return []

    def _burst(self, k: int, t: float) -> int:
        """Up to k pure decode steps (see `decode_burst`), stopping at t or the next
        arrival; full blocks are registered at the end. Returns the steps run."""
        running, kv = self._running, self.kv_cache_manager
        r = len(running)
        if r in self._terms:
            terms = self._terms[r]
        else:
            terms = self._terms[r] = decode_terms(self.perf_model, r)
        stop = min(t, self._pending[0][0]) if self._pending else t
        if self._loading and self._loading[0][0] < stop:
            stop = self._loading[0][0]
        before = self.now
        done, self.now = run_burst(running, kv, k, self.now, stop, self._step_time, terms,
                                   self._room, self._room_since)
        self.counters.busy_s += self.now - before
        self._burst_left = k - done
        self._room_since += done
        bs = kv.block_size
        for s in running:
            c = s.num_computed + done
            s.num_computed = c
            s.num_tokens += done
            s.result.decode_steps += done
            if c // bs > s.n_cached:            # a block filled: computed tokens only,
                kv.cache_blocks(s, c)           # as vLLM caches
        self.counters.generation_tokens += r * done
        self.counters.steps += done
        self.counters.decode_steps += done
        used = kv.num_used
        if used > self._peak_used:
            self._peak_used = used
        if kv.stored_blocks:
            self._issue_stores(self.now)
        return done

    # -- internals ---------------------------------------------------------------------
    def _take_arrivals(self) -> None:
        pending, now = self._pending, self.now
        while pending and pending[0][0] <= now:
            self._waiting.append(heapq.heappop(pending)[2])
        if self._loading:
            self._take_loaded()

    def _next_event(self) -> float | None:
        """The next arrival or load completion (None: nothing ahead)."""
        nxt = self._pending[0][0] if self._pending else None
        if self._loading and (nxt is None or self._loading[0][0] < nxt):
            nxt = self._loading[0][0]
        return nxt

    # -- the host tier (only ever reached with one configured) -----------------------
    def _take_loaded(self) -> None:
        """Requests whose host → HBM load is done rejoin the waiting queue's front, in
        the order they were admitted (vLLM: WAITING_FOR_REMOTE_KVS → WAITING)."""
        loading, now = self._loading, self.now
        done: list[Seq] = []
        while loading and loading[0][0] <= now:
            done.append(heapq.heappop(loading)[2])
        for s in reversed(done):
            self._waiting.appendleft(s)
        if done:
            self._admit_blocked = False

    def _issue_stores(self, at: float) -> None:
        """Queue the blocks registered since the last call on the device → host channel
        (one transfer job), starting at `at` or when the channel frees up."""
        kv, link, ctr = self.kv_cache_manager, self._link, self.counters
        assert link is not None
        nbytes = kv.stored_blocks * self._block_bytes
        kv.stored_blocks = 0
        dur = link.store_s(nbytes)
        # the stores issued a boundary earlier have had a whole step to finish: the
        # next step waits for them (vLLM flushes them before it reuses their blocks)
        self._store_fence = self._store_free_at
        self._store_free_at = max(self._store_free_at, at) + dur
        ctr.offload_store_bytes += int(nbytes)
        ctr.offload_store_time_s += dur

    def _start_load(self, s: Seq, host_blocks: int) -> None:
        """Copy `host_blocks` blocks host → HBM for `s` (admitted, holding its blocks);
        it waits off the batch until the copy is done."""
        link, ctr = self._link, self.counters
        assert link is not None
        nbytes = host_blocks * self._block_bytes
        dur = link.load_s(nbytes)
        done = max(self._load_free_at, self.now) + dur
        self._load_free_at = done
        ctr.offload_load_bytes += int(nbytes)
        ctr.offload_load_time_s += dur
        s.result.kv_load_s += done - self.now
        self._seqno += 1
        heapq.heappush(self._loading, (done, self._seqno, s))

    def _run_step(self, emitted: list[tuple[str, int]] | None,
                  admitted: list[str] | None) -> list[str]:
        """Schedule, time and apply one step; returns the ids it finished."""
        self._burst_left = None            # the batch may change: bursts start afresh
        sched, nums = self._schedule(admitted)
        if not sched and self._loading:      # all it admitted went to host loads
            self.now = max(self.now, self._loading[0][0])
            self._take_arrivals()
            return []
        if not sched:
            raise RuntimeError("engine invariant: nothing schedulable although work queued")
        used = self.kv_cache_manager.num_used
        if used > self._peak_used:
            self._peak_used = used
        kv = pre = drafts = ctx = 0
        pairs = 0.0
        for s, n in zip(sched, nums, strict=True):
            c = s.num_computed
            kv += c + n
            drafts += s.d_count
            if s.num_tokens - c > 1:
                pre += n
                pairs += n * (c + n / 2)
                ctx += c
        if self.spec is None:
            shape = StepShape(len(sched), sum(nums), kv, pre, pairs, drafts, 0, 0, ctx)
        else:
            shape = self._spec_shape(sched, nums, StepShape(
                len(sched), sum(nums), kv, pre, pairs, drafts, self._spec_seqs,
                self._spec_ctx, ctx))
            self._spec_seqs = self._spec_ctx = 0
        self.counters.steps += 1
        if self._link is None:
            dur = self._step_time(shape)
            self.counters.busy_s += dur
            end = self.now + dur
            self.now = end
            return self._apply(sched, nums, end, emitted)
        # host tier: a step waits for a store channel more than a step behind (vLLM
        # flushes a store before its GPU blocks are reused); its own stores follow it
        stall = self._store_fence - self.now
        if stall > 0:
            self.counters.offload_stall_s += stall
            self.now = self._store_fence
        dur = self._step_time(shape)
        self.counters.busy_s += dur
        end = self.now + dur
        self.now = end
        if self.kv_cache_manager.stored_blocks:
            self._issue_stores(end)
        return self._apply(sched, nums, end, emitted)

    def _spec_shape(self, sched: list[Seq], nums: list[int], base: StepShape) -> StepShape:
        """`base` with what a speculative step's verification costs depend on: the
        verification tiles and context of the decodes with drafts, the context of the
        decodes an MLA backend with uniform query lengths demotes to its prefill path
        (`split_decodes_and_prefills(require_uniform=True)`: the decodes after the first
        whose length differs from the first's), whether every request is a decode of
        1 + k tokens (a uniform batch, `GPUModelRunner._is_uniform_decode`), and the
        sampler's work on the draft rows. That work is batch-wide in vLLM 0.32: one
        request with a penalty makes the rejection sampler build an output history for
        every draft row of every drafting request, padded to the longest
        (`RejectionSampler.apply_logits_processors`, `ops/penalties._convert_to_tensors`);
        one with top-k/top-p sorts every draft row (`apply_sampling_constraints`)."""
        assert self.spec is not None
        rows = self._verify_rows
        full = 1 + self.spec.num_speculative_tokens
        vpairs = 0.0
        vctx = demoted = 0
        first = 0
        uniform, demoting = True, False
        pen = topk = False
        draft_rows = longest = 0
        for s, n in zip(sched, nums, strict=True):
            pen = pen or s.penalties
            topk = topk or s.top_k_top_p
            c = s.num_computed
            if s.num_tokens - c > 1:          # a prefill chunk
                uniform = False
                continue
            if s.d_count:
                vpairs += rows[n] * (c + n / 2)
                vctx += c
                draft_rows += n
                out = s.num_tokens - s.prompt_len
                if out > longest:
                    longest = out
            if not first:
                first = n
            elif demoting or n != first:
                demoting = True
                demoted += c
            if n != full:
                uniform = False
        pen_rows = draft_rows if pen else 0
        return replace(base, verify_pairs=vpairs, verify_context=vctx,
                       demoted_context=demoted, uniform_decode=uniform,
                       penalty_draft_rows=pen_rows, penalty_pad_tokens=pen_rows * longest,
                       topk_draft_rows=draft_rows if topk else 0)

    def _apply(self, sched: list[Seq], nums: list[int], end: float,
               emitted: list[tuple[str, int]] | None) -> list[str]:
        """Advance every scheduled sequence by its step's work; emit and finish."""
        finished: list[str] = []
        ctr = self.counters
        emitted_any = False
        for s, n in zip(sched, nums, strict=True):
            known = s.num_tokens
            c = s.num_computed + n
            if c < known:                      # a prefill chunk that is not the last
                s.num_computed = c
                continue
            acc = 0
            if s.d_count:
                limit = s.total - known - 1
                if isinstance(self.spec, ModelDraftSpec):
                    acc = min(self.spec.accepted(s.rid, known, s.d_count), max(limit, 0))
                else:
                    acc = accepted_length(s.tokens, s.d_start, s.d_count, known, limit)
                self._count_spec(s, acc)
            e = s.total - known                # no `min`: this runs per sequence and step
            if e > acc + 1:
                e = acc + 1
            s.num_computed = known + acc
            s.num_tokens = known + e
            res = s.result
            if not res.token_times and e:
                ctr.prompt_tokens += s.prompt_len
            if e == 1:
                res.token_times.append(end)
            elif e:
                res.token_times.extend([end] * e)
            ctr.generation_tokens += e
            if e:
                res.decode_steps += 1
                emitted_any = True
            if emitted is not None and e:
                emitted.append((s.rid, e))
            if s.num_tokens >= s.total:
                self._finish(s, end)
                finished.append(s.rid)
        if emitted_any:
            ctr.decode_steps += 1
        return finished

    def _count_spec(self, s: Seq, acc: int) -> None:
        ctr, res = self.counters, s.result
        ctr.spec_drafts += 1
        ctr.spec_draft_tokens += s.d_count
        ctr.spec_accepted_tokens += acc
        res.spec_drafts += 1
        res.spec_draft_tokens += s.d_count
        res.spec_accepted_tokens += acc
        per_pos = ctr.spec_accepted_per_pos
        if len(per_pos) < s.d_count:
            per_pos.extend([0] * (s.d_count - len(per_pos)))
        for i in range(acc):
            per_pos[i] += 1
        s.d_count = 0

    def _finish(self, s: Seq, end: float) -> None:
        self.kv_cache_manager.free(s)
        if s.index is not None:
            self._spare_indexes.appendleft(s.index)
            s.index = None
        s.result.finished = end
        self._admit_blocked = False
        self._running.remove(s)
        self.counters.requests_finished += 1

    def _schedule(self, admitted: list[str] | None) -> tuple[list[Seq], list[int]]:
        """vLLM V1 `schedule()`: running first, then waiting (unless we preempted)."""
        budget = self.max_num_batched_tokens
        sched: list[Seq] = []
        nums: list[int] = []
        running, kv = self._running, self.kv_cache_manager
        preempted = False
        slots = self._slots
        i = 0
        # vLLM 0.32 schedule(): a request's drafts are part of its tokens, so they come
        # out of the budget (truncated when it is short; the requests after it wait a
        # step); a drafter's extra slots are charged on top (`drafting_slots`)
        spec, bs = self.spec, kv.block_size
        gate = self._spec_gate
        drafting = spec is not None and (gate is None or len(running) <= gate)
        # a plain decode that neither needs a block nor fills one (15 steps in 16) is
        # only counted: `allocate_slots` would do nothing for it
        plain = spec is None and not self._align
        while i < len(running) and budget > slots:
            s = running[i]
            c = s.num_computed
            n = s.num_tokens - c
            if (n == 1 and plain and c < len(s.blocks) * bs and (c + 1) // bs <= s.n_cached
                    and not s.hit_state):
                sched.append(s)
                nums.append(1)
                budget -= 1 + slots
                i += 1
                continue
            room = budget - slots
            look = 0
            if n == 1 and drafting:
                n += self._draft(s, room - 1)
                if isinstance(spec, ModelDraftSpec):
                    look = spec.num_speculative_tokens   # lookahead KV slots
            else:
                if n > room:
                    n = room
                if self._align:
                    n = aligned_split(s.num_computed, n, s.num_tokens, s.prompt_len,
                                      kv.block_size, s.junction)
                    if n == 0:           # no room for a whole block: it waits a step
                        i += 1
                        continue
            if not kv.allocate_slots(s, n, None, look):
                preempted = True
                if not self._preempt_for(s, n, look):
                    s.d_count = 0
                    break                       # s itself was preempted
            sched.append(s)
            nums.append(n)
            budget -= n + slots
            i += 1
        self._admit_blocked = False
        if not preempted:
            budget = self._admit(budget, sched, nums, admitted)
        return sched, nums

    def _preempt_for(self, s: Seq, n: int, look: int) -> bool:
        """Preempt the most recently admitted running requests until `s` gets slots for
        n new tokens (+ look). Returns False when `s` itself had to go."""
        running, kv = self._running, self.kv_cache_manager
        while True:
            victim = running.pop()
            self._preempt(victim)
            if victim is s:
                return False
            if kv.allocate_slots(s, n, None, look):
                return True

    def _preempt(self, v: Seq) -> None:
        """Recompute preemption: free its blocks (hashes kept), back to the waiting
        queue's front with nothing computed."""
        self.kv_cache_manager.free(v)
        v.num_computed = 0
        v.d_count = 0
        v.result.num_preemptions += 1
        self.counters.preemptions += 1
        self._waiting.appendleft(v)

    def _admit(self, budget: int, sched: list[Seq], nums: list[int],
               admitted: list[str] | None) -> int:
        """Admit waiting requests FCFS while budget, seats and blocks allow."""
        kv = self.kv_cache_manager
        bs = kv.block_size
        waiting, running = self._waiting, self._running
        n_sched = len(sched)
        slots = self._slots
        tier = kv.tier is not None
        while waiting and budget > slots and len(running) < self.max_num_seqs:
            s = waiting[0]
            if s.blocks:                         # back from a host load or a KV pull
                if not self._resume_loaded(s, budget, sched, nums):
                    break
                budget -= nums[-1]
                continue
            if s.kv_transfer is not None:
                pulled = self._admit_remote(s, admitted)
                if pulled is None:               # no room for the pulled blocks
                    break
                if pulled:
                    continue
            if tier:
                loaded = self._admit_with_load(s, admitted)
                if loaded is None:               # no room for the loaded blocks
                    break
                if loaded:
                    continue
            hit_blocks = kv.get_computed_blocks(s)
            hit = len(hit_blocks) * bs
            n = min(s.num_tokens - hit, budget - slots)
            if self._align:
                n = aligned_split(hit, n, s.num_tokens, s.prompt_len, bs, s.junction)
                if n == 0:               # the budget left holds no whole block
                    break
            if not kv.allocate_slots(s, n, hit_blocks):
                self._admit_blocked = True       # stays so until blocks are freed
                break
            waiting.popleft()
            s.num_computed = hit
            if tier:
                self.counters.external_prefix_cache_queries += s.num_tokens - hit
            self._first_admission(s, hit, admitted)
            running.append(s)
            sched.append(s)
            nums.append(n)
            budget -= n + slots
        if waiting and len(running) >= self.max_num_seqs:
            self._admit_blocked = True           # stays so until a seat frees up
        if len(sched) > n_sched:
            self._count_prefix_lookups()
        return budget

    def _first_admission(self, s: Seq, cached: int, admitted: list[str] | None) -> bool:
        """Record `s`'s first admission (its cached tokens, when it was first scheduled);
        False when it was admitted before (a preempted request coming back)."""
        if s.admitted:
            return False
        s.admitted = True
        s.result.cached_tokens = cached
        s.result.first_scheduled = self.now
        if admitted is not None:
            admitted.append(s.rid)
        return True

    def _count_prefix_lookups(self) -> None:
        """The prefix-cache lookups since the last count, into the engine's counters."""
        queries, hits = self.kv_cache_manager.make_prefix_cache_stats()
        self.counters.prefix_cache_queries += queries
        self.counters.prefix_cache_hits += hits

    def _admit_with_load(self, s: Seq, admitted: list[str] | None) -> bool | None:
        """Admit `s` to a host load when the tier continues its HBM hit: it takes blocks
        for the loaded tokens now and waits off the batch (True). False when there is
        nothing to load (admit as usual); None when there is no room for them."""
        kv = self.kv_cache_manager
        bs = kv.block_size
        hit_blocks = kv.get_computed_blocks(s)
        host = kv.host_hit(s, len(hit_blocks))
        if not host:
            return False
        hit = len(hit_blocks) * bs
        if not kv.allocate_slots(s, host * bs, hit_blocks):
            self._admit_blocked = True
            return None
        self._count_prefix_lookups()
        ctr = self.counters
        ctr.external_prefix_cache_queries += s.num_tokens - hit
        ctr.external_prefix_cache_hits += host * bs
        self._waiting.popleft()
        s.num_computed = hit + host * bs
        if self._first_admission(s, hit + host * bs, admitted):
            s.result.host_cached_tokens = host * bs
        self._start_load(s, host)
        return True

    def _admit_remote(self, s: Seq, admitted: list[str] | None) -> bool | None:
        """Disaggregated serving, the decode side (vLLM's scheduler with a KV connector):
        the prompt past the local prefix-cache hit is pulled from the prefill instance.
        `s` takes blocks for the whole prompt now and waits off the batch, as
        WAITING_FOR_REMOTE_KVS, without using the step's token budget; when the pull is
        done it is scheduled with all but the prompt's last token computed (vLLM
        recomputes that one to sample the first token). True: admitted to a pull; False:
        nothing worth pulling (admit as usual); None: no room for the blocks."""
        kv = self.kv_cache_manager
        hit_blocks = kv.get_computed_blocks(s)
        hit = len(hit_blocks) * kv.block_size
        pull = s.num_tokens - hit
        pull_fn, s.kv_transfer = s.kv_transfer, None     # one transfer per request
        if pull <= 1 or pull_fn is None:
            return False
        if not kv.allocate_slots(s, pull, hit_blocks):
            s.kv_transfer = pull_fn
            self._admit_blocked = True
            return None
        self._count_prefix_lookups()
        self._waiting.popleft()
        s.num_computed = s.num_tokens - 1
        done = max(pull_fn(self.now, pull), self.now)
        self._first_admission(s, hit, admitted)
        s.result.remote_tokens = pull
        s.result.kv_transfer_wait_s += done - self.now
        self._seqno += 1
        heapq.heappush(self._loading, (done, self._seqno, s))
        return True

    def _resume_loaded(self, s: Seq, budget: int, sched: list[Seq],
                       nums: list[int]) -> bool:
        """Schedule `s` whose load is done on top of its blocks; when the pool is short
        it lets them go (still in the HBM prefix cache) and waits as a fresh request."""
        kv = self.kv_cache_manager
        n = min(s.num_tokens - s.num_computed, budget)
        if not kv.allocate_slots(s, n, None):
            kv.free(s)
            s.num_computed = 0
            self._admit_blocked = True
            return False
        self._waiting.popleft()
        self._running.append(s)
        sched.append(s)
        nums.append(n)
        return True

    def _draft(self, s: Seq, room: int) -> int:
        """Propose this step's draft for a decoding sequence; returns its length.
        Records the proposer's work for the step's cost (`StepShape.spec_seqs`,
        `proposer_context`: the n-gram proposer scans the whole context)."""
        self._spec_seqs += 1
        if isinstance(self.spec, ModelDraftSpec):
            s.d_start, s.d_count = 0, min(self.spec.num_speculative_tokens, max(room, 0))
            return s.d_count
        self._spec_ctx += s.num_tokens
        if s.index is None:
            s.index = self._take_index(s)
        start, count = s.index.propose(s.num_tokens)
        count = min(count, max(room, 0))
        s.d_start, s.d_count = start, count
        return count

    def _take_index(self, s: Seq) -> NgramIndex:
        """A finished request's index that `s` extends (cheap), else a new one."""
        for j, idx in enumerate(self._spare_indexes):
            if idx.adopt(s.tokens, s.num_tokens):
                del self._spare_indexes[j]
                return idx
        assert isinstance(self.spec, NgramSpec)
        return NgramIndex(self.spec, s.tokens, s.num_tokens)
