"""The twin's KV cache manager through the interface the scheduler uses: computed
prefix blocks, slot allocation (+ lookahead), free, usage, prefix-cache stats."""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from simulator.twin.core.block_pool import common_blocks, common_chain, extend_hash_chain
from simulator.twin.core.kv_cache_manager import KVCacheManager
from simulator.twin.core.request import Seq
from simulator.twin.core.types import RequestResult

BS = 4


def _seq(rid: str, tokens: list[int]) -> Seq:
    arr = array("I", tokens)
    return Seq(rid, arr, len(arr), len(arr), RequestResult(rid, len(arr)), len(arr))


def _admit(kv: KVCacheManager, s: Seq, budget: int = 1 << 30) -> bool:
    """What the scheduler does at admission; returns whether `s` got in."""
    hit_blocks = kv.get_computed_blocks(s)
    hit = len(hit_blocks) * BS
    n = min(s.num_tokens - hit, budget)
    if not kv.allocate_slots(s, n, hit_blocks):
        return False
    s.num_computed, s.admitted = hit, True
    return True


def test_a_shared_prefix_is_found_and_counted_once_admitted() -> None:
    kv = KVCacheManager(16, BS)
    a = _seq("a", list(range(10)))
    assert not kv.get_computed_blocks(a) and _admit(kv, a)
    assert len(a.blocks) == 3 and kv.num_used == 3 and kv.usage() == 3 / 16
    assert kv.make_prefix_cache_stats() == (10, 0)
    assert kv.make_prefix_cache_stats() == (0, 0)              # taken: reset
    b = _seq("b", [*range(8), 99, 98, 97])
    hit = kv.get_computed_blocks(b)
    assert hit == a.blocks[:2]                                 # 2 full shared blocks
    assert kv.make_prefix_cache_stats() == (0, 0)              # a lookup alone counts nothing
    assert _admit(kv, b) and b.num_computed == 8 and b.blocks[:2] == hit
    assert kv.num_used == 4                                    # shared blocks counted once
    assert kv.make_prefix_cache_stats() == (11, 8)


def test_running_slots_grow_with_lookahead_and_fail_without_change() -> None:
    kv = KVCacheManager(4, BS)
    s = _seq("s", list(range(5)))
    assert _admit(kv, s) and len(s.blocks) == 2
    s.num_computed = 5
    assert kv.allocate_slots(s, 1, None, 3) and len(s.blocks) == 3   # 5 + 1 + 3 slots
    before = list(s.blocks)
    assert not kv.allocate_slots(s, 1, None, 12)                    # needs 2, 1 free
    assert list(s.blocks) == before and kv.num_used == 3
    room = kv.room([s])
    assert room == [7] and kv.allocate_blocks([s], room, 7) and room == [11]
    assert not kv.allocate_blocks([s], room, 11) and len(s.blocks) == 4


def test_a_blocked_admission_changes_nothing() -> None:
    kv = KVCacheManager(2, BS)
    s = _seq("s", list(range(12)))
    assert not _admit(kv, s)
    assert not s.blocks and kv.num_used == 0 and kv.make_prefix_cache_stats() == (0, 0)
    assert _admit(kv, s, budget=8) and len(s.blocks) == 2            # a first chunk fits


def test_free_keeps_the_chain_so_a_preempted_request_finds_its_prefix() -> None:
    kv = KVCacheManager(8, BS)
    s = _seq("s", list(range(13)))
    assert _admit(kv, s)
    blocks, hashes = list(s.blocks), list(s.hashes)
    kv.free(s)                                                 # preemption or finish
    assert not s.blocks and s.n_cached == 0 and s.hashes == hashes and kv.num_used == 0
    s.num_computed = 0
    assert list(kv.get_computed_blocks(s)) == blocks[:3]            # recompute from the cache
    assert _admit(kv, s) and s.num_computed == 12


def test_caching_off_finds_nothing_but_counts_queries() -> None:
    kv = KVCacheManager(8, BS, enable_caching=False)
    a, b = _seq("a", list(range(9))), _seq("b", list(range(9)))
    assert _admit(kv, a) and not kv.get_computed_blocks(b) and _admit(kv, b)
    assert kv.make_prefix_cache_stats() == (18, 0)


def test_freed_blocks_stay_findable_until_evicted_tail_first() -> None:
    kv = KVCacheManager(4, BS)
    a = _seq("a", list(range(9)))
    assert _admit(kv, a)
    a_blocks = list(a.blocks)
    kv.free(a)
    b = _seq("b", [*range(9), 50, 51, 52])
    assert list(kv.get_computed_blocks(b)) == a_blocks[:2]     # freed, still cached
    assert b.hashes == extend_hash_chain(b.tokens, 12, BS, [])  # seeded chain is right
    c = _seq("c", [7] * 8)
    assert _admit(kv, c)              # takes the never-used block, then a's tail block
    assert list(kv.get_computed_blocks(b)) == a_blocks[:2]
    d = _seq("d", [8] * 4)
    assert _admit(kv, d)              # evicts a's second block: the prefix shrinks
    assert list(kv.get_computed_blocks(b)) == a_blocks[:1]


def _session_prompts(rng: Any, count: int) -> Iterator[tuple[str, list[int]]]:
    """`count` prompts of 6 sessions over a shared head: each extends its session's last
    prompt, a fifth of them after a compaction rewrote its tail."""
    head = [rng.randrange(1000) for _ in range(37)]
    history: dict[str, list[int]] = {}
    for _ in range(count):
        sid = f"s{rng.randrange(6)}"
        prev = history.get(sid, head + [rng.randrange(1000) for _ in range(5)])
        if rng.random() < 0.2:                          # compaction: the tail rewritten
            prev = prev[:rng.randrange(len(prev) + 1)]
        toks = prev + [rng.randrange(1000) for _ in range(rng.randrange(1, 30))]
        history[sid] = toks
        yield sid, toks


def test_seeded_chains_are_the_chains_rehashed_whatever_the_seed() -> None:
    """Sessions (keyed and not) over shared heads, follow-ups that extend or diverge
    (compaction), and more sessions than recent chains: every request's chain, however
    it was seeded, is its own chain hashed from scratch, and its hit the same."""
    import random
    rng = random.Random(3)
    for keyed in (True, False):
        kv = KVCacheManager(4096, BS, recent_chains=3)
        for i, (sid, toks) in enumerate(_session_prompts(rng, 120)):
            s = _seq(f"r{i}", toks)
            s.prefix_key = sid if keyed else None
            assert _admit(kv, s)
            assert s.hashes == extend_hash_chain(s.tokens, len(toks), BS, [])
            kv.free(s)


def test_a_chain_the_sender_gives_is_taken_and_changes_nothing(monkeypatch: Any) -> None:
    """A fleet's router hands the engine the prompt's chain (`Seq.given_hashes`): the
    manager hashes none of the prompt's blocks, and every hit, hint and chain is the
    one it finds hashing them itself; a chain of the wrong length is not taken."""
    import random

    from simulator.twin.core import kv_cache_manager as kvm
    hashed = [0]
    real = kvm.extend_hash_chain

    def counting(tokens: array[int], n: int, bs: int, hashes: list[int]) -> list[int]:
        hashed[0] += max(0, n // bs - len(hashes))
        return real(tokens, n, bs, hashes)

    monkeypatch.setattr(kvm, "extend_hash_chain", counting)
    rng = random.Random(5)
    own, told = KVCacheManager(4096, BS, recent_chains=3), KVCacheManager(4096, BS,
                                                                          recent_chains=3)
    for i, (sid, toks) in enumerate(_session_prompts(rng, 150)):
        a, b = _seq(f"r{i}", toks), _seq(f"r{i}", toks)
        a.prefix_key = b.prefix_key = sid
        b.given_hashes = real(b.tokens, len(toks), BS, [])
        hit_a = own.get_computed_blocks(a)
        before = hashed[0]
        hit_b = told.get_computed_blocks(b)
        assert hashed[0] == before                              # b hashed nothing
        assert list(hit_b) == list(hit_a) and b.hashes == a.hashes
        assert (a.hint is None) == (b.hint is None)
        if a.hint is not None and b.hint is not None:
            assert a.hint.shared == b.hint.shared and list(a.hint.ids) == list(b.hint.ids)
        assert _admit(own, a) and _admit(told, b) and list(a.blocks) == list(b.blocks)
        own.free(a)
        told.free(b)
    c = _seq("c", list(range(40)))
    c.given_hashes = [1, 2, 3]                         # not the chain of 10 blocks
    told.get_computed_blocks(c)
    assert c.hashes == real(c.tokens, 40, BS, [])


def test_a_new_session_seeds_the_shared_head_from_the_newest_request() -> None:
    kv = KVCacheManager(64, BS)
    a = _seq("a", [*range(20), 7, 7, 7, 7])
    a.prefix_key = "s0"
    assert _admit(kv, a)
    b = _seq("b", [*range(20), 9, 9, 9, 9, 9])
    b.prefix_key = "s1"
    kv.get_computed_blocks(b)
    assert b.hashes == extend_hash_chain(b.tokens, len(b.tokens), BS, [])
    assert b.hashes[:5] == a.hashes[:5] and b.hashes[5] != a.hashes[5]


def test_a_routers_session_chains_are_the_prompts_chains() -> None:
    import random

    from simulator.twin.fleet.view import SessionChains, block_hashes
    rng = random.Random(11)
    chains = SessionChains(max_sessions=3)
    head = [rng.randrange(500) for _ in range(50)]
    prompts: dict[str, list[int]] = {}
    for _ in range(150):
        sid = f"s{rng.randrange(5)}"
        prev = prompts.get(sid, head)
        if rng.random() < 0.2:
            prev = prev[:rng.randrange(len(prev) + 1)]
        prompts[sid] = prev + [rng.randrange(500) for _ in range(rng.randrange(0, 40))]
        if not prompts[sid]:
            continue
        got = chains.hashes(array("I", prompts[sid]), BS, sid)
        assert got == block_hashes(prompts[sid], BS)


def test_a_routers_hinted_count_is_the_walk_of_the_hash_map() -> None:
    """`cached_prefix` with a session key (its last request's blocks checked first)
    counts what a lookup walking the hash map finds: sessions that extend, compact and
    share a head, a pool small enough to evict, requests still running (their blocks
    as they are), keys asked of other sessions' prompts and of none seen yet."""
    import random
    rng = random.Random(5)
    kv = KVCacheManager(48, BS, recent_chains=3)
    hinted = 0
    running: list[Seq] = []
    for i, (sid, toks) in enumerate(_session_prompts(rng, 300)):
        tokens = array("I", toks)
        chain = extend_hash_chain(tokens, len(toks), BS, [])
        walked = len(kv._pool.lookup(chain, (len(toks) - 1) // BS))
        for key in (sid, f"s{rng.randrange(6)}", "unseen", None):
            assert kv.cached_prefix(chain, len(toks), key) == walked
        last = kv._keyed.get(sid)
        hinted += last is not None and bool(last[2].blocks or last[2].hint) and walked > 0
        s = _seq(f"r{i}", toks)
        s.prefix_key = sid
        if _admit(kv, s):
            running.append(s)
        if len(running) > rng.randrange(3) or not kv.num_used < kv.num_blocks:
            kv.free(running.pop(0))
    assert hinted > 50                                  # the hinted path was taken


def test_a_running_duplicate_counts_by_the_map_not_by_its_blocks() -> None:
    """Two requests that computed the same prompt at once: the second's blocks stay
    without hashes (duplicates), so a router's count for its session must walk the map
    from its first such block (`Seq.bare_from`), not take its held blocks unread: once
    the first request's blocks are evicted, nothing of the prompt is cached."""
    from simulator.twin.core.block_pool import NO_BARE
    kv = KVCacheManager(16, BS)
    toks = list(range(21))                            # 5 full blocks and one token
    a, b = _seq("a", toks), _seq("b", toks)
    a.prefix_key, b.prefix_key = "sa", "sb"
    hit_a, hit_b = kv.get_computed_blocks(a), kv.get_computed_blocks(b)   # both miss
    assert not hit_a and not hit_b
    assert kv.allocate_slots(a, len(toks), hit_a) and kv.allocate_slots(b, len(toks), hit_b)
    assert a.bare_from == NO_BARE and b.bare_from == 0
    chain = extend_hash_chain(array("I", toks), len(toks), BS, [])
    longer = [*toks, *range(100, 108)]                # b's session's next prompt
    next_chain = extend_hash_chain(array("I", longer), len(longer), BS, [])
    cap = (len(longer) - 1) // BS
    assert kv.cached_prefix(next_chain, len(longer), "sb") == 5 == \
        len(kv._pool.lookup(next_chain, cap))          # a's blocks, found by the map
    kv.free(a)                                        # a's blocks: cached, free
    filler = _seq("f", list(range(500, 540)))         # every free block: evicts a's
    assert kv.allocate_slots(filler, 40, kv.get_computed_blocks(filler))
    assert kv.num_used == kv.num_blocks
    assert len(kv._pool.lookup(chain, 5)) == 0
    assert kv.cached_prefix(next_chain, len(longer), "sb") == 0
    kv.free(b)
    assert b.bare_from == NO_BARE


@given(st.lists(st.integers(0, 3), min_size=0, max_size=40),
       st.lists(st.integers(0, 3), min_size=0, max_size=40), st.integers(-1, 12))
@settings(max_examples=300, deadline=None)
def test_chains_agree_on_as_many_blocks_as_their_tokens(a: list[int], b: list[int],
                                                        n: int) -> None:
    """`common_chain` of two prompts' hash chains is `common_blocks` of their tokens,
    whatever the bound (a small alphabet: long shared runs, differences anywhere)."""
    ta, tb = array("I", a), array("I", b)
    ca = extend_hash_chain(ta, len(ta), BS, [])
    cb = extend_hash_chain(tb, len(tb), BS, [])
    assert common_chain(ca, cb, n) == common_blocks(ta, tb, n, BS)
