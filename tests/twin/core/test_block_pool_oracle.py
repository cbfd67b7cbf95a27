"""The numpy block pool (lazy free queue, stale-tolerant hash map) against the pool it
replaced, kept here as the oracle: random operation sequences, the same answers and the
same state (free order, reference counts, hashes) after every step, through the
block-by-block and vectorised paths and across compactions."""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.twin.core import block_pool
from simulator.twin.core.block_pool import LOOKUP_CHUNK, BlockPool, Snapshot

HASHES = list(range(100, 160))          # a small space: duplicates and re-caching happen


class OraclePool:
    """The pool before issue 36 (an OrderedDict free queue, one block at a time)."""

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


def _same(new: BlockPool, old: OraclePool, n: int) -> None:
    assert new.free_order() == old.free_order()
    assert (new.num_free, new.num_used, new.num_cached()) == \
        (old.num_free, old.num_used, old.num_cached())
    assert new.usage() == old.usage()
    assert [new.ref_count(b) for b in range(n)] == [old.ref_count(b) for b in range(n)]
    assert [new.block_hash(b) for b in range(n)] == [old.block_hash(b) for b in range(n)]
    assert [new.cached_block(h) for h in HASHES] == [old.cached_block(h) for h in HASHES]


@pytest.mark.parametrize("spare", [0, block_pool.SPARE_ENTRIES])
@pytest.mark.parametrize("lifo", [True, False])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_pool_matches_the_oracle(spare: int, lifo: bool, data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 40), label="blocks")
    orig = block_pool.SPARE_ENTRIES
    block_pool.SPARE_ENTRIES = spare      # 0: queue compactions and dict pruning happen
    try:
        _run(data, n, lifo)
    finally:
        block_pool.SPARE_ENTRIES = orig


def _run(data: st.DataObject, n: int, lifo: bool) -> None:
    new, old = BlockPool(n, 16, lifo_uncached=lifo), OraclePool(n, 16, lifo_uncached=lifo)
    held: list[list[int]] = []            # each a request's blocks, in allocation order
    # snapshots of freed requests, with the hashes their blocks held then (None: none)
    snaps: list[tuple[Snapshot, list[int | None]]] = []
    for _ in range(data.draw(st.integers(1, 60), label="steps")):
        op = data.draw(st.sampled_from(
            ["allocate", "allocate_one", "cache", "free", "hit", "hinted hit", "reset"]))
        if op == "allocate":
            k = data.draw(st.integers(0, n + 1))
            got = new.allocate(k)
            assert _as_list(got) == old.allocate(k)
            if got:
                held.append(list(got))
        elif op == "allocate_one":
            b = new.allocate_one()
            assert b == old.allocate_one()
            if b is not None:
                if held and data.draw(st.booleans()):
                    held[data.draw(st.integers(0, len(held) - 1))].append(b)
                else:
                    held.append([b])
        elif op == "cache" and held:
            blocks = held[data.draw(st.integers(0, len(held) - 1))]
            # distinct hashes (a chain's) or repeated ones
            hs = data.draw(st.lists(st.sampled_from(HASHES), min_size=len(blocks),
                                    max_size=len(blocks), unique=data.draw(st.booleans())))
            if data.draw(st.booleans()):
                new.cache_blocks(array("q", blocks) if data.draw(st.booleans()) else blocks,
                                 hs)
            else:
                for b, h in zip(blocks, hs, strict=True):
                    new.cache_block(b, h)
            for b, h in zip(blocks, hs, strict=True):
                old.cache_block(b, h)
        elif op == "free" and held:
            blocks = held.pop(data.draw(st.integers(0, len(held) - 1)))
            order = data.draw(st.sampled_from(["tail first", "head first", "shuffled"]))
            ids = (blocks[::-1] if order == "tail first" else blocks if order == "head first"
                   else data.draw(st.permutations(blocks)))
            snaps.append((new.snapshot(blocks, len(blocks)), [new.block_hash(b) for b in blocks]))
            new.free(ids)
            old.free(ids)
        elif op == "hinted hit" and snaps:
            # a chain that shares its first k hashes with a freed request's blocks
            snap, then = snaps[data.draw(st.integers(0, len(snaps) - 1))]
            k = data.draw(st.integers(0, len(then)))
            chain = [h for h in then[:k] if h is not None]
            if len(chain) == k and len(set(chain)) == k:
                rest = [h for h in HASHES if h not in chain]
                chain += data.draw(st.lists(st.sampled_from(rest), max_size=n, unique=True))
                cap = data.draw(st.integers(0, len(chain) + 1))
                assert list(new.lookup(chain, cap, snap._replace(shared=k))) == \
                    old.lookup(chain, cap)
        elif op == "hit":
            # a chain's hashes are distinct (each covers its parent's), so its hit is
            # distinct blocks, as every call takes
            chain = data.draw(st.lists(st.sampled_from(HASHES), max_size=2 * n, unique=True))
            cap = data.draw(st.integers(0, len(chain) + 1))
            found = list(new.lookup(chain, cap))
            assert found == old.lookup(chain, cap)
            assert new.num_evictable(found) == old.num_evictable(found)
            if found and data.draw(st.booleans()):
                new.touch(found)
                old.touch(found)
                held.append(found)
        elif op == "reset":
            assert new.reset_prefix_cache() == old.reset_prefix_cache()
        _same(new, old, n)


def test_long_chains_match_the_oracle_across_lookup_chunks() -> None:
    """Chains longer than a lookup chunk, shared, evicted in part and re-cached."""
    import random
    rng = random.Random(7)
    n = 3 * LOOKUP_CHUNK
    new, old = BlockPool(n, 16), OraclePool(n, 16)
    chains = [[rng.getrandbits(60) for _ in range(LOOKUP_CHUNK + 50)] for _ in range(4)]
    shared = chains[0][:LOOKUP_CHUNK]
    for c in chains[1:]:
        c[:LOOKUP_CHUNK] = shared
    snaps: dict[int, Snapshot] = {}       # each chain's blocks when last freed
    for _ in range(40):
        i = rng.randrange(len(chains))
        chain = chains[i]
        found = new.lookup(chain, len(chain))
        assert list(found) == old.lookup(chain, len(chain))
        if i in snaps:                      # the same walk from its last blocks
            assert new.lookup(chain, len(chain), snaps[i]) == found
        for pool in (new, old):
            pool.touch(found)
        fresh = new.allocate(len(chain) - len(found))
        assert _as_list(fresh) == old.allocate(len(chain) - len(found)) and fresh is not None
        blocks = found + fresh
        new.cache_blocks(blocks, chain)
        for b, h in zip(blocks, chain, strict=True):
            old.cache_block(b, h)
        snaps[i] = new.snapshot(blocks, len(blocks))
        for pool in (new, old):
            pool.free(blocks[::-1])
        _same_long(new, old, n)


def _as_list(blocks: array[int] | None) -> list[int] | None:
    return None if blocks is None else list(blocks)


def _same_long(new: BlockPool, old: OraclePool, n: int) -> None:
    assert new.free_order() == old.free_order()
    assert new.num_cached() == old.num_cached()
    assert [new.block_hash(b) for b in range(n)] == [old.block_hash(b) for b in range(n)]


def test_caching_blocks_again_in_a_batch_matches_the_oracle() -> None:
    """A batch as block by block: blocks that already hold a hash keep it, a hash
    another block holds stays there, and a stale entry is overwritten."""
    n = 4 * block_pool.SMALL
    new, old = BlockPool(n, 16), OraclePool(n, 16)
    blocks = list(new.allocate(n) or [])
    assert blocks == old.allocate(n)
    first, second = blocks[:2 * block_pool.SMALL], blocks[2 * block_pool.SMALL:]
    hs = list(range(1000, 1000 + len(first)))
    for pool in (new, old):
        _cache(pool, first, hs)                                # fresh: all register
        _cache(pool, first, [h + 5000 for h in hs])            # already hashed: kept
        _cache(pool, second, hs)                               # held elsewhere: kept
        pool.free(first[::-1])
    _same(new, old, n)
    again = list(new.allocate(len(first)) or [])               # `first`'s hashes go stale
    assert again == old.allocate(len(first))
    for pool in (new, old):
        _cache(pool, again, [h + 7 for h in hs])               # no clash: all register
    _same(new, old, n)
    assert [new.block_hash(b) for b in first] == [old.block_hash(b) for b in first]


def _cache(pool: BlockPool | OraclePool, blocks: list[int], hashes: list[int]) -> None:
    """The pool's batch call; the oracle's one block at a time."""
    if isinstance(pool, BlockPool):
        pool.cache_blocks(blocks, hashes)
    else:
        for b, h in zip(blocks, hashes, strict=True):
            pool.cache_block(b, h)
