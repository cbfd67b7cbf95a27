"""Client-side routing over several real endpoints (`--endpoint URL1 --endpoint URL2 …`).

What a user with two boxes and no router in front of them does: the load generator
itself spreads sessions over the URLs with one of `twin.router`'s policies. The client
knows what it sent: requests in flight per URL, and each session's home (affinity); it
does not know a server's cache, so `prefix_aware` is the twin's (or a real router's)
alone. Replies and failures carry the replica's index (`"0"`, `"1"`, … in the order
the URLs were given), which the rows record; the manifest lists the URLs by index.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence

from simulator.endpoints.base import Endpoint, EndpointError, LLMRequest, LLMResponse
from simulator.scenario.model import FleetSpec
from simulator.twin.fleet.router import ReplicaLoad, Router, RouterConfig
from simulator.util.jsontypes import JSONObject
from simulator.util.redact import redact_url


class RoutedEndpoint:
    name = "routed"
    simulated = False

    def __init__(self, children: Sequence[Endpoint], urls: Sequence[str], router: Router) -> None:
        if len(children) != len(urls) or len(children) < 2:
            raise ValueError("a routed endpoint needs one child per URL, at least two")
        if router.needs_prefix:
            raise ValueError("prefix-cache routing needs the servers' cache state; on the "
                             "client use round_robin, least_loaded or session_affinity")
        self.children = list(children)
        self.simulated = all(c.simulated for c in children)   # fakes in tests: virtual time
        self.replica_urls = list(urls)       # scraped one by one (`run.drive._background`)
        self.router = router
        self.in_flight = [0] * len(children)
        self.routed = [0] * len(children)

    def describe(self) -> JSONObject:
        return {"kind": "routed", "route": self.router.config.policy,
                "replicas": [{**c.describe(), "replica": str(i), "url": redact_url(u)}
                             for i, (c, u) in enumerate(zip(self.children, self.replica_urls,
                                                            strict=True))]}

    async def aclose(self) -> None:
        for c in self.children:
            await c.aclose()

    async def send(self, request: LLMRequest) -> LLMResponse:
        loads = [ReplicaLoad(in_flight=n) for n in self.in_flight]
        i = self.router.pick(request.session_id, loads)
        return await send_on(self.children[i], i, self.in_flight, self.routed, request)


async def send_on(child: Endpoint, i: int, in_flight: list[int], routed: list[int],
                  request: LLMRequest,
                  send: Callable[[LLMRequest], Awaitable[LLMResponse]] | None = None,
                  ) -> LLMResponse:
    """Send on replica i (with `send` in place of `child.send`: what the router
    computed goes along), counted in flight meanwhile; the reply's extra (or the error)
    names the replica, which the agent writes into the row."""
    in_flight[i] += 1
    routed[i] += 1
    try:
        resp = await (send or child.send)(request)
    except EndpointError as exc:
        exc.replica = str(i)
        raise
    finally:
        in_flight[i] -= 1
    return dataclasses.replace(resp, extra={**resp.extra, "replica": str(i)})


def router_config(fleet: FleetSpec) -> RouterConfig:
    """The scenario's `fleet` section as the router's settings."""
    return RouterConfig(policy=fleet.router, prefix_weight=fleet.prefix_weight,
                        queue_weight=fleet.queue_weight, kv_weight=fleet.kv_weight,
                        affinity_floor=fleet.affinity_floor,
                        affinity_tolerance=fleet.affinity_tolerance)
