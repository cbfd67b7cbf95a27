"""Where a hybrid model's prefix hits go: an `endurance run` on the twin, counting the
admissions whose saved linear-attention state had been kept and then evicted before
they came, and those whose attention blocks run past their state hit.

Run: `python benchmarks/hybrid_state_probe.py run SCENARIO --twin a40/qwen3.8-27b-awq
--sessions 32 --turns 20 [--set twin.prefix_cache_retention_interval=dense]` (any
`endurance` arguments; about 20 s for that case). It wraps the KV cache manager's
admission to record, before each admission, the longest hit the states ever kept would
give (`kept`, ignoring eviction) beside the hit it gets; nothing else changes.
"""

from __future__ import annotations

import collections
import contextlib
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simulator.twin.core import kv_cache_manager as km

STATS: collections.Counter[str] = collections.Counter()
KEPT: set[int] = set()


def _wrap() -> None:
    cache_blocks, admit = km.KVCacheManager.cache_blocks, km.KVCacheManager._admit

    def recording_cache_blocks(self: Any, s: Any, num_tokens: int, *,
                               step_end_only: bool = False) -> None:
        before = set(self._pool._cached)
        cache_blocks(self, s, num_tokens, step_end_only=step_end_only)
        KEPT.update(set(self._pool._cached) - before)

    def recording_admit(self: Any, s: Any, n: int, hit_blocks: list[int]) -> bool:
        found = self._pool.lookup(s.hashes, (s.num_tokens - 1) // self.block_size) \
            if s.hashes else []
        ideal = next((j + 1 for j in range(len(found) - 1, -1, -1)
                      if all(km._state_hash(s.hashes[j], g) in KEPT
                             for g in range(max(self.state_blocks, 1)))), 0)
        ok: bool = admit(self, s, n, hit_blocks)
        if ok and self.state_aligned:
            STATS["admissions"] += 1
            if len(hit_blocks) < ideal:
                STATS["kept state evicted before the admission"] += 1
                STATS["blocks of hit lost to those evictions"] += ideal - len(hit_blocks)
            if len(found) > len(hit_blocks):
                STATS["attention blocks beyond the state hit"] += 1
        return ok

    km.KVCacheManager.cache_blocks = recording_cache_blocks   # type: ignore[method-assign]
    km.KVCacheManager._admit = recording_admit                 # type: ignore[method-assign]


def main() -> None:
    _wrap()
    from simulator.cli import main as cli  # after the wrap: the run is what it wraps
    with contextlib.suppress(SystemExit):     # report after the run's own exit
        cli(sys.argv[1:])
    for key, value in STATS.items():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main()
