"""Prometheus exposition of the HTTP twin with vLLM's metric names.

Counters and gauges are read from the engine at scrape time (a custom collector over
`TwinService.snapshot()`); latency histograms are observed when a request finishes,
from the server's own emission times (wall seconds, as vLLM measures them). Each server
gets its own `CollectorRegistry`, so tests can run several side by side.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TypedDict

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from simulator.protocol.vllm_buckets import E2E_BUCKETS, ITL_BUCKETS, TTFT_BUCKETS
from simulator.twin.core.engine import TwinEngine
from simulator.twin.core.types import EngineCounters
from simulator.twin.serve.faults import FaultInjector
from simulator.twin.serve.service import RequestStream, ServiceSnapshot, TwinService

if TYPE_CHECKING:
    from simulator.twin.fleet.service import FleetService

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _HistogramKw(TypedDict):
    """What every histogram of the registry shares: its label and its registry."""

    labelnames: list[str]
    registry: CollectorRegistry

# (vLLM name without _total, the EngineCounters field it reads, help)
_Counter = tuple[str, Callable[[EngineCounters], float], str]
_COUNTERS: tuple[_Counter, ...] = (
    ("vllm:prefix_cache_queries", lambda c: c.prefix_cache_queries,
     "Prefix cache queries (tokens)."),
    ("vllm:prefix_cache_hits", lambda c: c.prefix_cache_hits, "Prefix cache hits (tokens)."),
    ("vllm:num_preemptions", lambda c: c.preemptions, "Cumulative number of preemptions."),
    ("vllm:prompt_tokens", lambda c: c.prompt_tokens, "Number of prefill tokens processed."),
    ("vllm:generation_tokens", lambda c: c.generation_tokens, "Number of generation tokens."),
)
_SPEC_COUNTERS: tuple[_Counter, ...] = (
    ("vllm:spec_decode_num_drafts", lambda c: c.spec_drafts,
     "Number of spec decoding drafts."),
    ("vllm:spec_decode_num_draft_tokens", lambda c: c.spec_draft_tokens,
     "Number of draft tokens."),
    ("vllm:spec_decode_num_accepted_tokens", lambda c: c.spec_accepted_tokens,
     "Number of accepted tokens."),
)

# the host KV tier's counters, named as vLLM 0.32's OffloadingConnector exposes them
# (`kv_connector/v1/offloading/metrics.py`, `v1/metrics/loggers.py`); only with a tier.
# Transfer times are the twin's engine seconds (vLLM's: measured copy time).
_TIER_COUNTERS: tuple[_Counter, ...] = (
    ("vllm:kv_offload_load_bytes", lambda c: c.offload_load_bytes,
     "Total bytes loaded from offload storage to GPU."),
    ("vllm:kv_offload_load_time", lambda c: c.offload_load_time_s,
     "Total load time from offload storage to GPU, in seconds."),
    ("vllm:kv_offload_store_bytes", lambda c: c.offload_store_bytes,
     "Total bytes stored from GPU to offload storage."),
    ("vllm:kv_offload_store_time", lambda c: c.offload_store_time_s,
     "Total store time from GPU to offload storage, in seconds."),
    ("vllm:external_prefix_cache_queries", lambda c: c.external_prefix_cache_queries,
     "External prefix cache queries from KV connector (tokens)."),
    ("vllm:external_prefix_cache_hits", lambda c: c.external_prefix_cache_hits,
     "External prefix cache hits from KV connector (tokens)."),
)
# (vLLM name, the snapshot's gauge, help)
_GAUGES: tuple[tuple[str, Callable[[ServiceSnapshot], float], str], ...] = (
    ("vllm:num_requests_running", lambda s: s.num_running, "Requests in model execution."),
    ("vllm:num_requests_waiting", lambda s: s.num_waiting, "Requests waiting."),
    ("vllm:kv_cache_usage_perc", lambda s: s.kv_usage, "KV-cache usage (1 = 100%)."),
)


def _tier_families(counters: EngineCounters, labels: list[str],
                   values: list[str]) -> Iterator[Metric]:
    for name, read, doc in _TIER_COUNTERS:
        fam = CounterMetricFamily(name, doc, labels=labels)
        fam.add_metric(values, float(read(counters)))
        yield fam
    src = CounterMetricFamily("vllm:prompt_tokens_cached_by_source",
                              "Prefix-cache hit tokens by the cache tier that supplied them.",
                              labels=[*labels, "source"])
    src.add_metric([*values, "device"], float(counters.prefix_cache_hits))
    src.add_metric([*values, "host"], float(counters.external_prefix_cache_hits))
    yield src


class _EngineCollector:
    """Reads the engine's counters and gauges at scrape time."""

    def __init__(self, service: TwinService | FleetService, model: str, info: dict[str, str],
                 spec_enabled: bool, faults: FaultInjector | None) -> None:
        self._service, self._model, self._info = service, model, info
        self._spec, self._faults = spec_enabled, faults

    def describe(self) -> list[Metric]:
        return []   # unchecked collector: families are built at collect time

    def collect(self) -> Iterator[Metric]:
        snap = self._service.snapshot()
        labels, values = ["model_name"], [self._model]
        # a fleet (`fleet_service`): one series per replica, labelled `replica`, for
        # the counters and queue gauges (a scraper's sum over label sets is the fleet's)
        service = self._service
        series = [(labels, values, snap)] if isinstance(service, TwinService) else [
            ([*labels, "replica"], [*values, str(i)], s)
            for i, s in enumerate(service.snapshots())]
        rows = _COUNTERS + (_SPEC_COUNTERS if self._spec else ())
        for name, read, doc in rows:
            fam = CounterMetricFamily(name, doc, labels=series[0][0])
            for _, vals, s in series:
                fam.add_metric(vals, float(read(s.counters)))
            yield fam
        if self._spec:
            pos = CounterMetricFamily("vllm:spec_decode_num_accepted_tokens_per_pos",
                                      "Accepted tokens per draft position.",
                                      labels=[*labels, "position"])
            for i, n in enumerate(snap.counters.spec_accepted_per_pos):
                pos.add_metric([*values, str(i)], float(n))
            yield pos
        engine = service.engine             # a fleet: its first replica's
        if isinstance(engine, TwinEngine) and engine.host_tier is not None:
            yield from _tier_families(snap.counters, labels, values)
        for name, gauge, doc in _GAUGES:
            g = GaugeMetricFamily(name, doc, labels=series[0][0])
            for _, vals, s in series:
                g.add_metric(vals, float(gauge(s)))
            yield g
        cfg = GaugeMetricFamily("vllm:cache_config_info", "Information of the cache config.",
                                labels=["block_size", "num_gpu_blocks"])
        cfg.add_metric([str(snap.block_size), str(snap.num_blocks)], 1.0)
        yield cfg
        info = GaugeMetricFamily("endurance_twin_info", "This endpoint is the simulated twin.",
                                 labels=["simulated", *self._info])
        info.add_metric(["true", *self._info.values()], 1.0)
        yield info
        if self._faults is not None:
            f = CounterMetricFamily("endurance_twin_faults_injected", "Faults injected.",
                                    labels=["kind"])
            for kind, n in self._faults.injected.items():
                f.add_metric([kind.value], float(n))
            yield f


class TwinMetrics:
    """The registry behind `GET /metrics` and the finish hook that feeds its histograms."""

    def __init__(self, model: str) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._model = model
        kw: _HistogramKw = {"labelnames": ["model_name"], "registry": self.registry}
        self.ttft = Histogram("vllm:time_to_first_token_seconds",
                              "Histogram of time to first token in seconds.",
                              buckets=TTFT_BUCKETS, **kw).labels(model)
        self.itl = Histogram("vllm:inter_token_latency_seconds",
                             "Histogram of inter-token latency in seconds.",
                             buckets=ITL_BUCKETS, **kw).labels(model)
        self.e2e = Histogram("vllm:e2e_request_latency_seconds",
                             "Histogram of e2e request latency in seconds.",
                             buckets=E2E_BUCKETS, **kw).labels(model)
        self.queue = Histogram("vllm:request_queue_time_seconds",
                               "Histogram of time spent in WAITING phase for request.",
                               buckets=E2E_BUCKETS, **kw).labels(model)

    def attach(self, service: TwinService | FleetService, info: dict[str, str], *, spec_enabled: bool,
               faults: FaultInjector | None) -> None:
        self.registry.register(_EngineCollector(service, self._model, info, spec_enabled,
                                                faults))

    def observe(self, stream: RequestStream) -> None:
        """Finish hook: TTFT, one ITL per emission after the first, e2e, queue time
        (arrival → first scheduled; wall seconds)."""
        times = stream.emit_times
        if times:
            self.ttft.observe(times[0] - stream.received)
            for a, b in itertools.pairwise(times):
                self.itl.observe(b - a)
        if stream.finished_at is not None:
            self.e2e.observe(stream.finished_at - stream.received)
        if stream.queue_s is not None:
            self.queue.observe(stream.queue_s)

    def render(self) -> bytes:
        return bytes(generate_latest(self.registry))
