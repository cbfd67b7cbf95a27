"""The load generator's own Prometheus metrics (`--metrics-port`), beside vLLM's.

Every journaled row becomes counter increments and histogram observations in a
registry of its own (never the process-global one), served by `prometheus_client`'s
HTTP server on its own thread. Names follow vLLM's so one Grafana panel can hold both:
`endurance:prompt_tokens_total` beside `vllm:prompt_tokens_total`,
`endurance:time_to_first_token_seconds` beside `vllm:time_to_first_token_seconds`.
Every series carries the labels `run` (the run id) and `scenario`.

What the client measures differs from what the server counts, and the names say so:
`endurance:cache_read_tokens_total` is the server-*reported* cache read in each reply's
usage (vLLM's `vllm:prefix_cache_hits_total` counts its own lookups);
`endurance:request_inter_token_latency_seconds` is one observation per request, its
mean gap ((last − first token) / (n − 1)), not one per token as vLLM's
`vllm:inter_token_latency_seconds`. Times are the run's (simulated seconds against
a twin: `endurance:run_info{simulated="true"}`).

At the end of a run the counters equal its rows: requests by outcome = rows, generation
tokens = Σ output tokens of successful rows, compactions = compaction events (once per
session and turn, as the summary counts them), probes = probe rows.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import Iterator, Mapping

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from simulator.protocol.vllm_buckets import E2E_BUCKETS, ITL_BUCKETS, TTFT_BUCKETS
from simulator.util.numbers import to_float, to_int

CONTEXT_BUCKETS = tuple(float(2 ** k) for k in range(10, 21))   # 1k … 1M tokens

PREFIX = "endurance:"

# name (without the prefix), help, extra labels — in the order they are exposed
COUNTERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("requests", "request attempts by kind (turn, summary, probe) and outcome (ok or the "
     "error type)", ("kind", "outcome")),
    ("generation_tokens", "output tokens of successful requests", ("kind",)),
    ("prompt_tokens", "prompt tokens of successful requests as the server reported them "
     "(input + cache read + cache creation)", ("kind",)),
    ("cache_read_tokens", "prompt tokens the server reported read from its prefix cache "
     "(usage)", ("kind",)),
    ("reusable_prefix_tokens", "prompt tokens the client knows were sent before (its bound "
     "on cache reuse)", ("kind",)),
    ("compactions", "compaction events by policy", ("kind",)),
    ("probes", "recall probes by outcome (correct, wrong, unanswered)", ("outcome",)),
)
HISTOGRAMS: tuple[tuple[str, str, tuple[str, ...], tuple[float, ...]], ...] = (
    ("time_to_first_token_seconds", "time to first token of successful turns, s", (),
     TTFT_BUCKETS),
    ("request_inter_token_latency_seconds", "mean inter-token gap of each successful turn "
     "((last − first) / (n − 1)), s; one observation per request", (), ITL_BUCKETS),
    ("e2e_request_latency_seconds", "send → last token of successful requests, s",
     ("kind",), E2E_BUCKETS),
    ("context_tokens", "the client's estimate of each turn's whole prompt, tokens", (),
     CONTEXT_BUCKETS),
)
GAUGES: tuple[tuple[str, str], ...] = (
    ("sessions_active", "sessions started and not ended"),
    ("requests_in_flight", "requests sent and not yet answered (this process's; -1 when "
     "unknown)"),
)


class _Histogram:
    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)      # the last: above every bound (+Inf)
        self.sum = 0.0

    def observe(self, v: float) -> None:
        self.counts[bisect_left(self.bounds, v)] += 1
        self.sum += v


class RunMetrics:
    """The run's series; `observe(row)` for each journaled row.

    A row costs a few dict and list updates under one uncontended lock; the
    exposition is built when Prometheus scrapes (`collect`, prometheus_client's
    collector protocol, in its server's thread), from a copy taken under that lock."""

    def __init__(self, run_id: str, scenario: str, *, simulated: bool = False,
                 target: str = "") -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.labels = {"run": run_id, "scenario": scenario}
        self.info = {**self.labels, "simulated": str(simulated).lower(), "target": target}
        self._lock = threading.Lock()
        self._counters: dict[str, dict[tuple[str, ...], float]] = {c[0]: {} for c in COUNTERS}
        self._hists: dict[str, dict[tuple[str, ...], _Histogram]] = {h[0]: {}
                                                                       for h in HISTOGRAMS}
        self._bounds = {h[0]: h[3] for h in HISTOGRAMS}
        self._gauges: dict[str, float] = {}
        self._seen: set[tuple[str, int, str]] = set()
        self.collect_ns = 0                 # CPU spent building expositions (scrapes)
        self.registry.register(self)

    def _inc(self, name: str, key: tuple[str, ...], v: float = 1.0) -> None:
        c = self._counters[name]
        c[key] = c.get(key, 0.0) + v

    def _obs(self, name: str, key: tuple[str, ...], v: float) -> None:
        h = self._hists[name].get(key)
        if h is None:
            h = self._hists[name][key] = _Histogram(self._bounds[name])
        h.observe(v)

    def observe(self, row: Mapping[str, object]) -> None:
        """One journaled row (simulated seconds)."""
        kind = str(row.get("request_kind") or "turn")
        ok = bool(row.get("ok", True))
        with self._lock:
            self._inc("requests", (kind, "ok" if ok else str(row.get("error_type") or "error")))
            if kind == "probe":
                correct = row.get("probe_correct")
                self._inc("probes", ("unanswered" if not ok or correct is None
                                     else "correct" if correct else "wrong",))
            comp = row.get("compaction")
            if comp:
                key = (str(row.get("session_id")), to_int(row.get("turn_index") or 0), str(comp))
                if key not in self._seen:
                    self._seen.add(key)
                    self._inc("compactions", (str(comp),))
            if not ok:
                return
            k = (kind,)
            out = row.get("output_tokens")
            if out:
                self._inc("generation_tokens", k, to_int(out))
            for name, col in (("prompt_tokens", "prompt_tokens"),
                              ("cache_read_tokens", "cache_read_tokens"),
                              ("reusable_prefix_tokens", "reusable_prefix_tokens")):
                v = row.get(col)
                if v:
                    self._inc(name, k, to_int(v))
            e2e = row.get("e2e_s")
            if e2e is not None:
                self._obs("e2e_request_latency_seconds", k, to_float(e2e))
            if kind != "turn":
                return
            ttft = row.get("ttft_s")
            if ttft is not None:
                self._obs("time_to_first_token_seconds", (), to_float(ttft))
                if out and to_int(out) > 1 and e2e is not None and to_float(e2e) > to_float(ttft):
                    self._obs("request_inter_token_latency_seconds", (),
                              (to_float(e2e) - to_float(ttft)) / (to_int(out) - 1))
            ctx = row.get("context_tokens_est")
            if ctx is not None:
                self._obs("context_tokens", (), to_float(ctx))

    def set_gauges(self, sessions_active: int, in_flight: int | None) -> None:
        with self._lock:
            self._gauges["sessions_active"] = float(sessions_active)
            self._gauges["requests_in_flight"] = -1.0 if in_flight is None else float(in_flight)

    def collect(self) -> Iterator[Metric]:
        """The exposition (prometheus_client calls it on each scrape)."""
        t = time.thread_time_ns()
        yield from self._collect()
        self.collect_ns += time.thread_time_ns() - t

    def _collect(self) -> Iterator[Metric]:
        with self._lock:
            counters = {n: dict(c) for n, c in self._counters.items()}
            hists = {n: {k: (list(h.counts), h.sum) for k, h in hs.items()}
                     for n, hs in self._hists.items()}
            gauges = dict(self._gauges)
        base = ["run", "scenario"]
        values = [self.labels["run"], self.labels["scenario"]]
        info = GaugeMetricFamily(PREFIX + "run_info", "the run (value 1): its target and "
                                 "whether its times are simulated", labels=list(self.info))
        info.add_metric(list(self.info.values()), 1.0)
        yield info
        for name, doc, extra in COUNTERS:
            fam = CounterMetricFamily(PREFIX + name, doc, labels=[*base, *extra])
            for key, v in sorted(counters[name].items()):
                fam.add_metric([*values, *key], v)
            yield fam
        for name, doc, extra, bounds in HISTOGRAMS:
            hf = HistogramMetricFamily(PREFIX + name, doc, labels=[*base, *extra])
            for key, (counts, total) in sorted(hists[name].items()):
                cum, buckets = 0, []
                for bound, n in zip([*map(str, bounds), "+Inf"], counts, strict=True):
                    cum += n
                    buckets.append((bound, float(cum)))
                hf.add_metric([*values, *key], buckets, total)
            yield hf
        for name, doc in GAUGES:
            g = GaugeMetricFamily(PREFIX + name, doc, labels=base)
            if name in gauges:
                g.add_metric(values, gauges[name])
            yield g


class MetricsServer:
    """`RunMetrics` served on http://HOST:PORT/metrics (port 0: any free port) from a
    thread of its own; `close()` stops it."""

    def __init__(self, metrics: RunMetrics, port: int, host: str = "127.0.0.1") -> None:
        from prometheus_client import start_http_server
        self.metrics = metrics
        self._server, self._thread = start_http_server(port, addr=host,
                                                       registry=metrics.registry)
        self.url = f"http://{host}:{self._server.server_port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def parse_bind(value: str) -> tuple[str, int]:
    """`--metrics-port [HOST:]PORT` → (host, port); the host defaults to 127.0.0.1."""
    host, _, port = value.rpartition(":")
    shown = value if len(value) <= 40 else value[:37] + "…"
    if not (port.isascii() and port.isdigit()):
        raise ValueError(f"--metrics-port {shown!r}: expected PORT or HOST:PORT")
    p = int(port) if len(port) <= 5 else 65536
    if not 0 <= p <= 65535:
        raise ValueError(f"--metrics-port {shown!r}: the port must be 0–65535")
    return (host.strip("[]") or "127.0.0.1"), p
