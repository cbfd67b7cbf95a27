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

from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# vLLM's own buckets (vllm/v1/metrics/loggers.py), so the two histograms line up
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
               5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0,
               50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
CONTEXT_BUCKETS = tuple(float(2 ** k) for k in range(10, 21))   # 1k … 1M tokens

PREFIX = "endurance:"


class RunMetrics:
    """The run's series in their own registry; `observe(row)` for each journaled row."""

    def __init__(self, run_id: str, scenario: str, *, simulated: bool = False,
                 target: str = "") -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.labels = {"run": run_id, "scenario": scenario}
        base = ["run", "scenario"]
        r = self.registry
        self.info = Gauge(PREFIX + "run_info", "the run (value 1): its target and whether "
                          "its times are simulated", [*base, "simulated", "target"], registry=r)
        self.info.labels(**self.labels, simulated=str(simulated).lower(), target=target).set(1)
        self.requests = Counter(PREFIX + "requests", "request attempts by kind (turn, summary, "
                                "probe) and outcome (ok or the error type)",
                                [*base, "kind", "outcome"], registry=r)
        self.generation = Counter(PREFIX + "generation_tokens", "output tokens of successful "
                                  "requests", [*base, "kind"], registry=r)
        self.prompt = Counter(PREFIX + "prompt_tokens", "prompt tokens of successful requests "
                              "as the server reported them (input + cache read + cache "
                              "creation)", [*base, "kind"], registry=r)
        self.cache_read = Counter(PREFIX + "cache_read_tokens", "prompt tokens the server "
                                  "reported read from its prefix cache (usage)",
                                  [*base, "kind"], registry=r)
        self.reusable = Counter(PREFIX + "reusable_prefix_tokens", "prompt tokens the client "
                                "knows were sent before (its bound on cache reuse)",
                                [*base, "kind"], registry=r)
        self.ttft = Histogram(PREFIX + "time_to_first_token_seconds", "time to first token of "
                              "successful turns, s", base, buckets=TTFT_BUCKETS, registry=r)
        self.itl = Histogram(PREFIX + "request_inter_token_latency_seconds", "mean inter-token "
                             "gap of each successful turn ((last − first) / (n − 1)), s; one "
                             "observation per request", base, buckets=ITL_BUCKETS, registry=r)
        self.e2e = Histogram(PREFIX + "e2e_request_latency_seconds", "send → last token of "
                             "successful requests, s", [*base, "kind"], buckets=E2E_BUCKETS,
                             registry=r)
        self.context = Histogram(PREFIX + "context_tokens", "the client's estimate of each "
                                 "turn's whole prompt, tokens", base, buckets=CONTEXT_BUCKETS,
                                 registry=r)
        self.compactions = Counter(PREFIX + "compactions", "compaction events by policy",
                                   [*base, "kind"], registry=r)
        self.probes = Counter(PREFIX + "probes", "recall probes by outcome (correct, wrong, "
                              "unanswered)", [*base, "outcome"], registry=r)
        self.sessions = Gauge(PREFIX + "sessions_active", "sessions started and not ended",
                              base, registry=r)
        self.in_flight = Gauge(PREFIX + "requests_in_flight", "requests sent and not yet "
                               "answered (this process's; -1 when unknown)", base, registry=r)
        self._children: dict[tuple[Any, ...], Any] = {}
        self._seen: set[tuple[str, int, str]] = set()

    def _child(self, metric: Any, *values: str) -> Any:
        """The labelled series (run, scenario, *values), bound once: `labels()` takes
        a lock and builds a key on every call."""
        key = (id(metric), *values)
        c = self._children.get(key)
        if c is None:
            c = self._children[key] = metric.labels(self.labels["run"],
                                                    self.labels["scenario"], *values)
        return c

    def observe(self, row: Mapping[str, Any]) -> None:
        """One journaled row (simulated seconds)."""
        kind = str(row.get("request_kind") or "turn")
        ok = bool(row.get("ok", True))
        outcome = "ok" if ok else str(row.get("error_type") or "error")
        self._child(self.requests, kind, outcome).inc()
        if kind == "probe":
            correct = row.get("probe_correct")
            self._child(self.probes, "unanswered" if not ok or correct is None
                        else "correct" if correct else "wrong").inc()
        comp = row.get("compaction")
        if comp:
            key = (str(row.get("session_id")), int(row.get("turn_index") or 0), str(comp))
            if key not in self._seen:
                self._seen.add(key)
                self._child(self.compactions, str(comp)).inc()
        if not ok:
            return
        out = row.get("output_tokens")
        if out:
            self._child(self.generation, kind).inc(int(out))
        pt, cr = row.get("prompt_tokens"), row.get("cache_read_tokens")
        if pt:
            self._child(self.prompt, kind).inc(int(pt))
        if cr:
            self._child(self.cache_read, kind).inc(int(cr))
        reus = row.get("reusable_prefix_tokens")
        if reus:
            self._child(self.reusable, kind).inc(int(reus))
        e2e = row.get("e2e_s")
        if e2e is not None:
            self._child(self.e2e, kind).observe(float(e2e))
        if kind != "turn":
            return
        ttft = row.get("ttft_s")
        if ttft is not None:
            self._child(self.ttft).observe(float(ttft))
            if out and int(out) > 1 and e2e is not None and float(e2e) > float(ttft):
                self._child(self.itl).observe((float(e2e) - float(ttft)) / (int(out) - 1))
        ctx = row.get("context_tokens_est")
        if ctx is not None:
            self._child(self.context).observe(float(ctx))

    def set_gauges(self, sessions_active: int, in_flight: int | None) -> None:
        self._child(self.sessions).set(sessions_active)
        self._child(self.in_flight).set(-1 if in_flight is None else in_flight)


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
    try:
        p = int(port)
    except ValueError:
        raise ValueError(f"--metrics-port {value!r}: expected PORT or HOST:PORT") from None
    if not 0 <= p <= 65535:
        raise ValueError(f"--metrics-port {value!r}: the port must be 0–65535")
    return (host.strip("[]") or "127.0.0.1"), p
