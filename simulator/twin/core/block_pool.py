"""Paged KV block pool with automatic prefix caching, as vLLM v1 does it.

Blocks hold `block_size` tokens. Only full blocks are cached; block i's hash chains the
hash of block i−1 with block i's tokens, so a change at token x invalidates every block
from x // block_size on. Blocks whose reference count drops to 0 keep their hash and
sit in an LRU free queue (head = evicted first); allocation takes blocks from the head
and forgets their hash; a prefix hit "touches" cached free blocks back out of the queue.
Callers free a request's blocks tail first, so a prefix's end is evicted before its
beginning; a freed block without a hash (a partial block, a hybrid's unkept state) goes
to the head instead, reused before any cached block is evicted (vLLM `free_blocks`).
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

ROOT_HASH = 0x5EED
# `lookup` maps hashes in chunks and stops at the first chunk with a miss: a replica or
# a request that shares only a prompt's head does not look up all of its tail
LOOKUP_CHUNK = 256


def extend_hash_chain(tokens: array[int], num_tokens: int, block_size: int,
                      hashes: list[int]) -> list[int]:
    """Extend `hashes` in place to cover every full block of `tokens[:num_tokens]`.

    `tokens` is the request's token array; a block is hashed as its raw bytes with its
    parent's hash. `hashes` is the request's cached chain (so nothing is rehashed
    across steps); returns it. Cost ≈ 0.4 µs per block (one bytes slice, one hash).
    """
    n_full = num_tokens // block_size
    i = len(hashes)
    if i >= n_full:
        return hashes
    parent = hashes[-1] if hashes else ROOT_HASH
    append = hashes.append
    raw = tokens[i * block_size:n_full * block_size].tobytes()
    width = block_size * tokens.itemsize
    for off in range(0, len(raw), width):
        parent = hash((parent, raw[off:off + width]))
        append(parent)
    return hashes


def common_blocks(a: array[int], b: array[int], n: int, block_size: int) -> int:
    """The most leading blocks, at most n, in which token arrays `a` and `b` agree (one
    vectorised compare of the two buffers; the views are gone when it returns)."""
    n = min(n, len(a) // block_size, len(b) // block_size)
    if n <= 0 or a.itemsize != b.itemsize:
        return 0
    end = n * block_size
    dtype = f"u{a.itemsize}"
    differ = np.frombuffer(a, dtype, end) != np.frombuffer(b, dtype, end)
    first = int(differ.argmax())
    return n if not differ[first] else first // block_size


class BlockPool:
    """Fixed pool of KV blocks with reference counts, hashes and an LRU free queue."""

    __slots__ = ("_block_hash", "_cached", "_free", "_ref", "block_size", "lifo_uncached",
                 "num_blocks")

    def __init__(self, num_blocks: int, block_size: int, *, lifo_uncached: bool = True) -> None:
        if num_blocks <= 0 or block_size <= 0:
            raise ValueError(f"num_blocks and block_size must be > 0, got "
                             f"{num_blocks}, {block_size}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self._ref = [0] * num_blocks
        self._block_hash: list[int | None] = [None] * num_blocks
        self._cached: dict[int, int] = {}          # hash → block id
        self._free: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        # vLLM BlockPool.free_blocks (since PR 42656): blocks freed without a hash go to
        # the queue's head, reused before any cached block is evicted (False: every
        # freed block to the tail, the twin's rule before issue 37)
        self.lifo_uncached = lifo_uncached

    # -- queries ---------------------------------------------------------------------
    @property
    def num_free(self) -> int:
        """Blocks allocatable now (truly free plus cached blocks nobody references)."""
        return len(self._free)

    @property
    def num_used(self) -> int:
        return self.num_blocks - len(self._free)

    def usage(self) -> float:
        """Fraction of blocks referenced by running requests (0..1)."""
        return (self.num_blocks - len(self._free)) / self.num_blocks

    def num_cached(self) -> int:
        """Blocks currently findable by hash (in use or free)."""
        return len(self._cached)

    def ref_count(self, block_id: int) -> int:
        return self._ref[block_id]

    def block_hash(self, block_id: int) -> int | None:
        return self._block_hash[block_id]

    def cached_block(self, block_hash: int) -> int | None:
        """The block cached under `block_hash`, if any (does not touch)."""
        return self._cached.get(block_hash)

    def free_order(self) -> list[int]:
        """Free queue from head (next evicted) to tail; for tests and inspection."""
        return list(self._free)

    def lookup(self, hashes: Sequence[int], max_blocks: int) -> list[int]:
        """Blocks of the longest cached prefix: walk the chain until the first miss.

        `max_blocks` caps the hit (vLLM: (num_tokens − 1) // block_size, so at least one
        token is computed). Does not touch.
        """
        get = self._cached.get
        found: list[int | None] = []
        for lo in range(0, min(len(hashes), max_blocks), LOOKUP_CHUNK):
            part = list(map(get, hashes[lo:min(lo + LOOKUP_CHUNK, max_blocks)]))
            if None in part:            # the first miss: stop here (C-speed scans)
                found += part[:part.index(None)]
                break
            found += part
        return found                                  # type: ignore[return-value]

    def num_evictable(self, block_ids: Sequence[int]) -> int:
        """How many of `block_ids` sit in the free queue (touching them uses them up)."""
        return list(map(self._ref.__getitem__, block_ids)).count(0)   # C-speed loop

    # -- mutations -------------------------------------------------------------------
    def reset_prefix_cache(self) -> bool:
        """Forget every cached block hash (vLLM's `reset_prefix_cache`): the next request
        starts from a cold cache. Refused (False) while any block is referenced, as vLLM
        refuses while running requests hold blocks."""
        if len(self._free) != self.num_blocks:
            return False
        self._cached.clear()
        self._block_hash = [None] * self.num_blocks
        return True

    def touch(self, block_ids: Sequence[int]) -> None:
        """Take a reference on cached blocks (a prefix hit); pull free ones off the queue."""
        ref, free = self._ref, self._free
        for b in block_ids:
            if ref[b] == 0:
                del free[b]
            ref[b] += 1

    def allocate(self, n: int) -> list[int] | None:
        """n fresh blocks from the free queue's head (their old hashes forgotten), or
        None when fewer than n are free."""
        free = self._free
        if n > len(free):
            return None
        out: list[int] = []
        ref, bh, cached = self._ref, self._block_hash, self._cached
        for _ in range(n):
            b, _v = free.popitem(last=False)
            h = bh[b]
            if h is not None:
                if cached.get(h) == b:
                    del cached[h]
                bh[b] = None
            ref[b] = 1
            out.append(b)
        return out

    def allocate_one(self) -> int | None:
        """One fresh block (the decode hot path), or None when none is free."""
        free = self._free
        if not free:
            return None
        b, _v = free.popitem(last=False)
        h = self._block_hash[b]
        if h is not None:
            if self._cached.get(h) == b:
                del self._cached[h]
            self._block_hash[b] = None
        self._ref[b] = 1
        return b

    def cache_block(self, block_id: int, block_hash: int) -> None:
        """Register a full block under its chain hash. A hash already held by another
        block keeps pointing there (the duplicate stays uncached, as in a lookup vLLM
        would return the first block anyway)."""
        if self._block_hash[block_id] is not None:
            return
        if block_hash in self._cached:
            return
        self._cached[block_hash] = block_id
        self._block_hash[block_id] = block_hash

    def free(self, block_ids: Sequence[int]) -> None:
        """Drop one reference from each block, in the given order; blocks reaching 0 go
        to the queue's tail (pass a request's blocks reversed: tail first), or, with
        `lifo_uncached`, those without a hash to its head, in the given order."""
        ref, free = self._ref, self._free
        if self.lifo_uncached:
            self._free_lifo(block_ids)
            return
        for b in block_ids:
            r = ref[b] - 1
            ref[b] = r
            if r == 0:
                free[b] = None

    def _free_lifo(self, block_ids: Sequence[int]) -> None:
        ref, free, bh = self._ref, self._free, self._block_hash
        first: list[int] = []
        for b in block_ids:
            r = ref[b] - 1
            ref[b] = r
            if r == 0:
                if bh[b] is None:
                    first.append(b)
                else:
                    free[b] = None
        for b in reversed(first):        # prepend_n: the first freed ends at the head
            free[b] = None
            free.move_to_end(b, last=False)
