"""The HTTP twin as prefill and decode instances behind one URL (`twin serve --pd P:D`).

What a client of a disaggregated deployment sees (vLLM's P/D proxy, llm-d, Dynamo): one
endpoint. Behind it D decode and P prefill real-time services (`TwinService`, each its
own engine); `place` routes a request as the in-process P/D twin does
(`endpoints/inprocess/pd.py`): decode instance by session affinity, Dynamo's
conditional disaggregation on what that instance has cached, and for a remote prefill
the prompt with one token to sample on a prefill instance first, then the decode
instance's request with a KV pull over the link. It returns the decode instance's
service and stream, which the server writes as any replica's; the client's TTFT
includes the prefill and the transfer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from simulator.twin.core.engine import TwinEngine
from simulator.twin.core.sampling import SamplingParams
from simulator.twin.fleet.router import ReplicaLoad, Router, RouterConfig
from simulator.twin.fleet.service import FleetService
from simulator.twin.fleet.view import cached_blocks
from simulator.twin.pd.link import LinkQueues
from simulator.twin.pd.policy import PDConfig, prefill_remote
from simulator.twin.serve.service import RequestStream, TwinService

_ONE_TOKEN = (0,)


def _load(svc: TwinService, hashes: Sequence[int], prompt_len: int) -> ReplicaLoad:
    e = svc.engine
    cached = used = 0
    if isinstance(e, TwinEngine):
        cached = cached_blocks(e, hashes, prompt_len) if hashes else 0
        used = e.kv_cache_manager.num_used
    return ReplicaLoad(in_flight=e.num_running() + e.num_waiting(), waiting=e.num_waiting(),
                       kv_usage=e.kv_usage(), cached_blocks=cached, active_blocks=used)


class PDService(FleetService):
    """D decode then P prefill services (the fleet's numbering), the routers, the link."""

    def __init__(self, decodes: Sequence[TwinService], prefills: Sequence[TwinService],
                 config: PDConfig, bytes_per_token: float,
                 affinity: RouterConfig | None = None) -> None:
        aff = dataclasses.replace(affinity or RouterConfig(), policy="session_affinity")
        super().__init__([*decodes, *prefills], Router(aff, len(decodes) + len(prefills)))
        self.decodes, self.prefills, self.config = list(decodes), list(prefills), config
        self.decode_router = Router(aff, len(decodes))
        self.prefill_router = Router(RouterConfig(policy=config.prefill_router), len(prefills))
        self.link = LinkQueues(config.link, bytes_per_token)
        self.remote = self.local = 0

    async def place(self, prompt: Sequence[int], plan: Sequence[int], session: str,
                    sampling: SamplingParams | None = None
                    ) -> tuple[TwinService, RequestStream]:
        """Prefill where Dynamo's rule says, then submit to the decode instance
        (`sampling`: what the request samples with, resolved)."""
        bs = self.decodes[0].engine.block_size
        hashes = self.chains.hashes(prompt, bs, session)
        n = len(prompt)
        di = self.decode_router.pick(session, [_load(s, (), n) for s in self.decodes])
        dec = self.decodes[di]
        self.routed[di] += 1
        hit = _load(dec, hashes, n).cached_blocks * bs
        if not prefill_remote(n, hit, self.config.max_local_prefill):
            self.local += 1
            return dec, dec.submit(prompt, plan, sampling=sampling)
        self.remote += 1
        pi = self.prefill_router.pick(session, [_load(s, hashes, n) for s in self.prefills],
                                      n // bs)
        pre = self.prefills[pi]
        self.routed[len(self.decodes) + pi] += 1
        first = pre.submit(prompt, _ONE_TOKEN, sampling=sampling)
        while not first.finished:
            first.changed.clear()
            await first.changed.wait()
        return dec, dec.submit(prompt, plan, sampling=sampling,
                              kv_transfer=self.link.puller((pi, di)))
