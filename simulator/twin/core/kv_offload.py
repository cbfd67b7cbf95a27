"""A host-memory KV tier behind the twin's HBM pool, as vLLM's native CPU offloading
(`--kv-offloading-size GiB` → `OffloadingConnector`, vLLM 0.32) does it.

What vLLM does (its `kv_connector/v1/offloading/scheduler.py`, `v1/kv_offload/cpu/`):
- stores are write-through: every step, each scheduled request's newly full blocks
  (past its prefix-cache hit) are copied GPU → CPU, deferred to the next step's start on
  a separate CUDA stream, so they overlap compute; a chunk already in the tier is only
  touched. A full tier evicts its least recently used chunks (`cache_policy: lru`).
- loads: at admission, past the HBM prefix hit, the connector finds the run of
  consecutive chunks the tier holds; the request gets GPU blocks for them and waits
  (`WAITING_FOR_REMOTE_KVS`) while they are copied CPU → GPU asynchronously; other
  requests keep stepping. It is then scheduled with those tokens computed.
- the step stalls only when a GPU block is reused while its store is still in flight
  (`jobs_to_flush`); here: when the GPU → CPU channel is behind at a step's start.
A chunk is one GPU block (vLLM's default `blocks_per_chunk`); LMCache differs in its
256-token chunks (a partial chunk is not stored), not modelled.

Pure state and arithmetic: the engine calls it; nothing here reads a clock.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

GIB = 1 << 30


@dataclass(frozen=True, slots=True)
class HostLinkTimes:
    """Copy bandwidth per direction (bytes/s) and a fixed cost per transfer job (s)."""

    h2d_bytes_s: float
    d2h_bytes_s: float
    latency_s: float

    def load_s(self, nbytes: float) -> float:
        return self.latency_s + nbytes / self.h2d_bytes_s

    def store_s(self, nbytes: float) -> float:
        return self.latency_s + nbytes / self.d2h_bytes_s


def tier_blocks(offload_gib: float, block_bytes: float) -> int:
    """Chunks the tier holds: vLLM's `cpu_bytes_to_use` = GiB × 2³⁰ over a block's KV."""
    return int(offload_gib * GIB // block_bytes)


class HostTier:
    """LRU set of block-chain hashes held in host memory, never above `capacity` blocks."""

    __slots__ = ("_lru", "capacity", "evicted")

    def __init__(self, capacity: int) -> None:
        if capacity <= 0:
            raise ValueError(f"host tier capacity must be > 0 blocks, got {capacity}")
        self.capacity = capacity
        self._lru: OrderedDict[int, None] = OrderedDict()   # head = evicted first
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._lru)

    def __contains__(self, block_hash: int) -> bool:
        return block_hash in self._lru

    def store(self, hashes: Sequence[int]) -> int:
        """Offer blocks to the tier; returns how many were new (copied). Present ones
        are touched; a full tier evicts its least recently used."""
        lru, cap = self._lru, self.capacity
        new = 0
        for h in hashes:
            if h in lru:
                lru.move_to_end(h)
                continue
            if len(lru) >= cap:
                lru.popitem(last=False)
                self.evicted += 1
            lru[h] = None
            new += 1
        return new

    def lookup(self, hashes: Sequence[int], start: int, stop: int) -> int:
        """Consecutive blocks of `hashes[start:stop]` held, from `start`; touches them."""
        lru = self._lru
        n = 0
        for h in hashes[start:stop]:
            if h not in lru:
                break
            lru.move_to_end(h)
            n += 1
        return n
