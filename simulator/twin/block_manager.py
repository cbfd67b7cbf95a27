"""The engine's block management: admission with prefix-cache lookup, block growth,
preemption and cache registration (vLLM V1's KV-cache manager side of `schedule()`).

A mixin of `TwinEngine` (see `engine` for the scheduling rules); it only touches the
state declared below.
"""

from __future__ import annotations

from array import array
from collections import deque

from simulator.twin.kv_cache import BlockPool, extend_hash_chain
from simulator.twin.seq import Seq
from simulator.twin.types import EngineCounters


class BlockManager:
    """Admission, block growth, preemption and prefix-cache registration."""

    pool: BlockPool
    counters: EngineCounters
    now: float
    max_num_seqs: int
    _waiting: deque[Seq]
    _running: list[Seq]
    _admit_blocked: bool
    _recent: deque[tuple[array[int], list[int]]]
    prefix_caching: bool = True     # vLLM --no-enable-prefix-caching turns lookups off

    def _grow(self, s: Seq, upto: int) -> bool:
        """Give `s` blocks for `upto` tokens; False when the pool is short."""
        bs = self.pool.block_size
        need = -(-upto // bs) - len(s.blocks)
        if need <= 0:
            return True
        if need == 1:
            b = self.pool.allocate_one()
            if b is None:
                return False
            s.blocks.append(b)
            return True
        got = self.pool.allocate(need)
        if got is None:
            return False
        s.blocks.extend(got)
        return True

    def _preempt_for(self, s: Seq, upto: int) -> bool:
        """Preempt the most recently admitted running requests until `s` fits.
        Returns False when `s` itself had to go."""
        running = self._running
        while True:
            victim = running.pop()
            self._preempt(victim)
            if victim is s:
                return False
            if self._grow(s, upto):
                return True

    def _preempt(self, v: Seq) -> None:
        self.pool.free(v.blocks[::-1])
        v.blocks = []
        v.n_cached = 0
        v.num_computed = 0
        v.d_count = 0
        v.result.num_preemptions += 1
        self.counters.preemptions += 1
        self._waiting.appendleft(v)

    def _cache_full(self, s: Seq, upto: int) -> None:
        """Register the full blocks of tokens[:upto] (upto ≤ known) in the prefix cache."""
        bs = self.pool.block_size
        n_full = upto // bs
        if n_full <= s.n_cached:
            return
        hashes = extend_hash_chain(s.tokens, n_full * bs, bs, s.hashes)
        pool, blocks = self.pool, s.blocks
        for j in range(s.n_cached, n_full):
            pool.cache_block(blocks[j], hashes[j])
        s.n_cached = n_full

    def _seed_hashes(self, s: Seq) -> None:
        """Copy the hash chain of a recent request whose known blocks `s` starts with."""
        bs = self.pool.block_size
        limit = s.num_tokens // bs
        tokens = s.tokens
        for toks, hashes in self._recent:
            m = min(len(hashes), limit)
            if not m:
                continue
            end = m * bs
            # the last block first: rejects another session's chain in O(block)
            if tokens[end - bs:end] == toks[end - bs:end] and tokens[:end] == toks[:end]:
                s.hashes = hashes[:m]
                return

    def _admit(self, budget: int, sched: list[Seq], nums: list[int],
               admitted: list[str] | None) -> int:
        """Admit waiting requests FCFS while budget, seats and blocks allow."""
        pool, bs = self.pool, self.pool.block_size
        waiting, running = self._waiting, self._running
        while waiting and budget > 0 and len(running) < self.max_num_seqs:
            s = waiting[0]
            known = s.num_tokens
            if not s.hashes:
                self._seed_hashes(s)
            extend_hash_chain(s.tokens, known, bs, s.hashes)
            hit_blocks = (pool.lookup(s.hashes, (known - 1) // bs) if self.prefix_caching
                          else [])
            hit = len(hit_blocks) * bs
            n = min(known - hit, budget)
            need = -(-(hit + n) // bs) - len(hit_blocks)
            if need > pool.num_free - pool.num_evictable(hit_blocks):
                self._admit_blocked = True       # stays so until blocks are freed
                break
            pool.touch(hit_blocks)
            new = pool.allocate(need)
            assert new is not None
            waiting.popleft()
            s.blocks = hit_blocks + new
            s.n_cached = len(hit_blocks)
            s.num_computed = hit
            pool.record_query(known, hit)
            self.counters.prefix_cache_queries += known
            self.counters.prefix_cache_hits += hit
            if not s.admitted:
                s.admitted = True
                self._recent.appendleft((s.tokens, s.hashes))
                s.result.cached_tokens = hit
                s.result.first_scheduled = self.now
                if admitted is not None:
                    admitted.append(s.rid)
            running.append(s)
            self._cache_full(s, hit + n)
            sched.append(s)
            nums.append(n)
            budget -= n
        if waiting and len(running) >= self.max_num_seqs:
            self._admit_blocked = True           # stays so until a seat frees up
        return budget
