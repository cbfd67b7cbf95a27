"""The HTTP twin as a fleet: R real-time engine services behind one URL and a router.

What a user behind llm-d or a LiteLLM router sees: one endpoint, R replicas. Each
replica is a `TwinService` (its own engine, KV cache and driver task); `pick` routes a
request with `twin.router.Router` from each engine's state (running + waiting as its
in-flight count, waiting queue, KV usage, the request's cached prefix blocks there) and
returns the replica's service, which the server then uses exactly as the single twin's.
Sessions are keyed, for affinity, by the `x-session-id` header when the client sends
one, else by the conversation's first message (what makes a session's prompts unique
behind a shared system prompt) — the server never sees the client's session ids.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence

from simulator.twin.core.engine import TwinEngine
from simulator.twin.core.types import Engine
from simulator.twin.fleet.router import ReplicaLoad, Router
from simulator.twin.fleet.view import SessionChains, cached_blocks
from simulator.twin.serve.service import ServiceSnapshot, TwinService


def session_key(body: Mapping[str, object], headers: Mapping[str, str]) -> str:
    """The affinity key of a request (see the module docstring)."""
    explicit = headers.get("x-session-id")
    if explicit:
        return explicit
    messages = body.get("messages")
    first = messages[0] if isinstance(messages, list) and messages else None
    raw = json.dumps(first, sort_keys=True, default=str).encode()
    return hashlib.blake2b(raw, digest_size=8).hexdigest()


class FleetService:
    """R services and the router in front of them."""

    def __init__(self, services: Sequence[TwinService], router: Router) -> None:
        if len(services) != router.replicas:
            raise ValueError(f"{len(services)} services for {router.replicas} replicas")
        self.services = list(services)
        self.router = router
        self.routed = [0] * len(services)
        self.chains = SessionChains()

    # what the server and its writers read of a service
    @property
    def instant(self) -> bool:
        return self.services[0].instant

    @property
    def time_scale(self) -> float:
        return self.services[0].time_scale

    @property
    def engine(self) -> Engine:
        return self.services[0].engine

    def pick(self, prompt: Sequence[int], session: str) -> TwinService:
        """The service of the replica that serves this request."""
        loads: list[ReplicaLoad] = []
        hashes: list[int] = []
        bs = self.services[0].engine.block_size
        if self.router.needs_prefix:
            hashes = self.chains.hashes(prompt, bs, session)
        for svc in self.services:
            e = svc.engine
            cached = (cached_blocks(e, hashes, len(prompt))
                      if hashes and isinstance(e, TwinEngine) else 0)
            used = e.kv_cache_manager.num_used if isinstance(e, TwinEngine) else 0
            loads.append(ReplicaLoad(in_flight=e.num_running() + e.num_waiting(),
                                     waiting=e.num_waiting(), kv_usage=e.kv_usage(),
                                     cached_blocks=cached, active_blocks=used))
        i = self.router.pick(session, loads, len(prompt) // bs)
        self.routed[i] += 1
        return self.services[i]

    def debug_record(self, request_id: str) -> dict[str, object] | None:
        for i, svc in enumerate(self.services):
            rec = svc.debug_record(request_id)
            if rec is not None:
                return {**rec, "replica": str(i)}
        return None

    def snapshots(self) -> list[ServiceSnapshot]:
        return [s.snapshot() for s in self.services]

    def snapshot(self) -> ServiceSnapshot:
        """The fleet as one engine: counters and queues summed, KV usage the mean."""
        snaps = self.snapshots()
        c = snaps[0].counters
        # the integer fields of `EngineCounters` by `dataclasses.fields` (a new counter
        # is summed without a change here); the float ones are the first replica's
        summed = dataclasses.replace(c, **{
            f.name: sum(getattr(s.counters, f.name) for s in snaps)
            for f in dataclasses.fields(c) if isinstance(getattr(c, f.name), int)})
        return ServiceSnapshot(summed, sum(s.num_running for s in snaps),
                               sum(s.num_waiting for s in snaps),
                               sum(s.kv_usage for s in snaps) / len(snaps),
                               snaps[0].block_size, sum(s.num_blocks for s in snaps))

    async def run(self) -> None:
        """Drive every replica until cancelled."""
        await asyncio.gather(*(s.run() for s in self.services))
