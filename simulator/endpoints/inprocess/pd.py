"""Prefill/decode disaggregation in-process: P prefill and D decode twins on one
virtual clock, with KV transfers between them (docs/disaggregation.md).

Each instance is an `InProcessTwin` (its own engine, KV pool, prefix cache, driver
task), as a fleet's replicas are. A request is routed to a decode instance by session
affinity (`twin.fleet.router`, the fleet's rule), which keeps the session's KV between
turns. Then Dynamo's conditional disaggregation (`twin.pd.policy.prefill_remote`): if
the part of the prompt not cached on that decode instance is at most the threshold,
the decode instance prefills it itself, exactly as an aggregated replica would;
otherwise a prefill instance (least loaded or prefix-aware) runs the prompt with one
token to sample (vLLM's P/D proxy sends max_tokens=1 to the prefiller), and the decode
instance then admits the request, pulls the prompt's KV past its own prefix-cache hit
over the link (`twin.pd.link`; vLLM's NixlConnector) and samples the first token after
recomputing the prompt's last one. With a threshold above every prompt the decode
instances are an aggregated fleet under session affinity, row for row.

Reply extras (the rows' columns): `prefill_where` (remote | local), `kv_transfer_bytes`,
`kv_transfer_wait_s` (decode admission → KV pulled, link queue included), `queue_s`
(prefill queue + decode queue) and `replica` (the decode instance); a remote one also
carries `prefill_queue_s` and `prefill_s` (its prefill instance's queue and compute). A remote reply's
cache-read tokens are the prefill instance's hit: the prompt tokens nobody computed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from functools import partial
from typing import Any

from simulator.endpoints.base import LLMRequest, LLMResponse, ReplyExtra, Usage
from simulator.endpoints.inprocess.fleet import (
    FleetTimeline,
    TwinGroup,
    priced_profile,
    summed_stats,
)
from simulator.endpoints.inprocess.twin import InProcessTwin, TwinSetup, twin_setup
from simulator.endpoints.routed import send_on
from simulator.twin.core.stats import EngineStats
from simulator.twin.fleet.router import Router, RouterConfig
from simulator.twin.fleet.view import SessionChains, cached_blocks, replica_load, replica_stats
from simulator.twin.model.profiles import load_hardware
from simulator.twin.pd.link import LinkQueues
from simulator.twin.pd.policy import LinkSpec, PDConfig, prefill_remote
from simulator.twin.serve.wire import ReplyUsage
from simulator.util.jsontypes import JSONObject

AUTO_ORDER = ("infiniband", "roce", "nvlink", "xgmi", "pcie")


def link_spec(hardware: str, kind: str, gb_s: float | None = None,
              latency_s: float | None = None) -> LinkSpec:
    """The card's `kind` KV link from its hardware profile ("auto": the first of
    `AUTO_ORDER` it has), bandwidth (GB/s) and
    latency overridden where given; ValueError, one line, for a link the card lacks."""
    links = load_hardware(hardware).kv_links
    if kind == "auto":        # the network a P/D deployment across nodes uses, if any
        kind = next((k for k in AUTO_ORDER if k in links), "infiniband")
    base = links.get(kind)
    if gb_s is not None and latency_s is not None:
        return LinkSpec(kind, gb_s * 1e9, latency_s)
    if base is None:
        have = ", ".join(sorted(links)) or "none"
        raise ValueError(f"hardware {hardware} has no KV link {kind!r} (it has: {have}); "
                         "give fleet.kv_link_gb_s and fleet.kv_link_latency_s")
    return LinkSpec(kind, gb_s * 1e9 if gb_s is not None else base.bytes_s,
                    latency_s if latency_s is not None else base.latency_s)


class InProcessPD(TwinGroup):
    name = "twin-pd"
    simulated = True

    def __init__(self, hardware: str, model: str, *, config: PDConfig,
                 affinity: RouterConfig | None = None, spec: str = "off", seed: int = 0,
                 context_window: int | None = None,
                 overrides: dict[str, Any] | None = None,
                 prefill_overrides: dict[str, Any] | None = None) -> None:
        """`prefill_overrides`: the prefill instances' own (another TP degree); None:
        the decode instances' `overrides`."""
        self.hardware, self.model, self.config = hardware, model, config

        d_setup = twin_setup(hardware, model, spec=spec, context_window=context_window,
                             overrides=overrides)         # one for every decode instance
        p_setup = d_setup if prefill_overrides is None else twin_setup(
            hardware, model, spec=spec, context_window=context_window,
            overrides=prefill_overrides)                  # the prefill role's own TP

        def twin(setup: TwinSetup) -> InProcessTwin:
            return InProcessTwin(hardware, model, spec=spec, seed=seed, setup=setup)

        self.decodes = [twin(d_setup) for _ in range(config.decode)]
        self.prefills = [twin(p_setup) for _ in range(config.prefill)]
        # what a request samples with where it sets nothing: one model on every instance
        # (the manifest states it, as for one twin and a fleet)
        self.sampling_defaults = self.decodes[0].sampling_defaults
        shared = self.decodes[0].tokenizer
        for r in self.instances:
            r.tokenizer = shared
        aff = dataclasses.replace(affinity or RouterConfig(), policy="session_affinity")
        self.decode_router = Router(aff, config.decode)
        self.prefill_router = Router(RouterConfig(policy=config.prefill_router),
                                     config.prefill)
        self.in_flight = [0] * config.decode
        self.routed = [0] * config.decode
        self.p_in_flight = [0] * config.prefill
        self.p_routed = [0] * config.prefill
        bpt = self.decodes[0].config.cache.kv_bytes_per_token
        self.link = LinkQueues(config.link, bpt)
        self.remote = self.local = 0
        self.chains = SessionChains()
        self.timeline = FleetTimeline(self.instances)

    @property
    def instances(self) -> list[InProcessTwin]:
        """Decode instances first, then prefill ones (the engine log's numbering)."""
        return self.decodes + self.prefills

    @property
    def members(self) -> list[InProcessTwin]:
        return self.instances

    # -- what runs and the recorder read ----------------------------------------------

    def describe(self) -> JSONObject:
        c = self.config
        d = self.decodes[0].describe()
        d.update(kind="twin-pd", prefill=c.prefill, decode=c.decode,
                 replicas=c.cards, router="session_affinity",
                 prefill_router=c.prefill_router, max_local_prefill=c.max_local_prefill,
                 kv_link={"kind": c.link.kind, "bytes_s": c.link.bytes_s,
                          "latency_s": c.link.latency_s})
        priced = priced_profile(d.get("profile"), self._price)   # P + D cards rented
        if priced is not None:
            d["profile"] = priced
        return d

    def _price(self, decode_usd: float) -> float:
        """$/h of the P + D instances rented; a prefill instance of another TP degree
        costs its own GPUs (the same card either way)."""
        c = self.config
        if not self.prefills or (self.prefills[0].perf.layout.tp
                                 == self.decodes[0].perf.layout.tp):
            return decode_usd * c.cards
        p = self.prefills[0].perf
        return decode_usd * c.decode + p.hardware.usd_per_hour * p.layout.tp * c.prefill

    def stats(self) -> dict[str, Any]:
        """Counters summed over every instance, per-instance entries and the `pd` block."""
        out = summed_stats([r.stats() for r in self.instances], {})
        d = self.config.decode
        out["replicas"] = [
            {"replica": i, "role": "decode" if i < d else "prefill",
             "requests": self.routed[i] if i < d else self.p_routed[i - d],
             **replica_stats(r.engine)} for i, r in enumerate(self.instances)]
        out["router"] = "session_affinity"
        out["session_moves"] = self.decode_router.moves
        out["pd"] = self.pd_stats()
        return out

    def pd_stats(self) -> dict[str, str | float | None]:
        """The run's P/D figures: utilisation of each side (busy engine seconds over the
        run's span, mean over the side's instances), remote share, link totals."""
        span = max((r.engine.now for r in self.instances), default=0.0)

        def util(side: list[InProcessTwin]) -> float | None:
            if span <= 0:
                return None
            return sum(r.engine.counters.busy_s for r in side) / (span * len(side))

        c, lc = self.config, self.link.counters
        total = self.remote + self.local
        return {"prefill_instances": c.prefill, "decode_instances": c.decode,
                "max_local_prefill": c.max_local_prefill, "link": c.link.kind,
                "link_bytes_s": c.link.bytes_s, "link_latency_s": c.link.latency_s,
                "remote_prefills": self.remote, "local_prefills": self.local,
                "remote_prefill_share": self.remote / total if total else None,
                "prefill_utilization": util(self.prefills),
                "decode_utilization": util(self.decodes),
                "kv_transfers": lc.transfers, "kv_transfer_bytes": lc.bytes,
                "kv_transfer_busy_s": lc.busy_s}

    def engine_stats(self) -> EngineStats:
        """Every instance's counters summed (KV peak: the hottest instance's)."""
        per = [r.engine_stats() for r in self.instances]
        return EngineStats.summed(per)

    # -- routing ----------------------------------------------------------------------
    async def send(self, request: LLMRequest) -> LLMResponse:
        decodes = self.decodes
        prompt = decodes[0].prompt_of(request)
        bs = decodes[0].engine.block_size
        sid = request.session_id
        hashes = self.chains.hashes(prompt, bs, sid)
        loads = [replica_load(r.engine, self.in_flight[i]) for i, r in enumerate(decodes)]
        di = self.decode_router.pick(sid, loads)
        dec = decodes[di]
        hit = cached_blocks(dec.engine, hashes, len(prompt), sid) * bs
        if not prefill_remote(len(prompt), hit, self.config.max_local_prefill):
            self.local += 1
            resp = await send_on(dec, di, self.in_flight, self.routed, request,
                                 partial(dec.send, prefix_hashes=hashes))
            return dataclasses.replace(resp, extra={**resp.extra, "prefill_where": "local"})
        self.remote += 1
        return await send_on(dec, di, self.in_flight, self.routed, request,
                             partial(self._disaggregated, di=di, hashes=hashes,
                                     prompt_len=len(prompt)))

    async def _disaggregated(self, request: LLMRequest, *, di: int, hashes: list[int],
                             prompt_len: int) -> LLMResponse:
        """Prefill on a prefill instance, then decode on instance `di` with a KV pull."""
        sent = asyncio.get_running_loop().time()
        pi = self._pick_prefill(request.session_id, hashes, prompt_len)
        pre = self.prefills[pi]
        self.p_in_flight[pi] += 1
        self.p_routed[pi] += 1
        try:
            pres = await pre.prefill(request, prefix_hashes=hashes)
        finally:
            self.p_in_flight[pi] -= 1
        dec = self.decodes[di]
        resp = await dec.send(request, prefix_hashes=hashes,
                              kv_transfer=self.link.puller((pi, di)))
        x = resp.extra
        start = sent if pres.first_scheduled is None else max(sent, pres.first_scheduled)
        p_queue = start - sent
        p_compute = (pres.finished or start) - start
        tokens = int(x.get("remote_tokens", 0))
        usage = ReplyUsage(prompt_len, pres.cached_tokens, dec.engine.block_size,
                           resp.usage.output_tokens or 0).as_dict()
        extra: ReplyExtra = {**x, "queue_s": p_queue + float(x.get("queue_s") or 0.0),
                 "prefill_where": "remote", "prefill_instance": pi,
                 "prefill_queue_s": p_queue, "prefill_s": p_compute,
                 "kv_transfer_bytes": int(round(tokens * self.link.bytes_per_token)),
                 "kv_transfer_wait_s": float(x.get("kv_transfer_wait_s", 0.0))}
        return dataclasses.replace(resp, timing=dataclasses.replace(resp.timing, sent=sent),
                                   usage=Usage.from_mapping(usage), extra=extra)

    def _pick_prefill(self, session: str, hashes: list[int], prompt_len: int) -> int:
        router = self.prefill_router
        if router.needs_prefix:
            loads = [replica_load(r.engine, self.p_in_flight[i],
                                  cached_blocks(r.engine, hashes, prompt_len, session))
                     for i, r in enumerate(self.prefills)]
        else:
            loads = [replica_load(r.engine, self.p_in_flight[i])
                     for i, r in enumerate(self.prefills)]
        bs = self.prefills[0].engine.block_size
        return router.pick(session, loads, prompt_len // bs)


def infinite_link(kind: str = "ideal") -> LinkSpec:
    """A link that moves any KV instantly (tests, bounds)."""
    return LinkSpec(kind, math.inf, 0.0)
