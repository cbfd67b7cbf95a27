"""A warm fleet probe with and without a round's fleet work, in one process.

Whole-process pairs (`sim_speed.py --team --before`) could not resolve these changes on a
VM whose speed swung ±25% from run to run, so this A/B runs both versions in one process
on the same warm state: after a warm-up probe (7 replicas, which fills the search's
shared caches as a `size --team` search's first fleet probe does), it runs the same
8-replica `prefix_aware` probe of `scenarios/claude-code-team.yaml` (256 sessions, warm
start) alternately old, new, new, old (`--reps` times), and prints each probe's CPU
seconds and new ÷ old over the sums (alternation cancels a drift in the machine's speed).

"old" (`--since fifth`, the default) puts back what main did before the fifth round:
- the router's view (`InProcessFleet.loads`) asking each replica's cache manager as
  `cached_prefix` did: a running request's blocks checked by generation as well as
  hash, and the two prompts' tokens compared whole (`common_blocks`) instead of a
  binary search on their hash chains;
- every request planned (`reply.plan_for`), none taken from the plans by request;
- each decode burst recomputing `burst_len` and the block room;
and the sixth round's two changes below. `--since sixth` puts back only those:
- the chosen engine hashing the prompt again (the router's chain not handed over);
- every reply's reference passes counted again (not kept with its plan).

    python benchmarks/fleet_probe_ab.py                 # 5-minute probes, 2 reps
    python benchmarks/fleet_probe_ab.py --since sixth --duration 600 --reps 1
"""

from __future__ import annotations

import argparse
import sys
import time
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import machine

from simulator.endpoints.base import LLMRequest
from simulator.endpoints.inprocess import twin as twin_mod
from simulator.endpoints.inprocess.fleet import InProcessFleet
from simulator.sweep.point import Point, Target, run_point
from simulator.twin.core import engine as engine_mod
from simulator.twin.core.block_pool import common_blocks
from simulator.twin.fleet.router import ReplicaLoad
from simulator.twin.fleet.view import replica_load
from simulator.twin.serve import reply

TWIN = "h100/qwen3-coder-30b-a3b-awq"


def old_cached_prefix(self: Any, hashes: Sequence[int], tokens: array[int], num_tokens: int,
                      key: str | None = None) -> int:
    """`KVCacheManager.cached_prefix` as it was before the round."""
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
        known = (self._pool.snapshot(seq.blocks[:seq.n_cached], seq.n_cached)
                 if seq.blocks else seq.hint)
        if known is not None:
            m = common_blocks(tokens, last[0], min(len(last[1]), known.shared, cap), bs)
            if m:
                hint = known._replace(shared=m)
    return len(self._pool.lookup(hashes, cap, hint))


def old_loads(self: Any, request: LLMRequest) -> tuple[list[ReplicaLoad], int, None]:
    """`InProcessFleet.loads` (prefix-aware) as it was before the round (no chain for
    the chosen engine: it hashes the prompt again)."""
    prompt = self.replicas[0].prompt_of(request)
    bs = self.replicas[0].engine.block_size
    hashes = self.chains.hashes(prompt, bs, request.session_id)
    loads = [replica_load(r.engine, self.in_flight[i],
                          old_cached_prefix(r.engine.kv_cache_manager, hashes, prompt,
                                            len(prompt), request.session_id))
             for i, r in enumerate(self.replicas)]
    return loads, len(prompt) // bs, None


def old_plan(self: Any, request: LLMRequest,
             prompt: array[int]) -> tuple[reply.PlannedReply, list[int | None]]:
    """Every request planned afresh (and its reference passes counted)."""
    return reply.plan_for(prompt, request.max_tokens, request.hints,
                          context_window=self.context_window, seed=self.seed), [None]


NEW = (InProcessFleet.loads, twin_mod.InProcessTwin._plan, engine_mod.TwinEngine._burst)


def old_burst(self: Any, k: int, t: float) -> int:
    """A burst that leaves nothing for the next: `burst_len` and the room again."""
    done: int = NEW[2](self, k, t)
    self._burst_left = None
    return done


def sixth_loads(self: Any, request: LLMRequest) -> tuple[list[ReplicaLoad], int, None]:
    """`InProcessFleet.loads` with no chain for the engine (it hashes the prompt)."""
    loads, blocks, _ = NEW[0](self, request)
    return loads, blocks, None


def sixth_plan(self: Any, request: LLMRequest,
               prompt: array[int]) -> tuple[reply.PlannedReply, list[int | None]]:
    """The plans by request, without the reference passes kept with them."""
    return NEW[1](self, request, prompt)[0], [None]


OLD = {"fifth": (old_loads, old_plan, old_burst), "sixth": (sixth_loads, sixth_plan, NEW[2])}


def use(old: bool, since: str = "fifth") -> None:
    paths = OLD[since] if old else NEW
    (InProcessFleet.loads, twin_mod.InProcessTwin._plan,  # type: ignore[method-assign]
     engine_mod.TwinEngine._burst) = paths  # type: ignore[method-assign]


def probe(replicas: int, duration: int, tag: str) -> float:
    """CPU seconds of one warm-start fleet probe."""
    p = Point("scenarios/claude-code-team.yaml",
              ("sessions=256", f"load.duration_s={duration}", "load.warm_start=true",
               f"fleet.replicas={replicas}", "fleet.router=prefix_aware"),
              str(Path("results") / "fleet-probe-ab"), tag, Target(twin=TWIN), temporary=True)
    c0 = time.process_time()
    run_point(p)
    return time.process_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=int, default=300, help="probe length, s (300)")
    ap.add_argument("--reps", type=int, default=2, help="old/new/new/old rounds (2)")
    ap.add_argument("--since", choices=sorted(OLD), default="fifth",
                    help="which round's work \"old\" takes out (and every later one's)")
    args = ap.parse_args()
    print(f"machine: {machine()}; old: main before the {args.since} round")
    use(False)
    print(f"warm-up probe (7 replicas): {probe(7, args.duration, 'warm'):.1f} CPU-s", flush=True)
    got: dict[str, list[float]] = {"old": [], "new": []}
    for i, old in enumerate([True, False, False, True] * args.reps):
        use(old, args.since)
        side = "old" if old else "new"
        got[side].append(probe(8, args.duration, f"p{i}"))
        print(f"{side} {got[side][-1]:.1f} CPU-s", flush=True)
    use(False)
    for side, v in got.items():
        print(f"{side}: {', '.join(f'{x:.1f}' for x in v)} (mean {sum(v) / len(v):.1f})")
    print(f"new ÷ old: {sum(got['new']) / sum(got['old']):.3f}")


if __name__ == "__main__":
    main()
