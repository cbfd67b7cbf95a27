"""What a router in front of twin engines sees of each one, read without changing it.

A precise prefix-cache scorer (llm-d's, fed by vLLM's KV events; Dynamo's KV indexer)
knows which block hashes every replica holds. The twin's engines are in the same
process, so the fleet reads each engine's block pool directly: the request's block hash
chain (as the engine itself would compute it at admission) and, per replica, how many of
its leading blocks are cached there. Nothing here touches an LRU order or a counter.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Sequence

from simulator.twin.core.block_pool import common_blocks, extend_hash_chain
from simulator.twin.core.engine import TwinEngine
from simulator.twin.fleet.router import ReplicaLoad


def block_hashes(prompt: Sequence[int], block_size: int) -> list[int]:
    """The chained hashes of the prompt's full blocks (`kv_cache.extend_hash_chain`)."""
    tokens = prompt if isinstance(prompt, array) else array("I", prompt)
    return extend_hash_chain(tokens, len(tokens), block_size, [])


class SessionChains:
    """`block_hashes` for a router that sees sessions: each session's last prompt and
    chain are kept (LRU, `max_sessions`), so a follow-up prompt hashes only the blocks
    past what it shares with them (a new session: with the newest one, the shared
    head), as the engines seed theirs (`KVCacheManager._seed_hashes`). Same chains."""

    def __init__(self, max_sessions: int = 1024) -> None:
        self._chains: OrderedDict[str, tuple[array[int], list[int]]] = OrderedDict()
        self._max = max_sessions

    def hashes(self, prompt: Sequence[int], block_size: int, session: str) -> list[int]:
        """The prompt's chain, seeded from the session's last prompt (or the newest)."""
        tokens = prompt if isinstance(prompt, array) else array("I", prompt)
        last = self._chains.get(session)
        if last is None and self._chains:
            last = next(reversed(self._chains.values()))
        chain: list[int] = []
        if last is not None:
            m = common_blocks(tokens, last[0], len(last[1]), block_size)
            chain = last[1][:m]
        extend_hash_chain(tokens, len(tokens), block_size, chain)
        self._chains[session] = (tokens, chain)
        self._chains.move_to_end(session)
        if len(self._chains) > self._max:
            self._chains.popitem(last=False)
        return chain


def cached_blocks(engine: TwinEngine, hashes: Sequence[int], prompt_len: int,
                  session: str | None = None) -> int:
    """Leading blocks of a prompt of `prompt_len` tokens (hash chain `hashes`) that the
    engine's prefix cache would hit now (capped as vLLM caps a hit: one token computed).
    With its `session` (the engines' prefix key) the blocks the session's last request
    on this engine held are checked first (the same count, without walking the hash
    map over them)."""
    return engine.kv_cache_manager.cached_prefix(hashes, prompt_len, session)


def replica_load(engine: TwinEngine, in_flight: int, cached: int = 0) -> ReplicaLoad:
    """The router's view of one engine."""
    return ReplicaLoad(in_flight=in_flight, waiting=engine.num_waiting(),
                       kv_usage=engine.kv_usage(), cached_blocks=cached,
                       active_blocks=engine.kv_cache_manager.num_used)


def replica_stats(engine: TwinEngine) -> dict[str, int | float]:
    """One engine's counters for the fleet summary (vLLM meanings, tokens)."""
    c = engine.counters
    return {"prefix_cache_queries": c.prefix_cache_queries,
            "prefix_cache_hits": c.prefix_cache_hits, "preemptions": c.preemptions,
            "requests_finished": c.requests_finished, "prompt_tokens": c.prompt_tokens,
            "generation_tokens": c.generation_tokens, "kv_usage_peak": engine.kv_usage_peak}
