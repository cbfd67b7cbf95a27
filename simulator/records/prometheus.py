"""Server metrics: parse a serving engine's /metrics and turn it into per-window rows.

Counters on a server are lifetime totals (they include every request before our run),
so only their *deltas between two scrapes of our run* are stored; gauges are stored as
sampled. Three dialects are recognised and mapped to one canonical vocabulary:
vLLM (`vllm:`), SGLang (`sglang:`) and llama.cpp (`llamacpp:`), and NVIDIA's DCGM
exporter (a `--scrape` target). A missing or foreign /metrics endpoint becomes a note,
never a failure of the run.

A scrape is a side channel and may lie (issue 49): its body is read up to
`MAX_BODY_BYTES` within the scrape's timeout, must be UTF-8 with no line over
`MAX_LINE_CHARS`, and a mapped series' value must be finite and non-negative (a serving
engine's series that is not is left out and named, the rest of the server kept: vLLM CPU
0.32 exposes a negative queue-time sum; a DCGM target that lies gives nothing); a series
exposed twice (the same labels, or for DCGM the same GPU) is counted once. A target that
fails or lies says so in `MetricsScraper.health()`, which the run records.

Row schema of `server_metrics.parquet` (one row per metric per window):
`t_start_s`, `t_end_s` (run-relative monotonic seconds), `dialect`, `metric`
(canonical), `kind` ("delta" for counter increments over the window, "gauge" for the
value sampled at `t_end_s`), `value`.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, NotRequired, TypedDict

from prometheus_client.parser import text_string_to_metric_families

from simulator.records.scrape_bounds import MAX_BODY_BYTES, ScrapeRefused, checked_text

if TYPE_CHECKING:
    import aiohttp

Kind = Literal["counter", "gauge"]
Agg = Literal["sum", "mean"]

SERVER_METRICS_COLUMNS: tuple[str, ...] = (
    "t_start_s", "t_end_s", "dialect", "metric", "kind", "value")

# sample name → (canonical metric, kind, aggregation over label sets)
DIALECTS: dict[str, dict[str, tuple[str, Kind, Agg]]] = {
    "vllm": {
        "vllm:prefix_cache_queries_total": ("prefix_cache_queries", "counter", "sum"),
        "vllm:prefix_cache_hits_total": ("prefix_cache_hits", "counter", "sum"),
        "vllm:prompt_tokens_total": ("prompt_tokens", "counter", "sum"),
        "vllm:generation_tokens_total": ("generation_tokens", "counter", "sum"),
        "vllm:num_preemptions_total": ("preemptions", "counter", "sum"),
        "vllm:spec_decode_num_drafts_total": ("spec_drafts", "counter", "sum"),
        "vllm:spec_decode_num_draft_tokens_total": ("spec_draft_tokens", "counter", "sum"),
        "vllm:spec_decode_num_accepted_tokens_total": ("spec_accepted_tokens", "counter", "sum"),
        "vllm:kv_cache_usage_perc": ("kv_usage", "gauge", "mean"),
        "vllm:gpu_cache_usage_perc": ("kv_usage", "gauge", "mean"),
        "vllm:num_requests_running": ("requests_running", "gauge", "sum"),
        "vllm:num_requests_waiting": ("requests_waiting", "gauge", "sum"),
        # histogram of arrival → first scheduled: its sum and count give a windowed mean
        "vllm:request_queue_time_seconds_sum": ("queue_time_sum_s", "counter", "sum"),
        "vllm:request_queue_time_seconds_count": ("queue_time_count", "counter", "sum"),
    },
    "sglang": {
        "sglang:cached_tokens_total": ("prefix_cache_hits", "counter", "sum"),
        "sglang:prompt_tokens_total": ("prompt_tokens", "counter", "sum"),
        "sglang:generation_tokens_total": ("generation_tokens", "counter", "sum"),
        "sglang:token_usage": ("kv_usage", "gauge", "mean"),
        "sglang:num_running_reqs": ("requests_running", "gauge", "sum"),
        "sglang:num_queue_reqs": ("requests_waiting", "gauge", "sum"),
    },
    "llamacpp": {
        "llamacpp:prompt_tokens_total": ("prompt_tokens", "counter", "sum"),
        "llamacpp:prompt_tokens_cached_total": ("prefix_cache_hits", "counter", "sum"),
        "llamacpp:tokens_predicted_total": ("generation_tokens", "counter", "sum"),
        "llamacpp:kv_cache_usage_ratio": ("kv_usage", "gauge", "mean"),
        "llamacpp:requests_processing": ("requests_running", "gauge", "sum"),
        "llamacpp:requests_deferred": ("requests_waiting", "gauge", "sum"),
    },
    # NVIDIA's DCGM exporter (a `--scrape` target): GPU power, energy and utilisation,
    # summed (power, energy) or averaged (utilisation) over the GPUs it exposes
    "dcgm": {
        "DCGM_FI_DEV_POWER_USAGE": ("gpu_power_w", "gauge", "sum"),
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("gpu_energy_mj", "counter", "sum"),
        "DCGM_FI_DEV_GPU_UTIL": ("gpu_util", "gauge", "mean"),
    },
}
# how a dialect's sample names begin (default: its name and a colon)
PREFIXES: dict[str, str] = {"dcgm": "DCGM_FI_"}
MAPPED: frozenset[str] = frozenset(n for d in DIALECTS.values() for n in d)
# the serving engines' own dialects: a lying series there is left out, not the server
# (a power target that lies gives no energy figure at all: `MetricsScraper`)
SERVER_DIALECTS: frozenset[str] = frozenset({"vllm", "sglang", "llamacpp"})
MAX_NOTES = 8             # a target failing every scrape of a long run: the first few

def _series_key(name: str, labels: dict[str, str]) -> tuple[str, ...]:
    """Which series a sample belongs to: its name and labels, or for DCGM its name and
    GPU (host and UUID, else index), so one GPU exposed twice is counted once."""
    if name.startswith(PREFIXES["dcgm"]):
        gpu = labels.get("UUID") or labels.get("gpu")
        if gpu:
            return (name, labels.get("Hostname", ""), gpu)
    return (name, *sorted(f"{k}={v}" for k, v in labels.items()))


def _bad_value(name: str, labels: dict[str, str], value: float) -> str | None:
    """Why a mapped series' value cannot be a measurement (None when it can)."""
    if math.isfinite(value) and value >= 0:
        return None
    shown = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))[:120]
    what = "not finite" if not math.isfinite(value) else "negative"
    return f"{name}{{{shown}}} is {value:g} ({what})"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One scrape, mapped to canonical names. `dialect` is None for a foreign text."""

    dialect: str | None
    counters: dict[str, float] = field(default_factory=dict)
    gauges: dict[str, float] = field(default_factory=dict)
    info: dict[str, float] = field(default_factory=dict)   # e.g. kv_capacity_tokens
    # how many sample names the scrape held, and the engine's KV block size (vLLM's
    # cache_config_info): what `endurance check` reports; not recorded by a run
    samples: int = field(default=0, compare=False)
    block_size: int | None = field(default=None, compare=False)
    # a mapped series whose value is no measurement (negative, NaN, ±Inf): the first,
    # named; and how many samples repeated a series already read (counted once)
    invalid: str | None = field(default=None, compare=False)
    duplicates: int = field(default=0, compare=False)


def _kv_capacity(labels: dict[str, str]) -> float | None:
    """Tokens of KV cache from vLLM's cache_config_info labels (blocks × block size)."""
    try:
        return float(labels["num_gpu_blocks"]) * float(labels["block_size"])
    except (KeyError, ValueError):
        return None


def parse_metrics(text: str) -> Snapshot:
    """Parse Prometheus exposition text into a canonical snapshot (pure).

    Raises ValueError when the text is not Prometheus exposition format. A mapped
    series with a negative or non-finite value is left out and named in `invalid`;
    a series repeated is counted once (`duplicates`).
    """
    values: dict[str, list[float]] = {}
    info: dict[str, float] = {}
    names: set[str] = set()
    seen: set[tuple[str, ...]] = set()
    invalid: str | None = None
    duplicates = 0
    block_size: int | None = None
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            names.add(sample.name)
            if sample.name in MAPPED:
                key = _series_key(sample.name, sample.labels)
                if key in seen:
                    duplicates += 1
                    continue
                seen.add(key)
                bad = _bad_value(sample.name, sample.labels, float(sample.value))
                if bad is not None:
                    invalid = invalid or bad
                    continue
            if sample.name == "vllm:cache_config_info":
                cap = _kv_capacity(sample.labels)
                if cap is not None:
                    info["kv_capacity_tokens"] = cap
                bs = sample.labels.get("block_size", "")
                block_size = int(bs) if bs.isdigit() else block_size
                continue
            values.setdefault(sample.name, []).append(float(sample.value))
    prefix_counts = {d: sum(1 for n in values if n.startswith(PREFIXES.get(d, d + ":")))
                     for d in DIALECTS}
    dialect = max(prefix_counts, key=lambda d: prefix_counts[d])
    if prefix_counts[dialect] == 0 and not info:
        return Snapshot(dialect=None, samples=len(names), invalid=invalid,
                        duplicates=duplicates)
    counters: dict[str, float] = {}
    gauges: dict[str, float] = {}
    for name, (canon, kind, agg) in DIALECTS[dialect].items():
        if name not in values:
            continue
        vals = values[name]
        v = sum(vals) if agg == "sum" else sum(vals) / len(vals)
        target = counters if kind == "counter" else gauges
        target[canon] = target.get(canon, 0.0) + v
    return Snapshot(dialect=dialect, counters=counters, gauges=gauges, info=info,
                    samples=len(names), block_size=block_size, invalid=invalid,
                    duplicates=duplicates)


def counter_delta(prev: float, cur: float) -> float:
    """Increase of a counter between two scrapes; a drop means the server restarted
    (the counter began again at 0), so the increase is the current value."""
    return cur - prev if cur >= prev else cur


class MetricsRow(TypedDict):
    """One row of `server_metrics`: a counter's increase over the window (`kind`
    "delta") or a gauge at its end ("gauge"), seconds since the run started. A fleet's
    rows name their `replica`, a `--scrape` target's its `source` (`run/drive.py`)."""

    t_start_s: float
    t_end_s: float
    dialect: str | None
    metric: str
    kind: Literal["delta", "gauge"]
    value: float
    replica: NotRequired[int | str]
    source: NotRequired[str]


def window_rows(prev: Snapshot | None, cur: Snapshot, t_start_s: float,
                t_end_s: float) -> list[MetricsRow]:
    """Rows for one window: counter deltas since `prev` and gauges sampled at the end.

    With no previous snapshot (the baseline scrape) no counter rows are emitted, so a
    lifetime total is never reported as the run's figure.
    """
    rows: list[MetricsRow] = []
    deltas: dict[str, float] = {}
    if prev is not None:
        for name, value in cur.counters.items():
            if name in prev.counters:
                deltas[name] = counter_delta(prev.counters[name], value)
    if cur.dialect != "vllm" and "prefix_cache_hits" in deltas:
        derived = deltas.get("prompt_tokens", 0.0)
        # llama.cpp counts only evaluated prompt tokens; cached ones are counted apart.
        if cur.dialect == "llamacpp":
            derived += deltas["prefix_cache_hits"]
        deltas["prefix_cache_queries"] = derived
    rows += [{"t_start_s": t_start_s, "t_end_s": t_end_s, "dialect": cur.dialect,
              "metric": k, "kind": "delta", "value": v} for k, v in deltas.items()]
    rows += [{"t_start_s": t_start_s, "t_end_s": t_end_s, "dialect": cur.dialect,
              "metric": k, "kind": "gauge", "value": v} for k, v in (cur.gauges | cur.info).items()]
    return rows


def metrics_url_for(endpoint_url: str) -> str:
    """The /metrics URL of the server behind an Anthropic base URL (strips /v1)."""
    base = endpoint_url.rstrip("/")
    base = base.removesuffix("/v1")
    return base + "/metrics"


Fetch = Callable[[str], Awaitable[tuple[int, str | bytes]]]
Sink = Callable[[list[MetricsRow]], None]


class Health(TypedDict):
    """How a scrape target fared (`MetricsScraper.health`), as the run records it."""

    target: str
    status: str
    reason: str | None
    scrapes: int
    failed_scrapes: int
    windows: int
    duplicate_series: NotRequired[int]



class MetricsScraper:
    """Scrapes /metrics every `interval_s` seconds and hands window rows to `sink`.

    Run it inside the runner's TaskGroup (`tg.create_task(scraper.run())`), send the
    run's first request after `ready()` (the baseline: a request the server counted
    before it would be missing from every window), and call `stop()` when the run ends:
    a last scrape closes the final window. Problems are recorded in `notes` (the run
    carries on); a missing, foreign, oversized or lying endpoint stops scraping (a
    transient failure after the baseline does not: the next window spans the gap).
    `health()` says how the target fared; `on_end(health)` is called as `run()` ends.
    """

    def __init__(self, url: str, interval_s: float, sink: Sink, *,
                 fetch: Fetch | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 on_end: Callable[[Health], None] | None = None) -> None:
        self.url, self.interval_s, self.sink = url, interval_s, sink
        self.notes: list[str] = []
        self.windows = 0
        self.scrapes = 0              # attempts
        self.failed_scrapes = 0
        self.invalid: str | None = None
        self.duplicates = 0           # samples repeating a series, over all scrapes
        self.left_out: str | None = None   # a server's series that lied, the first
        self._last_ok = False
        self._fetch = fetch
        self._clock = clock
        self._on_end = on_end
        self._t0 = clock()
        self._prev: Snapshot | None = None
        self._prev_t = 0.0
        self._stop = asyncio.Event()
        self._baseline = asyncio.Event()

    async def ready(self) -> None:
        """Return once the first scrape (the run's baseline) is taken or has failed."""
        await self._baseline.wait()

    def stop(self) -> None:
        """Ask `run()` to take its final scrape and return."""
        self._stop.set()

    def health(self) -> Health:
        """How the target fared: `status` "ok" (every window measured, the last scrape
        answered), "invalid" (a value that is no measurement) or "failed", and why."""
        if self.invalid is not None:
            status, reason = "invalid", self.invalid
        elif self.windows > 0 and self._last_ok:
            status, reason = "ok", None
        else:
            status = "failed"
            reason = self.notes[0].removeprefix(f"{self.url}: ") if self.notes \
                else "no scrape window completed"
        out: Health = {"target": self.url, "status": status, "reason": reason,
                       "scrapes": self.scrapes, "failed_scrapes": self.failed_scrapes,
                       "windows": self.windows}
        if status == "ok" and self.left_out is not None:
            out["reason"] = f"left out: {self.left_out}"
        if status == "ok" and self.failed_scrapes:
            out["reason"] = (f"{self.failed_scrapes} of {self.scrapes} scrapes failed, "
                             "their windows merged into the next; first: "
                             + self.notes[0].removeprefix(f"{self.url}: "))
        if self.duplicates:
            out["duplicate_series"] = self.duplicates
        return out

    def _note(self, text: str) -> None:
        if len(self.notes) < MAX_NOTES:
            self.notes.append(f"{self.url}: {text}")

    async def _get(self, session: aiohttp.ClientSession | None) -> tuple[int, str | bytes]:
        if self._fetch is not None:
            return await self._fetch(self.url)
        import aiohttp
        assert session is not None
        # the whole request, body included, within the timeout: a target that never
        # answers or trickles a byte a second costs one timeout, never the run
        timeout = aiohttp.ClientTimeout(total=max(self.interval_s, 2.0))
        async with session.get(self.url, timeout=timeout) as resp:
            if resp.status != 200:
                return resp.status, b""
            if (resp.content_length or 0) > MAX_BODY_BYTES:
                raise ScrapeRefused(f"body of {resp.content_length:,} bytes announced "
                                    f"(limit {MAX_BODY_BYTES >> 20} MiB)")
            body = bytearray()
            while len(body) <= MAX_BODY_BYTES:
                part = await resp.content.read(MAX_BODY_BYTES + 1 - len(body))
                if not part:
                    break
                body += part
            return resp.status, bytes(body)

    async def scrape_once(self, session: aiohttp.ClientSession | None = None) -> bool:
        """One scrape → rows to the sink. False when the endpoint is unusable."""
        import aiohttp  # only when scraping: the in-process twin's timeline needs none
        now = self._clock() - self._t0
        self.scrapes += 1
        self._last_ok = False
        try:
            status, body = await self._get(session)
            text = checked_text(body) if status == 200 else ""
        except ScrapeRefused as exc:
            return self._fail(f"refused: {exc}; no metrics from it", usable=False)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            return self._fail(f"scrape failed: {detail}")
        if status != 200:
            return self._fail(f"HTTP {status}; no server metrics")
        try:
            snap = parse_metrics(text)
        except Exception as exc:    # any parser failure: a side channel never ends the run
            return self._fail(f"not Prometheus text ({exc}); no server metrics", usable=False)
        self.duplicates += snap.duplicates
        if snap.invalid is not None and snap.dialect in SERVER_DIALECTS:
            # a serving engine's own series that lies (vLLM CPU 0.32's queue-time sum
            # goes negative): that series is left out (parse_metrics did), named once;
            # the server's other series stay measurements
            if self.left_out is None:
                self.left_out = snap.invalid
                self._note(f"left out: {snap.invalid}; the other series are kept")
        elif snap.invalid is not None:
            self.invalid = snap.invalid
            return self._fail(f"invalid: {snap.invalid}; no metrics from it", usable=False)
        if snap.dialect is None:
            return self._fail("no vLLM/SGLang/llama.cpp/DCGM metrics found", usable=False)
        rows = window_rows(self._prev, snap, self._prev_t, now)
        if self._prev is not None:
            self.windows += 1
        self._prev, self._prev_t = snap, now
        self._last_ok = True
        if rows:
            self.sink(rows)
        return True

    def _fail(self, note: str, *, usable: bool = True) -> bool:
        """Record a failed scrape; whether to scrape on (only after a baseline, and
        only for a failure that may pass)."""
        self.failed_scrapes += 1
        self._note(note)
        return usable and self._prev is not None

    async def run(self) -> None:
        """Scrape until `stop()`; never raises for endpoint problems (they are notes)."""
        try:
            await self._run()
        finally:
            self._baseline.set()        # cancelled before its first scrape: wait no more
            if self._on_end is not None:
                self._on_end(self.health())

    async def _run(self) -> None:
        import aiohttp
        async with aiohttp.ClientSession() as session:
            use = None if self._fetch is not None else session
            usable = await self.scrape_once(use)
            self._baseline.set()
            if not usable:
                return
            while not self._stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), self.interval_s)
                if not await self.scrape_once(use):
                    return
