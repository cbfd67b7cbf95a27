"""A fleet of in-process twins behind one router, on one virtual clock.

R `InProcessTwin` replicas, each with its own engine (KV cache, scheduler, counters)
and its own driver task; the virtual-time loop interleaves the drivers (each advances
its engine only up to the loop's next timer, which includes the other drivers'
wake-ups), so the replicas share one clock. Every request is tokenized once, routed by
`twin.router.Router` from what the router can see of each replica at that moment
(`twin.fleet`: requests in flight, waiting queue, KV usage, cached prefix blocks), and
sent to that replica unchanged: with R = 1 the run is the single engine's, row for row.
Replies carry the replica's index in `extra["replica"]` (the rows' `replica` column).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from functools import partial
from typing import Any

from simulator.endpoints.base import BackgroundTask, LLMRequest, LLMResponse
from simulator.endpoints.inprocess.twin import InProcessTwin, twin_setup
from simulator.endpoints.routed import send_on
from simulator.records.prometheus import MetricsRow
from simulator.twin.core.stats import EngineStats
from simulator.twin.fleet.router import ReplicaLoad, Router, RouterConfig
from simulator.twin.fleet.view import SessionChains, cached_blocks, replica_load, replica_stats
from simulator.util.jsontypes import JSONObject, JSONValue
from simulator.util.numbers import to_float


class FleetTimeline:
    """The replicas' engine logs as one: rows tagged with their replica."""

    def __init__(self, replicas: list[InProcessTwin]) -> None:
        self._replicas = replicas

    @property
    def offset_s(self) -> float:
        return self._replicas[0].timeline.offset_s

    @offset_s.setter
    def offset_s(self, value: float) -> None:
        for r in self._replicas:
            r.timeline.offset_s = value


def priced_profile(profile: JSONValue, price: Callable[[float], float]) -> JSONValue:
    """A twin's `describe()["profile"]` with its card's $/h replaced by `price` of it
    (a copy: a group rents several cards), or as it is when it names no price."""
    hw = profile.get("hardware") if isinstance(profile, dict) else None
    if not isinstance(profile, dict) or not isinstance(hw, dict) \
            or hw.get("usd_per_hour") is None:
        return profile
    out = copy.deepcopy(profile)
    card = out["hardware"]
    if isinstance(card, dict):          # it is: a copy of `hw`
        card["usd_per_hour"] = price(to_float(hw["usd_per_hour"]))
    return out


SUMMED_COUNTERS = ("prefix_cache_queries", "prefix_cache_hits", "preemptions",
                   "num_gpu_blocks", "kv_capacity_tokens", "spec_drafts", "spec_accepted_tokens")


def summed_stats(per: list[dict[str, Any]], out: dict[str, Any]) -> dict[str, Any]:
    """`out` with the members' counters summed (KV peak: the hottest member's; the
    block size: the first's)."""
    for key in SUMMED_COUNTERS:
        out[key] = sum(p.get(key, 0) for p in per)
    out["kv_usage_peak"] = max(p["kv_usage_peak"] for p in per)
    out["block_size"] = per[0]["block_size"]
    return out


class TwinGroup:
    """What several in-process twins on one clock (a fleet's replicas, P/D's instances)
    do alike for the run: their driver tasks, one engine log tagged by member, closing."""

    timeline: FleetTimeline

    @property
    def members(self) -> list[InProcessTwin]:
        raise NotImplementedError

    def background(self) -> list[BackgroundTask]:
        return [f for r in self.members for f in r.background()]

    def continue_timeline(self, offset_s: float) -> None:
        """A resumed run: every member's engine log continues from `offset_s`."""
        self.timeline.offset_s = offset_s

    def timeline_rows(self) -> list[MetricsRow]:
        return [{**row, "replica": i} for i, r in enumerate(self.members)
                for row in r.timeline_rows()]

    async def aclose(self) -> None:
        for r in self.members:
            await r.aclose()


class InProcessFleet(TwinGroup):
    name = "twin-fleet"
    simulated = True

    def __init__(self, hardware: str, model: str, *, replicas: int, router: RouterConfig,
                 spec: str = "off", seed: int = 0, context_window: int | None = None,
                 overrides: dict[str, Any] | None = None) -> None:
        if replicas < 1:
            raise ValueError(f"replicas must be ≥ 1, got {replicas}")
        self.hardware, self.model = hardware, model
        setup = twin_setup(hardware, model, spec=spec, context_window=context_window,
                           overrides=overrides)           # one for every replica
        self.replicas = [InProcessTwin(hardware, model, spec=spec, seed=seed, setup=setup)
                         for _ in range(replicas)]
        shared = self.replicas[0].tokenizer      # one tokenizer cache for the fleet
        for r in self.replicas:
            r.tokenizer = shared
        self.router = Router(router, replicas)
        self.in_flight = [0] * replicas
        self.routed = [0] * replicas              # requests sent to each replica
        self.timeline = FleetTimeline(self.replicas)
        self.chains = SessionChains()             # the router's view of prompts' blocks
        self.sampling_defaults = self.replicas[0].sampling_defaults   # same model on each

    @property
    def members(self) -> list[InProcessTwin]:
        return self.replicas

    # -- what runs and the recorder read ----------------------------------------------

    def describe(self) -> JSONObject:
        d = self.replicas[0].describe()
        d.update(kind="twin-fleet", replicas=len(self.replicas),
                 router=self.router.config.policy)
        # the fleet rents R cards: its price per hour (runs._price reads this)
        priced = priced_profile(d.get("profile"), lambda usd: usd * len(self.replicas))
        if priced is not None:
            d["profile"] = priced
        return d

    def stats(self) -> dict[str, Any]:
        """Fleet counters (sums; KV peak is the hottest replica's), one entry per replica."""
        per = [r.stats() for r in self.replicas]
        out = summed_stats(per, dict(per[0]) if len(per) == 1 else {})
        out["replicas"] = [{"replica": i, "requests": self.routed[i],
                            **replica_stats(r.engine)} for i, r in enumerate(self.replicas)]
        out["router"] = self.router.config.policy
        out["session_moves"] = self.router.moves
        return out

    def engine_stats(self) -> EngineStats:
        """The fleet's counters, typed: one replica's own, else sums (KV peak: the
        hottest replica's; per-position speculation counters are per replica only)."""
        per = [r.engine_stats() for r in self.replicas]
        if len(per) == 1:
            return per[0]
        return EngineStats.summed(per)

    # -- routing ----------------------------------------------------------------------
    def loads(self, request: LLMRequest) -> tuple[list[ReplicaLoad], int, list[int] | None]:
        """Each replica's load as the router sees it now, the request's blocks and
        (prefix-aware routers) their hash chain, which the chosen engine takes."""
        if not self.router.needs_prefix:
            return [replica_load(r.engine, self.in_flight[i])
                    for i, r in enumerate(self.replicas)], 0, None
        prompt = self.replicas[0].prompt_of(request)
        bs = self.replicas[0].engine.block_size
        hashes = self.chains.hashes(prompt, bs, request.session_id)
        loads = [replica_load(r.engine, self.in_flight[i],
                              cached_blocks(r.engine, hashes, len(prompt), request.session_id))
                 for i, r in enumerate(self.replicas)]
        return loads, len(prompt) // bs, hashes

    async def send(self, request: LLMRequest) -> LLMResponse:
        if len(self.replicas) == 1:
            return await send_on(self.replicas[0], 0, self.in_flight, self.routed, request)
        loads, blocks, hashes = self.loads(request)
        i = self.router.pick(request.session_id, loads, blocks)
        replica = self.replicas[i]
        return await send_on(replica, i, self.in_flight, self.routed, request,
                             partial(replica.send, prefix_hashes=hashes))


