"""The twin's KV cache manager: a paged, prefix-cached block pool as the scheduler sees
it (vLLM V1's `KVCacheManager`, which its scheduler holds and asks for
`get_computed_blocks`, `allocate_slots`, `free`, `usage` and prefix-cache stats).

What the scheduler asks (see `engine` for when):
- `get_computed_blocks(s)`: the cached prefix blocks of a waiting request;
- `allocate_slots(s, n, computed, lookahead)`: KV slots for n new tokens (plus lookahead
  slots for speculation), admitting a request on top of its computed blocks; False when
  the pool is short (the scheduler then preempts, or stops admitting);
- `free(s)`: give back a finished or preempted request's blocks, tail first (the hash
  chain is kept, so a preempted request finds its prefix again on readmission);
- `usage()`, `num_used`: blocks in use; `make_prefix_cache_stats()`: hit/query counters;
- for the decode fast path: `room`, `allocate_blocks`, `cache_blocks`.
Eviction is the pool's: freed blocks keep their hash in an LRU queue until reallocated.
A hybrid model's linear-attention layers take blocks from the same pool (vLLM's hybrid
allocator: one KV cache group per `group_size` layers, each block a page of every layer
in its group, `kv_cache_utils._get_kv_cache_groups_uniform_page_size`). With prefix
caching (`state_aligned`, vLLM 0.32's `align` state cache, see `hybrid_prefill`) its
states live and die as `MambaManager` keeps them (`v1/core/single_type_kv_cache_manager.py`):
- a running request holds `state_blocks` × (1 + k) blocks: one running state per group
  and, with speculation, k speculative ones (`MambaSpec.num_speculative_blocks`, set to
  the draft depth for every method);
- a state is written only where a step ends, and kept for the prefix cache
  (`reachable_block_mask`) only at the boundaries `retention` keeps: with vLLM 0.32's
  default (`prefix_cache_retention_interval` 0) the request's replay boundary
  ((prompt − 1) // block · block) and its shared-prefix junction (where another
  request's attention blocks ran past the saved state: the prefill chunk stops there);
  None keeps every boundary a step ends on (vLLM before the 0 default, PR 52216); N > 0
  also every N tokens. A kept state is `state_blocks` pool blocks under hashes derived
  from the block's, released to the LRU queue's tail at once (vLLM: a step or two later,
  as `remove_skipped_blocks` passes it; the difference is negligible), so it is older
  than the request's attention blocks, which are released at its end;
- a hit needs the attention blocks and a kept state at its last block
  (`MambaManager.find_longest_cache_hit`); finding it touches nothing: admission takes
  the state (held for the first step, then back to the queue's tail);
- blocks freed without a hash go to the free queue's head (`BlockPool.free_blocks`:
  LIFO reuse of uncached blocks), cached ones to its tail.

It owns the pool, the prefix-cache counters and the recent hash chains, and a request's
KV state on its `Seq` (`blocks`, `n_cached`, `hashes`, `state_blocks`, `hit_state`,
`junction`), which nothing else writes; it
reads the request's token positions (`tokens`, `num_tokens`, `num_computed`) and
whether it was ever `admitted`, which the scheduler owns.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict, deque
from collections.abc import Sequence

from simulator.twin.core.block_pool import (
    NO_BARE,
    BlockPool,
    common_blocks,
    common_chain,
    extend_hash_chain,
)
from simulator.twin.core.kv_offload import HostTier
from simulator.twin.core.request import Seq

RECENT_CHAINS = 256       # ≈ 0.2 MB each at 35k-token prompts (token array + chain)


def _state_hash(block_hash: int, group: int) -> int:
    """The prefix-cache key of group `group`'s state saved at the end of a block."""
    return hash((block_hash, "state", group))


class KVCacheManager:
    """Blocks, prefix-cache lookups and registration for the twin's scheduler.

    Token counts are in tokens; blocks hold `block_size` tokens each.
    """

    __slots__ = ("_hits", "_keyed", "_pool", "_queries", "_recent", "block_size",
                 "enable_caching", "num_blocks", "retention", "running_state_blocks",
                 "state_aligned", "state_blocks", "stored_blocks", "tier")

    def __init__(self, num_blocks: int, block_size: int, *, enable_caching: bool = True,
                 recent_chains: int = RECENT_CHAINS, tier: HostTier | None = None,
                 state_aligned: bool = False, state_blocks: int = 0,
                 spec_state_blocks: int = 0, retention: int | None = 0) -> None:
        self._pool = BlockPool(num_blocks, block_size)
        self.num_blocks = num_blocks
        self.block_size = block_size
        # vLLM --no-enable-prefix-caching: lookups find nothing (blocks still registered)
        self.enable_caching = enable_caching
        # prefix-cache stats since the last `make_prefix_cache_stats` (tokens)
        self._queries = self._hits = 0
        # token arrays and hash chains of recently admitted requests: a follow-up turn
        # that extends one of them reuses its hashes instead of rehashing the prompt
        self._recent: deque[tuple[array[int], list[int]]] = deque(maxlen=recent_chains)
        # the same by `Seq.prefix_key` (a session): its last request's, found at once
        # however many other requests came since (LRU of as many keys)
        self._keyed: OrderedDict[str, tuple[array[int], list[int], Seq]] = OrderedDict()
        # host-memory tier (`kv_offload`): every newly registered block is offered to it
        # (vLLM's write-through store); `stored_blocks` counts the new ones not yet
        # timed, which the engine drains each step
        self.tier = tier
        self.stored_blocks = 0
        # hybrids: blocks a running request holds for its linear-attention states (one
        # per group), and whether hits need a saved state (at least one group then)
        self.state_aligned = state_aligned
        self.state_blocks = max(state_blocks, 1) if state_aligned else state_blocks
        self.running_state_blocks = self.state_blocks * (1 + spec_state_blocks)
        # which block boundaries keep their state (vLLM prefix_cache_retention_interval)
        self.retention = retention

    # -- usage -----------------------------------------------------------------------
    @property
    def capacity_tokens(self) -> int:
        return self.num_blocks * self.block_size

    @property
    def num_used(self) -> int:
        """Blocks referenced by running requests."""
        return self._pool.num_used

    def usage(self) -> float:
        """Fraction of blocks referenced by running requests (0..1)."""
        return self._pool.usage()

    def make_prefix_cache_stats(self) -> tuple[int, int]:
        """(queried, hit) tokens of the admissions since the last call; resets them."""
        out = (self._queries, self._hits)
        self._queries = self._hits = 0
        return out

    def reset_prefix_cache(self) -> bool:
        """A cold cache from now on (`BlockPool.reset_prefix_cache`); False while any
        request holds blocks. The recent chains go too (they would only save hashing)."""
        if not self._pool.reset_prefix_cache():
            return False
        self._recent.clear()
        self._keyed.clear()
        return True

    # -- admission -------------------------------------------------------------------
    def get_computed_blocks(self, s: Seq) -> array[int]:
        """Blocks of the longest cached prefix of `s`'s known tokens, capped so at least
        one token is computed (none with caching off). Counts nothing and touches
        nothing. A hybrid's hit stops at its last kept state (`s.hit_state` names it for
        admission); attention blocks cached beyond it set `s.junction`, where its
        prefill will stop to keep the state (vLLM `shared_prefix_boundary`)."""
        bs = self.block_size
        known = s.num_tokens
        if not s.hashes:
            self._seed_hashes(s)
        extend_hash_chain(s.tokens, known, bs, s.hashes)
        if not self.enable_caching:
            return array("q")
        found = self._pool.lookup(s.hashes, (known - 1) // bs, s.hint)
        if self.state_aligned:
            n, s.hit_state = self._last_state(s.hashes, len(found))
            s.junction = len(found) * bs if len(found) > n else 0
            return found[:n]
        return found

    def cached_prefix(self, hashes: Sequence[int], num_tokens: int,
                      key: str | None = None) -> int:
        """How many blocks a lookup of a request of `num_tokens` known tokens (chain
        `hashes`) would find now, capped as `get_computed_blocks` caps it; a
        router's question, answered without a state check and touching nothing. With
        `key` (`Seq.prefix_key`) the blocks the key's last request knew (its hint) are
        validated first, so only the chain past them walks the hash map; without one
        (the session's first request here) the newest keyed request's (a shared head)."""
        if not self.enable_caching or num_tokens <= 0:
            return 0
        bs = self.block_size
        cap = (num_tokens - 1) // bs
        hint = None
        last = self._keyed.get(key) if key is not None else None
        if last is None and self._keyed:
            last = next(reversed(self._keyed.values()))
        if last is not None:
            seq = last[2]
            # the leading blocks whose hashes the two chains share: of a running
            # request, its registered blocks before the first without a hash
            # (`bare_from`), counted unread (`BlockPool.count_held`)
            if seq.blocks:
                m = common_chain(hashes, last[1], min(seq.n_cached, cap, seq.bare_from))
                if m:
                    return self._pool.count_held(hashes, cap, m)
            elif seq.hint is not None:
                m = common_chain(hashes, last[1], min(seq.hint.shared, cap))
                if m:
                    hint = seq.hint._replace(shared=m)
        return len(self._pool.lookup(hashes, cap, hint))

    def _last_state(self, hashes: list[int], n: int) -> tuple[int, list[int]]:
        """Blocks up to the last of the first n whose end holds a kept state, and that
        state's blocks (right to left, as `MambaManager.find_longest_cache_hit`)."""
        pool, groups = self._pool, self.state_blocks
        for j in range(n - 1, -1, -1):
            found = [pool.cached_block(_state_hash(hashes[j], g)) for g in range(groups)]
            if None not in found:
                return j + 1, [b for b in found if b is not None]
        return 0, []

    def allocate_slots(self, s: Seq, num_new_tokens: int,
                       new_computed_blocks: array[int] | None = None,
                       num_lookahead_tokens: int = 0) -> bool:
        """Slots for `num_new_tokens` past `s.num_computed` (+ lookahead slots), and
        register the blocks those tokens fill. With `new_computed_blocks` (from
        `get_computed_blocks`) `s` is being admitted and the new tokens follow those
        blocks': its table becomes them plus fresh ones, and the lookup counts in the
        prefix-cache stats. False, with nothing changed, when the pool is short."""
        if new_computed_blocks is not None:
            return self._admit(s, num_new_tokens, new_computed_blocks)
        # a running request: the scheduler's per-step hot path, hence inlined
        bs, c = self.block_size, s.num_computed
        if s.hit_state:          # the hit's state, held for the first step, goes back
            self._pool.free(s.hit_state)
            s.hit_state = []
        need = -(-(c + num_new_tokens + num_lookahead_tokens) // bs) - len(s.blocks)
        if need == 1:
            b = self._pool.allocate_one()
            if b is None:
                return False
            s.blocks.append(b)
        elif need > 1:
            got = self._pool.allocate(need)
            if got is None:
                return False
            s.blocks.extend(got)
        upto = c + num_new_tokens
        if upto > s.num_tokens:
            upto = s.num_tokens
        if upto // bs > s.n_cached:
            # a prefill chunk saves a state at its end only; decode steps (drafts
            # included: vLLM keeps per-position states for them) at every boundary
            self.cache_blocks(s, upto, step_end_only=s.num_tokens - c > 1)
        return True

    def free(self, s: Seq) -> None:
        """Give back `s`'s blocks, tail first (a prefix's end is evicted before its
        beginning); its hash chain stays for readmission."""
        # what the request held, for its readmission's or its follow-up's lookup
        s.hint = self._pool.snapshot(s.blocks, len(s.blocks))
        self._pool.free(s.hint.ids[::-1])
        if s.hit_state:
            self._pool.free(s.hit_state)
            s.hit_state = []
        if s.state_blocks:
            self._pool.free(s.state_blocks)
            s.state_blocks = []
        s.blocks = array("q")
        s.n_cached = 0
        s.bare_from = NO_BARE

    # -- the decode fast path (`decode_burst`) ---------------------------------------
    def room(self, seqs: list[Seq]) -> list[int]:
        """Tokens each of `seqs` can still compute before its block table is full."""
        bs = self.block_size
        return [len(s.blocks) * bs - s.num_computed for s in seqs]

    def allocate_blocks(self, seqs: list[Seq], room: list[int], done: int) -> bool:
        """One more block for each of `seqs` whose `room` (see `room`) is `done` tokens,
        raising its room by a block; False when the pool runs dry (the sequences before
        keep theirs, the rest get none)."""
        bs, allocate_one = self.block_size, self._pool.allocate_one
        for j, s in enumerate(seqs):
            if room[j] == done:
                b = allocate_one()
                if b is None:
                    return False
                s.blocks.append(b)
                room[j] += bs
        return True

    def cache_blocks(self, s: Seq, num_tokens: int, *, step_end_only: bool = False) -> None:
        """Register the full blocks of tokens[:num_tokens] (≤ known) in the prefix cache.

        Hybrids also keep a state at the new blocks' ends that a step ended on (every
        one when one-token decode steps filled them, only the chunk's last when a
        prefill chunk ends on its boundary: `step_end_only`) and `retention` keeps."""
        bs = self.block_size
        n_full = num_tokens // bs
        if n_full <= s.n_cached:
            return
        hashes = extend_hash_chain(s.tokens, n_full * bs, bs, s.hashes)
        bare = self._pool.cache_blocks(s.blocks[s.n_cached:n_full], hashes[s.n_cached:n_full])
        if bare != NO_BARE and s.bare_from == NO_BARE:
            s.bare_from = s.n_cached + bare
        if self.state_aligned and not (step_end_only and num_tokens % bs):
            self._save_states(s, hashes, s.n_cached, n_full, step_end_only)
        if self.tier is not None:
            self.stored_blocks += self.tier.store(hashes[s.n_cached:n_full])
        s.n_cached = n_full

    def host_hit(self, s: Seq, device_blocks: int) -> int:
        """Blocks past `s`'s HBM hit of `device_blocks` that the host tier holds in an
        unbroken run (capped as the HBM lookup is: one token is left to compute).
        Call after `get_computed_blocks`; touches the tier's blocks it finds."""
        if self.tier is None or not self.enable_caching:
            return 0
        return self.tier.lookup(s.hashes, device_blocks,
                                (s.num_tokens - 1) // self.block_size)

    # -- internals -------------------------------------------------------------------
    def _save_states(self, s: Seq, hashes: list[int], first: int, n_full: int,
                     last_only: bool) -> None:
        """Keep the states at the ends of blocks first..n_full−1 that a step ended on
        (only the last when `last_only`) and retention keeps (`reachable_block_mask`)."""
        bs, keep = self.block_size, self.retention
        ends: Sequence[int] = (n_full - 1,) if last_only else range(first, n_full)
        if keep is not None:
            replay = (s.prompt_len - 1) // bs * bs      # `replay_boundaries`, no EAGLE
            ends = [j for j in ends if (j + 1) * bs in (replay, s.junction)
                    or (keep > 0 and (j + 1) * bs % keep == 0)]
        pool, groups = self._pool, self.state_blocks
        for j in ends:
            blocks = pool.allocate(groups)
            if blocks is None:
                return                  # the pool is short: this state is not kept
            for g, b in enumerate(blocks):
                pool.cache_block(b, _state_hash(hashes[j], g))
            pool.free(blocks)

    def _admit(self, s: Seq, n: int, hit_blocks: array[int]) -> bool:
        pool, bs = self._pool, self.block_size
        hit = len(hit_blocks) * bs
        need = -(-(hit + n) // bs) - len(hit_blocks)
        states = self.running_state_blocks if not s.state_blocks else 0
        held = s.hit_state if hit_blocks else []
        # admission takes the hit's state for its first step
        if not pool.touch_if_room(hit_blocks + array("q", held) if held else hit_blocks,
                                  need + states):
            return False
        s.hit_state = held
        new = pool.allocate(need + states)
        assert new is not None
        if states:
            s.state_blocks = new[need:].tolist()
            new = new[:need]
        s.blocks = hit_blocks + new
        s.n_cached = len(hit_blocks)
        s.bare_from = NO_BARE             # a hit's blocks hold their hashes
        self._queries += s.num_tokens
        self._hits += hit
        if not s.admitted:                  # its first admission: share its chain
            self._recent.appendleft((s.tokens, s.hashes))
        self.cache_blocks(s, hit + n, step_end_only=s.num_tokens - hit > 1)
        return True

    def _seed_hashes(self, s: Seq) -> None:
        """Copy the hash chain of a recent request over the blocks `s` starts with, so
        only its new blocks are hashed. With a `prefix_key`: the key's last request's
        chain (a follow-up turn extends it), up to where the two differ; without: the
        first recent request whose known blocks `s` starts with. Failing those, the
        blocks it shares with the newest request (a new session: the shared tools and
        system prompt). Any seed is a prefix of `s`'s own chain: only the cost changes.
        A chain the sender gave (`Seq.given_hashes`, the whole prompt's) is taken as it
        is; the key's last request is then met by comparing the two chains."""
        bs = self.block_size
        limit = s.num_tokens // bs
        tokens = s.tokens
        key = s.prefix_key
        given, s.given_hashes = s.given_hashes, None
        if given is not None and len(given) != limit:
            given = None            # not this prompt's chain at this block size: hash
        newest = self._recent[0] if self._recent else None
        mine = None
        if key is not None:
            mine = self._keyed.get(key)
            self._keyed[key] = (tokens, s.hashes, s)  # s.hashes: filled in place later
            self._keyed.move_to_end(key)
            if len(self._keyed) > (self._recent.maxlen or 0):
                self._keyed.popitem(last=False)
            if mine is not None:
                newest = mine[:2]
        if given is None and key is None:
            for toks, hashes in self._recent:
                m = min(len(hashes), limit)
                if not m:
                    continue
                end = m * bs
                # the last block first: rejects another session's chain in O(block)
                if tokens[end - bs:end] == toks[end - bs:end] and tokens[:end] == toks[:end]:
                    s.hashes = hashes[:m]
                    return
        m = 0
        if given is not None:
            s.hashes.extend(given)          # in place: the keyed entry holds this list
            if mine is not None:
                m = common_chain(given, mine[1], min(len(mine[1]), limit))
        elif newest is not None:
            toks, hashes = newest
            m = common_blocks(tokens, toks, min(len(hashes), limit), bs)
            s.hashes.extend(hashes[:m])     # in place: the keyed entry holds this list
        hint = mine[2].hint if mine is not None else None
        if m and hint is not None:          # its blocks, as far as the chains agree
            s.hint = hint._replace(shared=min(m, hint.shared))

