"""The endpoint a run sends to, from the scenario and what the command asked for.

One table from client name to transport (`lean`, `aiohttp`, `sdk`), one choice between
the in-process twin (no URL), a fleet of twins (`fleet.replicas` > 1), a client-routed
set of URLs, and one HTTP endpoint. The run layer passes an `EndpointTarget`; nothing
here knows about results directories or manifests.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict

from simulator.endpoints.base import Endpoint
from simulator.endpoints.http.transport import AttemptLimits
from simulator.endpoints.routed import RoutedEndpoint, router_config
from simulator.endpoints.wire.dialects import dialect
from simulator.errors import InputError
from simulator.scenario.model import Scenario
from simulator.twin.fleet.router import Router
from simulator.twin.model.profiles import parse_twin
from simulator.util.redact import check_endpoint_url, check_key, read_key_file


@dataclass(frozen=True)
class EndpointTarget:
    """What the command line says about the endpoint (None: the scenario's own)."""

    url: str | None = None                  # None: the in-process twin
    urls: tuple[str, ...] = ()              # several URLs: routed on the client
    twin: str | None = None                 # "hardware/model" of the in-process twin
    spec: str | None = None                 # the twin's speculative decoding
    twin_overrides: Mapping[str, Any] = field(default_factory=dict)
    api_key_file: str | None = None
    client: str | None = None               # lean | aiohttp | sdk


def make_endpoint(s: Scenario, target: EndpointTarget) -> Endpoint:
    """The endpoint for `target`: the in-process twin (or fleet of twins) without a URL,
    a client-routed set of endpoints for several URLs, else one HTTP endpoint."""
    if target.url is None:
        return _in_process(s, target)
    if len(target.urls) > 1:
        return routed_endpoint(s, target.urls,
                               lambda u: make_endpoint(s, replace(target, url=u, urls=())))
    try:
        check_endpoint_url(target.url)
        key_file = target.api_key_file
        key = check_key(read_key_file(key_file), f"--api-key-file {key_file}") if key_file \
            else check_key(os.environ.get(s.endpoint.api_key_env, ""), f"${s.endpoint.api_key_env}")
    except ValueError as exc:
        raise InputError(str(exc)) from None
    return http_endpoint(target.url, key, s, target.client or s.endpoint.client)


def _in_process(s: Scenario, target: EndpointTarget) -> Endpoint:
    # deferred: the twin (engine, tokenizer, profiles) loads only for an in-process run
    from simulator.endpoints.inprocess.twin import InProcessTwin
    hw, model = parse_twin(target.twin) if target.twin else (s.twin.hardware, s.twin.model)
    over = {**s.twin.engine_overrides(), **target.twin_overrides}
    spec = target.spec or s.twin.spec
    if s.fleet.prefill > 0:    # deferred: as the twin above
        return _pd(s, hw, model, spec, over)
    if s.fleet.replicas > 1:   # deferred: as the twin above
        from simulator.endpoints.inprocess.fleet import InProcessFleet
        from simulator.endpoints.routed import router_config
        return InProcessFleet(hw, model, replicas=s.fleet.replicas,
                              router=router_config(s.fleet), spec=spec, seed=s.seed,
                              overrides=over)
    return InProcessTwin(hw, model, spec=spec, seed=s.seed, overrides=over)


def _pd(s: Scenario, hw: str, model: str, spec: str, over: dict[str, Any]) -> Endpoint:
    """Prefill/decode instances of the twin (`fleet.prefill` > 0); InputError, one line,
    for settings that cannot serve (a link the card lacks, a bad bandwidth)."""
    # deferred: the twin loads only for an in-process run
    from simulator.endpoints.inprocess.pd import InProcessPD, link_spec
    from simulator.twin.pd.policy import PDConfig
    f = s.fleet
    try:
        cfg = PDConfig(f.prefill, f.replicas,
                       link_spec(hw, f.kv_link, f.kv_link_gb_s, f.kv_link_latency_s),
                       f.max_local_prefill, f.prefill_router)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    p_over = None if f.prefill_tp is None else {**over, "tensor_parallel_size": f.prefill_tp}
    return InProcessPD(hw, model, config=cfg, affinity=router_config(f), spec=spec,
                       seed=s.seed, overrides=over, prefill_overrides=p_over)


def routed_endpoint(s: Scenario, urls: Sequence[str],
                    make_child: Callable[[str], Endpoint]) -> Endpoint:
    """Several `--endpoint` URLs routed on the client by the scenario's `fleet.router`
    (InputError, one line, for prefix_aware: the client cannot see server caches)."""
    if s.fleet.router in ("prefix_aware", "kv_cost"):
        raise InputError(f"--route {s.fleet.router} needs the servers' cache state; on the "
                         "client use round_robin, least_loaded or session_affinity")
    if len(set(urls)) != len(urls):
        raise InputError("--endpoint: the same URL twice (each replica once)")
    router = Router(router_config(s.fleet), len(urls))
    return RoutedEndpoint([make_child(u) for u in urls], list(urls), router)


class ClientSettings(TypedDict):
    """The keyword arguments every HTTP client takes (seconds)."""

    timeout_s: float
    connect_timeout_s: float
    limits: AttemptLimits


# deferred, each client below: a run loads only the client it uses (aiohttp and the
# official SDKs cost seconds to import)
def _lean(url: str, key: str, api: str, kw: ClientSettings) -> Endpoint:
    from simulator.endpoints.http.lean import LeanEndpoint  # deferred: see above
    return LeanEndpoint(url, key, dialect=dialect(api), **kw)


def _aiohttp(url: str, key: str, api: str, kw: ClientSettings) -> Endpoint:
    from simulator.endpoints.http.aiohttp_client import AiohttpEndpoint  # deferred: aiohttp
    return AiohttpEndpoint(url, key, dialect=dialect(api), **kw)


def _sdk(url: str, key: str, api: str, kw: ClientSettings) -> Endpoint:
    if api == "openai-chat":
        from simulator.endpoints.sdk.openai import OpenAISDKEndpoint  # deferred: the SDK
        return OpenAISDKEndpoint(url, key or "none", **kw)
    from simulator.endpoints.sdk.anthropic import AnthropicSDKEndpoint  # deferred: the SDK
    return AnthropicSDKEndpoint(url, key or "none", **kw)


# client name → constructor (url, key, api, keyword arguments); each imported when used
CLIENTS: dict[str, Callable[[str, str, str, ClientSettings], Endpoint]] = {
    "lean": _lean, "aiohttp": _aiohttp, "sdk": _sdk}


def http_endpoint(url: str, key: str, s: Scenario, client: str) -> Endpoint:
    """The HTTP endpoint for `client` (lean | aiohttp | sdk) speaking `s.endpoint.api`,
    with the scenario's timeouts and per-attempt limits."""
    t, e = s.timeouts, s.endpoint
    limits = AttemptLimits(first_byte_s=t.first_byte_s, idle_s=t.idle_s or e.timeout_s,
                           total_s=t.total_s, max_response_bytes=t.max_response_bytes,
                           retry_after_max_s=t.retry_after_max_s)
    kw: ClientSettings = {"timeout_s": limits.idle_s, "connect_timeout_s": e.connect_timeout_s,
                          "limits": limits}
    make = CLIENTS.get(client)
    if make is None:
        raise InputError(f"--client must be one of {', '.join(CLIENTS)}, got {client!r}")
    return make(url, key, e.api, kw)
