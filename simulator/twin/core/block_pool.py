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
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

ROOT_HASH = 0x5EED
# `lookup` maps hashes in chunks and stops at the first chunk with a miss: a replica or
# a request that shares only a prompt's head does not look up all of its tail
LOOKUP_CHUNK = 256
HINTED_CHUNK = 32         # the first chunk looked up past a `Snapshot`'s blocks
NO_HASH = -1              # a block without a hash (`hash()` never returns −1)
SMALL = 8                 # calls on at most this many blocks go block by block
SPARE_ENTRIES = 1024      # free-queue room beyond 2 × blocks between compactions
NO_BARE = 1 << 62         # `cache_blocks`: no block given was left without a hash

# block ids travel as array('q') (a request's table, a hit, an allocation): numpy reads
# them without a copy (`_ids`)
BlockIds = Sequence[int] | npt.NDArray[np.int64]


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


def common_chain(a: Sequence[int], b: Sequence[int], n: int) -> int:
    """The most leading blocks, at most n, on which two hash chains agree. Block i's
    hash covers every token up to its end, so two chains agree up to some block and
    differ from there on: a binary search finds it in O(log n) compares of two ints.
    `common_blocks` of the chains' token arrays gives the same count (barring a 64-bit
    hash collision, which the prefix cache itself would take for a hit)."""
    n = min(n, len(a), len(b))
    if n <= 0:
        return 0
    if a[n - 1] == b[n - 1]:
        return n
    lo, hi = 0, n - 1               # blocks before lo agree; block hi differs
    while lo < hi:
        mid = (lo + hi) // 2
        if a[mid] == b[mid]:
            lo = mid + 1
        else:
            hi = mid
    return lo


class BlockPool:
    """Fixed pool of KV blocks with reference counts, hashes and an LRU free queue.

    The free queue is a deque of its own making, with lazy deletion so that per-block
    work is numpy's: cached blocks freed go to the tail of an append-only array
    (`_queue`, read from `_head`); blocks freed without a hash (with `lifo_uncached`) are
    pushed on a stack (`_stack`, top first) that allocation empties before the queue. A
    block's `_slot` says where its live entry is (p + 1 in the queue, −(p + 1) on the
    stack, 0 in use), so touching a block only clears its slot and leaves a dead entry
    behind. `_cached` (hash → block) may keep entries of evicted blocks: one is live iff
    the block still holds that hash (`_hash`), so eviction never touches the dict.
    Every operation takes distinct block ids (as a request's blocks are).
    """

    __slots__ = ("_cached", "_gen", "_gen_np", "_hash", "_hash_np", "_head", "_n_cached",
                 "_num_free",
                 "_queue", "_queue_np", "_ref", "_ref_np", "_slot", "_slot_np", "_stack",
                 "_stack_np", "_tail", "_top", "block_size", "lifo_uncached", "num_blocks")

    def __init__(self, num_blocks: int, block_size: int, *, lifo_uncached: bool = True) -> None:
        if num_blocks <= 0 or block_size <= 0:
            raise ValueError(f"num_blocks and block_size must be > 0, got "
                             f"{num_blocks}, {block_size}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        # each table is an array (fast scalar access) with a numpy view (vectorised)
        self._ref = array("q", bytes(8 * num_blocks))
        self._ref_np = _view(self._ref)
        self._hash = array("q", [NO_HASH]) * num_blocks
        self._hash_np = _view(self._hash)
        # times each block was allocated (or its hash reset): a `Snapshot` of blocks is
        # still theirs while their generations are unchanged
        self._gen = _buffer(num_blocks)
        self._gen_np = _view(self._gen)
        self._slot = array("q", range(1, num_blocks + 1))    # block b at queue position b
        self._slot_np = _view(self._slot)
        self._queue = _buffer(self._capacity())
        self._queue_np = _view(self._queue)
        self._queue_np[:num_blocks] = np.arange(num_blocks)
        self._head, self._tail = 0, num_blocks
        self._stack = _buffer(self._capacity())
        self._stack_np = _view(self._stack)
        self._top = 0
        self._num_free = num_blocks
        self._cached: dict[int, int] = {}          # hash → block id (live or stale)
        self._n_cached = 0                         # blocks holding a hash
        # vLLM BlockPool.free_blocks (since PR 42656): blocks freed without a hash go to
        # the queue's head, reused before any cached block is evicted (False: every
        # freed block to the tail, the twin's rule before issue 37)
        self.lifo_uncached = lifo_uncached

    def _capacity(self) -> int:
        """Entries a queue or stack array holds: every block live plus as many freed
        since the last compaction."""
        return 2 * self.num_blocks + SPARE_ENTRIES

    # -- queries ---------------------------------------------------------------------
    @property
    def num_free(self) -> int:
        """Blocks allocatable now (truly free plus cached blocks nobody references)."""
        return self._num_free

    @property
    def num_used(self) -> int:
        return self.num_blocks - self._num_free

    def usage(self) -> float:
        """Fraction of blocks referenced by running requests (0..1)."""
        return (self.num_blocks - self._num_free) / self.num_blocks

    def num_cached(self) -> int:
        """Blocks currently findable by hash (in use or free)."""
        return self._n_cached

    def ref_count(self, block_id: int) -> int:
        return self._ref[block_id]

    def block_hash(self, block_id: int) -> int | None:
        h = self._hash[block_id]
        return None if h == NO_HASH else h

    def cached_block(self, block_hash: int) -> int | None:
        """The block cached under `block_hash`, if any (does not touch)."""
        b = self._cached.get(block_hash)
        return b if b is not None and self._hash[b] == block_hash else None

    def free_order(self) -> list[int]:
        """Free queue from head (next evicted) to tail; for tests and inspection."""
        slot, stack, queue = self._slot, self._stack, self._queue
        out = [stack[p] for p in range(self._top - 1, -1, -1) if slot[stack[p]] == -(p + 1)]
        out += [queue[p] for p in range(self._head, self._tail) if slot[queue[p]] == p + 1]
        return out

    def snapshot(self, block_ids: BlockIds, shared: int) -> Snapshot:
        """Remember a request's blocks (in chain order) for a `lookup` of a chain whose
        first `shared` hashes are that request's."""
        ids = _ids(block_ids).copy()        # not a view: the table may grow again
        return Snapshot(ids, self._gen_np[ids], shared)

    def lookup(self, hashes: Sequence[int], max_blocks: int,
               known: Snapshot | None = None) -> array[int]:
        """Blocks of the longest cached prefix: walk the chain until the first miss.

        `max_blocks` caps the hit (vLLM: (num_tokens − 1) // block_size, so at least one
        token is computed). Does not touch. With `known`, the leading blocks of the
        snapshot still holding their hash (allocated none since and hashed then: then
        the map names them for those hashes) are taken at once, and the walk goes on
        from the first that is not.
        """
        found = array("q")
        start = 0
        if known is not None:
            k = min(known.shared, len(known.ids), max_blocks, len(hashes))
            if k > 0:
                ids = known.ids[:k]
                moved = self._hash_np[ids] == NO_HASH
                moved |= self._gen_np[ids] != known.gens[:k]
                start = int(moved.argmax())     # (argmax: no `any`, which costs µs)
                if not moved[start]:
                    start = k
                found.frombytes(ids[:start].tobytes())
        # past a snapshot the next block is most likely new: a short first chunk
        self._walk(hashes, start, min(len(hashes), max_blocks),
                   HINTED_CHUNK if known is not None else LOOKUP_CHUNK, found)
        return found

    def count_held(self, hashes: Sequence[int], max_blocks: int, held: int) -> int:
        """`len(lookup(hashes, max_blocks, known))` where `known` is the first `held`
        blocks of a running request, none of them without a hash (`Seq.bare_from`), and
        the chain's first `held` hashes are theirs: those count as they are (no table
        is read for them: held blocks keep their hashes) and the map is walked after."""
        found: list[int] = []
        start = min(held, max_blocks, len(hashes))
        self._walk(hashes, start, min(len(hashes), max_blocks), HINTED_CHUNK, found)
        return start + len(found)

    def _walk(self, hashes: Sequence[int], lo: int, end: int, chunk: int,
              found: array[int] | list[int]) -> None:
        """Append to `found` the blocks cached under hashes[lo:end], up to the first
        miss, looked up a chunk at a time (the first `chunk` long, then LOOKUP_CHUNK)."""
        get, held_hash = self._cached.get, self._hash.__getitem__
        while lo < end:
            want = hashes[lo:min(lo + chunk, end)]
            lo += chunk
            chunk = LOOKUP_CHUNK
            part: list[int] = list(map(get, want))       # type: ignore[arg-type]
            whole = None not in part          # C-speed scans from here on
            if not whole:
                part = part[:part.index(None)]                  # type: ignore[arg-type]
            held = list(map(held_hash, part))     # a stale entry: its block moved on
            if held != want[:len(part)]:
                stale = next(i for i, (x, y) in enumerate(zip(held, want, strict=False))
                             if x != y)
                found.extend(part[:stale])
                break
            found.extend(part)
            if not whole:
                break

    def num_evictable(self, block_ids: Sequence[int]) -> int:
        """How many of `block_ids` sit in the free queue (touching them uses them up)."""
        return list(map(self._ref.__getitem__, block_ids)).count(0)   # C-speed loop

    # -- mutations -------------------------------------------------------------------
    def reset_prefix_cache(self) -> bool:
        """Forget every cached block hash (vLLM's `reset_prefix_cache`): the next request
        starts from a cold cache. Refused (False) while any block is referenced, as vLLM
        refuses while running requests hold blocks."""
        if self._num_free != self.num_blocks:
            return False
        self._cached.clear()
        self._hash_np[:] = NO_HASH
        self._gen_np += 1
        self._n_cached = 0
        return True

    def touch_if_room(self, block_ids: BlockIds, need: int) -> bool:
        """Touch `block_ids` if `need` blocks can then still be allocated, as
        `num_evictable` then `touch` do (False: nothing changed)."""
        ids = _ids(block_ids)
        r = self._ref_np[ids]
        queued = ids[r == 0]
        if need > self._num_free - len(queued):
            return False
        self._slot_np[queued] = 0
        self._num_free -= len(queued)
        self._ref_np[ids] = r + 1
        return True

    def touch(self, block_ids: BlockIds) -> None:
        """Take a reference on cached blocks (a prefix hit); pull free ones off the queue
        (their entries there die)."""
        if len(block_ids) <= SMALL:
            ref, slot = self._ref, self._slot
            for b in (block_ids.tolist() if isinstance(block_ids, np.ndarray) else block_ids):
                if ref[b] == 0:
                    slot[b] = 0
                    self._num_free -= 1
                ref[b] += 1
            return
        ids = _ids(block_ids)
        r = self._ref_np[ids]
        queued = ids[r == 0]
        self._slot_np[queued] = 0
        self._num_free -= len(queued)
        self._ref_np[ids] = r + 1

    def allocate(self, n: int) -> array[int] | None:
        """n fresh blocks from the free queue's head (their old hashes forgotten), or
        None when fewer than n are free."""
        if n > self._num_free:
            return None
        if n <= SMALL:
            return array("q", [self._take_one() for _ in range(n)])
        parts: list[npt.NDArray[np.int64]] = []
        need = self._take_stack(n, parts) if self._top else n
        if need:
            self._take_queue(need, parts)
        ids = np.concatenate(parts) if len(parts) > 1 else parts[0]
        self._slot_np[ids] = 0
        self._ref_np[ids] = 1
        self._gen_np[ids] += 1
        self._n_cached -= int(np.count_nonzero(self._hash_np[ids] != NO_HASH))
        self._hash_np[ids] = NO_HASH
        self._num_free -= n
        return array("q", ids.tobytes())

    def allocate_one(self) -> int | None:
        """One fresh block (the decode hot path), or None when none is free."""
        if not self._num_free:
            return None
        return self._take_one()

    def cache_block(self, block_id: int, block_hash: int) -> None:
        """Register a full block under its chain hash. A hash already held by another
        block keeps pointing there (the duplicate stays uncached, as in a lookup vLLM
        would return the first block anyway)."""
        self.cache_blocks((block_id,), (block_hash,))

    def cache_blocks(self, block_ids: Sequence[int], hashes: Sequence[int]) -> int:
        """`cache_block` for each pair of `block_ids` and `hashes`, in order. Returns the
        index of the first block left without a hash (a duplicate of a block that holds
        it), NO_BARE when none is."""
        if NO_HASH in hashes:
            raise ValueError(f"{NO_HASH} is no block hash (hash() never returns it)")
        held, cached = self._hash, self._cached
        get = cached.get
        added = 0
        for b, h in zip(block_ids, hashes, strict=True):
            if held[b] != NO_HASH:
                continue
            other = get(h)
            if other is not None and held[other] == h:
                continue
            cached[h] = b
            held[b] = h
            added += 1
        self._n_cached += added
        self._drop_stale()
        if added == len(block_ids):          # fresh blocks, all registered: the hot path
            return NO_BARE
        return next((i for i, b in enumerate(block_ids) if held[b] == NO_HASH), NO_BARE)

    def _drop_stale(self) -> None:
        """Drop the map's stale entries (an evicted block's) once it outgrows the pool
        (amortised over as many registrations)."""
        if len(self._cached) > self._capacity():
            held = self._hash
            self._cached = {h: b for h, b in self._cached.items() if held[b] == h}

    def free(self, block_ids: BlockIds) -> None:
        """Drop one reference from each block, in the given order; blocks reaching 0 go
        to the queue's tail (pass a request's blocks reversed: tail first), or, with
        `lifo_uncached`, those without a hash to its head, in the given order."""
        if len(block_ids) <= SMALL:
            self._free_small(block_ids)
            return
        ids = _ids(block_ids)
        r = self._ref_np[ids] - 1
        self._ref_np[ids] = r
        zero = ids[r == 0]
        if not len(zero):
            return
        self._num_free += len(zero)
        if self.lifo_uncached:
            bare = self._hash_np[zero] == NO_HASH
            if np.count_nonzero(bare):
                self._push(zero[bare])
                zero = zero[~bare]
        self._append(zero)

    # -- internals -------------------------------------------------------------------
    def _free_small(self, block_ids: BlockIds) -> None:
        """`free` for a few blocks, one at a time."""
        ref, held = self._ref, self._hash
        bare: list[int] = []
        for b in (block_ids.tolist() if isinstance(block_ids, np.ndarray) else block_ids):
            r = ref[b] - 1
            ref[b] = r
            if r == 0:
                self._num_free += 1
                if self.lifo_uncached and held[b] == NO_HASH:
                    bare.append(b)
                else:
                    self._append_one(b)
        if bare:
            self._push(np.array(bare, dtype=np.int64))

    def _append_one(self, b: int) -> None:
        if self._tail == len(self._queue):
            self._compact_queue()
        self._queue[self._tail] = b
        self._tail += 1
        self._slot[b] = self._tail

    def _append(self, ids: npt.NDArray[np.int64]) -> None:
        """Blocks to the queue's tail, in order."""
        k = len(ids)
        if self._tail + k > len(self._queue):
            self._compact_queue()
        t = self._tail
        self._queue_np[t:t + k] = ids
        self._slot_np[ids] = np.arange(t + 1, t + k + 1)
        self._tail = t + k

    def _push(self, ids: npt.NDArray[np.int64]) -> None:
        """Blocks to the queue's head, the first of `ids` ending at the head (vLLM
        `prepend_n`)."""
        k = len(ids)
        if self._top + k > len(self._stack):
            self._compact_stack()
        t = self._top
        top_first = ids[::-1]
        self._stack_np[t:t + k] = top_first
        self._slot_np[top_first] = -np.arange(t + 1, t + k + 1)
        self._top = t + k

    def _take_one(self) -> int:
        """Take the head block (one is free): reference it and forget its hash."""
        slot = self._slot
        b = -1
        while self._top:
            self._top -= 1
            p = self._top
            if slot[self._stack[p]] == -(p + 1):
                b = self._stack[p]
                break
        if b < 0:
            queue = self._queue
            while True:
                p = self._head
                self._head = p + 1
                if slot[queue[p]] == p + 1:
                    b = queue[p]
                    break
        slot[b] = 0
        self._ref[b] = 1
        self._gen[b] += 1
        if self._hash[b] != NO_HASH:
            self._hash[b] = NO_HASH
            self._n_cached -= 1
        self._num_free -= 1
        return b

    def _take_stack(self, need: int, parts: list[npt.NDArray[np.int64]]) -> int:
        """Take up to `need` live blocks off the stack, top first; returns how many are
        still needed."""
        top, stack, slot = self._top, self._stack_np, self._slot_np
        while need and top:
            lo = max(0, top - 2 * need - 64)
            seg = stack[lo:top][::-1]
            live = np.flatnonzero(slot[seg] == -np.arange(top, lo, -1))
            if len(live) >= need:
                live = live[:need]
                top -= int(live[-1]) + 1
            else:
                top = lo
            parts.append(seg[live])
            need -= len(live)
        self._top = top
        return need

    def _take_queue(self, need: int, parts: list[npt.NDArray[np.int64]]) -> None:
        """Take `need` live blocks from the queue's head (at least that many are)."""
        head, tail, queue, slot = self._head, self._tail, self._queue_np, self._slot_np
        while need:
            hi = min(tail, head + 2 * need + 64)
            seg = queue[head:hi]
            live = np.flatnonzero(slot[seg] == np.arange(head + 1, hi + 1))
            if len(live) >= need:
                live = live[:need]
                head += int(live[-1]) + 1
            else:
                head = hi
            parts.append(seg[live])
            need -= len(live)
        self._head = head

    def _compact_queue(self) -> None:
        """Move the queue's live entries to a fresh array's start (dead ones dropped)."""
        seg = self._queue_np[self._head:self._tail]
        live = seg[self._slot_np[seg] == np.arange(self._head + 1, self._tail + 1)]
        self._queue = _buffer(self._capacity())
        self._queue_np = _view(self._queue)
        k = len(live)
        self._queue_np[:k] = live
        self._slot_np[live] = np.arange(1, k + 1)
        self._head, self._tail = 0, k

    def _compact_stack(self) -> None:
        """Move the stack's live entries to a fresh array's bottom (dead ones dropped)."""
        seg = self._stack_np[:self._top]
        live = seg[self._slot_np[seg] == -np.arange(1, self._top + 1)]
        self._stack = _buffer(self._capacity())
        self._stack_np = _view(self._stack)
        k = len(live)
        self._stack_np[:k] = live
        self._slot_np[live] = -np.arange(1, k + 1)
        self._top = k


class Snapshot(NamedTuple):
    """A request's blocks as `BlockPool.snapshot` saw them."""

    ids: npt.NDArray[np.int64]       # block ids, in chain order
    gens: npt.NDArray[np.int64]      # their generations then
    shared: int                      # leading blocks whose hashes the chain shares


def _buffer(n: int) -> array[int]:
    return array("q", bytes(8 * n))


def _view(a: array[int]) -> npt.NDArray[np.int64]:
    """A numpy view of an int64 array (the array is never resized: it is replaced)."""
    return np.frombuffer(a, dtype=np.int64)


def _ids(block_ids: BlockIds) -> npt.NDArray[np.int64]:
    """Block ids as int64 numpy (an array('q')'s buffer is read in place: the view
    must not outlive the call while the array may grow)."""
    if isinstance(block_ids, np.ndarray):
        return block_ids
    if isinstance(block_ids, array) and block_ids.typecode == "q":
        return np.frombuffer(block_ids, dtype=np.int64)
    return np.array(block_ids, dtype=np.int64)
