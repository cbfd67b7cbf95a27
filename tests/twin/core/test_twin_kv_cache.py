"""Block pool: hash chain, hit cap, ref counts, LRU tail-first eviction."""

from __future__ import annotations

from array import array

from simulator.twin.core.block_pool import BlockPool, extend_hash_chain

BS = 4


def _chain(tokens: list[int]) -> list[int]:
    return extend_hash_chain(array("I", tokens), len(tokens), BS, [])


def _cache_all(pool: BlockPool, blocks: list[int], hashes: list[int]) -> None:
    for b, h in zip(blocks, hashes, strict=False):
        pool.cache_block(b, h)


def test_chain_covers_full_blocks_only_and_extends_incrementally() -> None:
    toks = list(range(11))
    h = _chain(toks)
    assert len(h) == 2                               # 11 tokens → 2 full blocks of 4
    grown = extend_hash_chain(array("I", [*toks, 11]), 12, BS, list(h))
    assert grown[:2] == h and len(grown) == 3


def test_change_at_x_invalidates_every_later_block() -> None:
    a = list(range(32))
    b = list(a)
    b[9] = 999                                       # inside block 2
    ha, hb = _chain(a), _chain(b)
    assert ha[:2] == hb[:2]
    assert all(x != y for x, y in zip(ha[2:], hb[2:], strict=True))


def test_lookup_walks_until_first_miss_and_respects_cap() -> None:
    pool = BlockPool(16, BS)
    toks = list(range(16))
    h = _chain(toks)
    blocks = pool.allocate(4)
    assert blocks is not None
    _cache_all(pool, blocks, h)
    assert pool.lookup(h, (16 - 1) // BS) == blocks[:3]   # cap: prompt − 1 → 3 blocks
    other = _chain([*toks[:8], 77, *toks[9:]])
    assert pool.lookup(other, 4) == blocks[:2]


def test_shared_prefix_is_stored_once_with_ref_counts() -> None:
    pool = BlockPool(8, BS)
    h = _chain(list(range(8)))
    first = pool.allocate(2)
    assert first is not None
    _cache_all(pool, first, h)
    hit = pool.lookup(h, 2)
    pool.touch(hit)
    assert hit == first and [pool.ref_count(b) for b in first] == [2, 2]
    assert pool.num_used == 2
    pool.free(first[::-1])
    assert pool.num_used == 2                        # still referenced by the second
    pool.free(hit[::-1])
    assert pool.num_used == 0 and pool.num_cached() == 2


def test_freed_tail_first_so_prefix_end_is_evicted_first() -> None:
    pool = BlockPool(4, BS)
    h = _chain(list(range(16)))
    blocks = pool.allocate(4)
    assert blocks is not None
    _cache_all(pool, blocks, h)
    pool.free(blocks[::-1])
    assert pool.free_order() == list(blocks[::-1])
    new = pool.allocate(1)
    assert new == array("q", [blocks[3]])                         # the prefix's last block goes first
    assert pool.block_hash(blocks[3]) is None
    assert pool.lookup(h, 4) == blocks[:3]            # the beginning is still cached


def test_touch_pulls_cached_free_blocks_out_of_the_queue() -> None:
    pool = BlockPool(4, BS)
    h = _chain(list(range(8)))
    blocks = pool.allocate(2)
    assert blocks is not None
    _cache_all(pool, blocks, h)
    pool.free(blocks[::-1])
    assert pool.num_free == 4 and pool.num_evictable(blocks) == 2
    pool.touch(pool.lookup(h, 2))
    assert pool.num_free == 2 and blocks[0] not in pool.free_order()
    assert pool.allocate(3) is None


def test_hash_chain_extends_in_place_and_equals_one_pass() -> None:
    """A long prompt hashed in pieces (as turns extend it) gives the one-pass chain;
    only the new blocks are hashed (speed is benchmarks/sim_speed.py's, not a test's)."""
    toks = array("I", range(35_000))
    whole = extend_hash_chain(toks, len(toks), 16, [])
    assert len(whole) == 35_000 // 16
    chain: list[int] = []
    for upto in (15, 16, 1_000, 20_007, 35_000):
        same = extend_hash_chain(toks, upto, 16, chain)
        assert same is chain and chain == whole[:upto // 16]
    # a change in block 1 changes every hash from block 1 on, and nothing before it
    changed = extend_hash_chain(toks[:16] + array("I", [99_999]) + toks[17:], 35_000, 16, [])
    assert changed[0] == whole[0]
    assert all(a != b for a, b in zip(changed[1:], whole[1:], strict=True))


def test_lookup_stops_at_the_first_miss_across_chunks() -> None:
    """Chunked lookup = the walk to the first miss, wherever the miss falls (inside a
    chunk, on its edge, none, past the cap)."""
    import random

    from simulator.twin.core.block_pool import LOOKUP_CHUNK
    rng = random.Random(5)
    n = 3 * LOOKUP_CHUNK + 17
    pool = BlockPool(n + 8, 16)
    hashes = list(range(1000, 1000 + n))
    blocks = pool.allocate(n)
    assert blocks is not None
    for b, h in zip(blocks, hashes, strict=True):
        pool.cache_block(b, h)
    for _ in range(200):
        probe = list(hashes)
        miss = rng.choice([rng.randrange(n), LOOKUP_CHUNK, 2 * LOOKUP_CHUNK - 1, n])
        if miss < n:
            probe[miss] = -1
        cap = rng.choice([n, rng.randrange(n + 1), LOOKUP_CHUNK])
        want: list[int] = []
        for h in probe[:cap]:
            hit = pool.cached_block(h)
            if hit is None:
                break
            want.append(hit)
        assert list(pool.lookup(probe, cap)) == want
