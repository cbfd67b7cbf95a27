"""Routing policies for a fleet of replicas: which replica serves the next request.

Pure logic over what a router can see of each replica (`ReplicaLoad`): requests it
routed there and that are not answered yet, and — where the replica reports them — its
waiting queue, its KV usage and how many leading blocks of this request it holds in
its prefix cache. The same `Router` picks for the in-process twin fleet, the HTTP twin
fleet and the client-side router over several real URLs, so the twin predicts what a
given policy does to a real fleet.

Policies:
- `round_robin`: replica k mod R for the k-th request (a plain L4/L7 balancer): every
  turn of a session lands on another replica than its previous turn when R > 1.
- `least_loaded`: fewest requests in flight (ties: lowest index); llm-d's queue
  scorer alone, or LiteLLM's least-busy.
- `session_affinity`: a session stays on the replica its first request went to (the
  least loaded then; among equals, the one homing the fewest sessions), as a sticky
  header or llm-d's session-affinity scorer does — unless that replica is *saturated*
  and another is not; the session then moves to the least loaded replica and stays.
  Saturated (`RouterConfig`): at least `affinity_floor` in flight and more than
  (1 + `affinity_tolerance`) × the fleet's mean in flight; or, where the replica
  reports them, requests waiting while its KV usage is at or above
  `affinity_kv_usage` (it is KV-bound with a queue).
- `prefix_aware`: llm-d's precise prefix-cache scorer with its load scorers, max-score
  picker. Each replica scores
      w_prefix × matched_blocks / request_blocks
    + w_queue  × (max_q − q) / (max_q − min_q)     (1 for all when every q is equal)
    + w_kv     × (1 − kv_usage)
  and the highest score wins (ties: fewest in flight, then lowest index). The weights
  3 : 2 : 2 are llm-d's precise-prefix-cache-aware guide's scheduling profile
  (precise-prefix-cache-scorer 3, kv-cache-utilization-scorer 2, queue-scorer 2); the
  scores are llm-d's: the longest consecutive run of the request's block hashes found
  in the replica's cache over the request's blocks, min-max normalised queue depth, and
  free KV share. q is the replica's waiting queue, as llm-d's queue scorer reads it from
  vLLM's metrics (the twin's engines report it); where a replica reports none, the
  requests in flight that the router sent there stand in.
- `kv_cost`: Dynamo's KV router, which weighs the same two forces as a cost in blocks
  instead (`dynamo_cost`: overlap weight 1.0 × blocks to prefill + the decode blocks
  the replica would then hold; lowest wins, temperature 0), so load counts by the KV
  its sessions hold rather than by request count.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Policy = Literal["round_robin", "least_loaded", "session_affinity", "prefix_aware",
                 "kv_cost"]
POLICIES: tuple[Policy, ...] = ("round_robin", "least_loaded", "session_affinity",
                                "prefix_aware", "kv_cost")
# llm-d guides/precise-prefix-cache-aware: scorer weights of the default profile
PREFIX_WEIGHT, QUEUE_WEIGHT, KV_WEIGHT = 3.0, 2.0, 2.0
DYNAMO_OVERLAP_WEIGHT = 1.0     # Dynamo KV router: --kv-overlap-score-weight default


@dataclass(frozen=True, slots=True)
class ReplicaLoad:
    """What the router knows of one replica when a request comes in."""

    in_flight: int                   # routed there by this router, not yet answered
    waiting: int | None = None       # queued, not yet scheduled (None: not reported)
    kv_usage: float | None = None    # KV blocks in use, 0..1 (None: not reported)
    cached_blocks: int = 0           # leading blocks of this request in its cache
    active_blocks: int = 0           # KV blocks its running requests hold (Dynamo)


@dataclass(frozen=True, slots=True)
class RouterConfig:
    policy: Policy = "round_robin"
    prefix_weight: float = PREFIX_WEIGHT
    queue_weight: float = QUEUE_WEIGHT
    kv_weight: float = KV_WEIGHT
    affinity_floor: int = 4           # a replica with fewer in flight is never saturated
    affinity_tolerance: float = 1.0   # … nor one within (1 + this) × the mean in flight
    affinity_kv_usage: float = 0.95   # KV-bound: this usage with requests waiting

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"router {self.policy!r}: expected one of {', '.join(POLICIES)}")


class Router:
    """Picks a replica per request; holds the round-robin cursor and session map."""

    def __init__(self, config: RouterConfig, replicas: int) -> None:
        if replicas < 1:
            raise ValueError(f"replicas must be ≥ 1, got {replicas}")
        self.config = config
        self.replicas = replicas
        self._cursor = itertools.count()
        self._home: dict[str, int] = {}
        self._homed = [0] * replicas         # sessions whose home each replica is
        self.moves = 0                   # session_affinity: sessions moved off a hot replica

    @property
    def needs_prefix(self) -> bool:
        """Whether `pick` reads `cached_blocks` (the caller may skip the lookups)."""
        return self.config.policy in ("prefix_aware", "kv_cost")

    def pick(self, session_id: str, loads: Sequence[ReplicaLoad], request_blocks: int = 0) -> int:
        """The replica (index into `loads`) for one request of `session_id`."""
        if len(loads) != self.replicas:
            raise ValueError(f"{len(loads)} loads for {self.replicas} replicas")
        policy = self.config.policy
        if self.replicas == 1:
            return 0
        if policy == "round_robin":
            return next(self._cursor) % self.replicas
        if policy == "least_loaded":
            return least_loaded(loads)
        if policy == "session_affinity":
            return self._affine(session_id, loads)
        if policy == "kv_cost":
            costs = [dynamo_cost(x, request_blocks) for x in loads]
            return min(range(len(loads)), key=lambda i: (costs[i], loads[i].in_flight, i))
        return max_score(prefix_scores(loads, request_blocks, self.config), loads)


    def _affine(self, session_id: str, loads: Sequence[ReplicaLoad]) -> int:
        home = self._home.get(session_id)
        if home is None:
            home = self._home[session_id] = self._placement(loads)
            self._homed[home] += 1
            return home
        if saturated(loads, home, self.config):
            best = self._placement(loads)
            if best != home and not saturated(loads, best, self.config):
                self._home[session_id] = best
                self._homed[home] -= 1
                self._homed[best] += 1
                self.moves += 1
                return best
        return home

    def _placement(self, loads: Sequence[ReplicaLoad]) -> int:
        """Least loaded; among equals the replica homing the fewest sessions (idle
        replicas between turns would otherwise all tie and take every session at 0)."""
        homed = self._homed
        return min(range(len(loads)),
                   key=lambda i: (loads[i].in_flight, loads[i].waiting or 0, homed[i], i))


def least_loaded(loads: Sequence[ReplicaLoad]) -> int:
    """Fewest in flight, then fewest waiting (where reported), then lowest index."""
    return min(range(len(loads)), key=lambda i: (loads[i].in_flight, loads[i].waiting or 0, i))


def saturated(loads: Sequence[ReplicaLoad], i: int, cfg: RouterConfig) -> bool:
    """The session-affinity rebalance rule (see the module docstring)."""
    r = loads[i]
    mean = sum(x.in_flight for x in loads) / len(loads)
    if r.in_flight >= cfg.affinity_floor and r.in_flight > (1 + cfg.affinity_tolerance) * mean:
        return True
    return bool(r.waiting) and r.kv_usage is not None and r.kv_usage >= cfg.affinity_kv_usage


def prefix_scores(loads: Sequence[ReplicaLoad], request_blocks: int,
                  cfg: RouterConfig) -> list[float]:
    """llm-d's weighted scorer sum per replica (higher is better)."""
    qs = [x.in_flight if x.waiting is None else x.waiting for x in loads]
    lo, hi = min(qs), max(qs)
    out = []
    for x, q in zip(loads, qs, strict=True):
        prefix = min(x.cached_blocks, request_blocks) / request_blocks if request_blocks > 0 else 0.0
        queue = 1.0 if hi == lo else (hi - q) / (hi - lo)
        kv = 1.0 - (x.kv_usage or 0.0)
        out.append(cfg.prefix_weight * prefix + cfg.queue_weight * queue + cfg.kv_weight * kv)
    return out


def max_score(scores: Sequence[float], loads: Sequence[ReplicaLoad]) -> int:
    """llm-d's max-score picker, ties to the least loaded then the lowest index."""
    return min(range(len(scores)), key=lambda i: (-scores[i], loads[i].in_flight, i))


def dynamo_cost(load: ReplicaLoad, request_blocks: int,
                overlap_weight: float = DYNAMO_OVERLAP_WEIGHT) -> float:
    """Dynamo's KV-router cost of a replica (lower is better): blocks it would have to
    prefill, weighted, plus the decode blocks it would then hold."""
    prefill = max(request_blocks - load.cached_blocks, 0)
    return overlap_weight * prefill + load.active_blocks + request_blocks
