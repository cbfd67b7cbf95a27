"""One place per summary metric: its key, unit, definition and how it aggregates.

The terminal/HTML summary table, `summary.json` (via `RunSummary`), `compare`, `sweep`
and the docs' metric reference (docs/metrics.md) all read this registry, so a metric is added, renamed
or redefined here once. To add one: compute it in `analysis/summary.py` (or take it
from the engine's counters in `engine_figures`), then register it below and name it in
`metric_keys` (`NumberKey` and `SummaryRecord`: mypy checks every key code reads
against them); the tests `tests/analysis/test_metric_keys.py` and
`tests/analysis/test_metrics_registry.py` fail while a summary key is unregistered or the
docs/metrics.md table is stale (`python -m simulator.analysis.metrics_registry` prints
it, `--write` puts it between the page's markers).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from simulator.analysis.metric_keys import FactKey, MetricKey, NumberKey
from simulator.util.numbers import to_float, to_int

Source = Literal["rows", "server", "engine", "run", "steady", "probes", "gpu"]


@dataclass(frozen=True, slots=True)
class Metric:
    """A number in the run summary.

    `unit`: what the value is measured in ("share" is 0..1, shown as %); `aggregation`:
    how per-request rows (or counters) become the one figure; `row`: the summary-table
    row it is shown in (metrics sharing a row are joined with " / "); `fmt`: how a value
    prints; `compare`: shown by `endurance compare`. The columns of a sweep or sizing
    table are `SWEEP_COLUMNS` below.
    """

    key: MetricKey          # a name `metric_keys.MetricKey` lacks fails mypy
    unit: str
    definition: str
    aggregation: str
    source: Source = "rows"
    row: str | None = None
    fmt: str = "{:,.1f}"
    compare: bool = False

    def format(self, value: object) -> str:
        """The value as the summary table and sweep print it ("n/a" when unknown)."""
        if value is None or isinstance(value, bool):
            return "n/a"
        if self.unit == "share":
            return f"{100.0 * to_float(value):,.1f}%"
        if self.fmt == "{:d}":
            return f"{to_int(value):d}"
        if isinstance(value, float) or "f}" in self.fmt:
            return self.fmt.format(to_float(value))
        return f"{value}"


_TOK_S = "tok/s"
METRICS: tuple[Metric, ...] = (
    Metric("sessions", "count", "sessions that sent at least one request",
           "distinct session_id over all rows", row="sessions / successful turns", fmt="{:d}",
           compare=True),
    Metric("ok_turns", "count", "successful turn requests (not turns per session; "
           "summary requests and failed attempts excluded; older summary.json files call it "
           "`turns`)", "count of ok rows with request_kind=turn",
           row="sessions / successful turns", fmt="{:d}", compare=True),
    Metric("requests", "count", "request attempts, failed and retried ones included",
           "count of rows", fmt="{:d}"),
    Metric("failed_requests", "count", "attempts that ended in an error (cancelled-at-stop "
           "and context-overflow attempts are counted apart)",
           "count of rows with ok=false", fmt="{:d}", compare=True),
    Metric("cancelled_requests", "count", "attempts cancelled in flight at a stop "
           "(Ctrl-C/SIGTERM): not failures of the server", "count of rows with "
           "error_type=cancelled", fmt="{:d}"),
    Metric("overflow_requests", "count", "attempts the server refused as a context "
           "overflow, answered by a forced compaction (not failures)",
           "count of rows with error_type=context_overflow", fmt="{:d}"),
    Metric("summary_requests", "count", "successful compaction-summary requests",
           "count of ok rows with request_kind=summary", fmt="{:d}"),
    Metric("wall_window_s", "s", "the whole run's window: first request sent → last token",
           "max(started + e2e) − min(started) over all rows"),
    Metric("output_tokens", "tokens", "output tokens of successful requests",
           "Σ output_tokens over ok rows", fmt="{:d}"),
    Metric("aggregate_tok_s", _TOK_S, "Σ output of all sessions / the whole run's window",
           "output_tokens / wall_window_s", row="aggregate tok/s", compare=True),
    Metric("per_session_tok_s", _TOK_S, "mean over sessions of sustained tok/s "
           "(Σ output / Σ e2e of a session, think time excluded)",
           "mean over sessions of Σ output / Σ e2e (ok rows)",
           row="per-session sustained tok/s", compare=True),
    Metric("turn_tok_s_min", _TOK_S, "slowest turn: output / (sent → last token)",
           "min over ok turn rows", row="turn tok/s min / median / max", compare=True),
    Metric("turn_tok_s_median", _TOK_S, "median turn: output / (sent → last token)",
           "median over ok turn rows", row="turn tok/s min / median / max", compare=True),
    Metric("turn_tok_s_max", _TOK_S, "fastest turn: output / (sent → last token)",
           "max over ok turn rows", row="turn tok/s min / median / max", compare=True),
    Metric("decode_tok_s_median", _TOK_S, "median (output − 1) / (last − first token)",
           "median over ok turn rows"),
    Metric("first_third_tok_s", _TOK_S, "sustained tok/s of each session's first third "
           "of turns, pooled", "Σ output / Σ e2e over those turns",
           row="first third / last third tok/s", compare=True),
    Metric("last_third_tok_s", _TOK_S, "sustained tok/s of each session's last third "
           "of turns, pooled", "Σ output / Σ e2e over those turns",
           row="first third / last third tok/s", compare=True),
    Metric("drift_pct", "%", "change from the first third to the last third",
           "100 × (last − first) / first", row="drift first → last third", fmt="{:+,.1f}%",
           compare=True),
    Metric("ttft_p50_s", "s", "median request sent → first content token",
           "50th percentile over ok turn rows", row="TTFT p50 / p95 (s)", fmt="{:,.2f}",
           compare=True),
    Metric("ttft_p95_s", "s", "95th percentile request sent → first content token",
           "95th percentile over ok turn rows", row="TTFT p50 / p95 (s)", fmt="{:,.2f}",
           compare=True),
    Metric("context_tokens_first", "tokens", "context at a session's first turn "
           "(client-side estimate)", "mean over sessions of the first ok turn's estimate",
           row="context tokens first / max / last", fmt="{:,.0f}"),
    Metric("context_tokens_max", "tokens", "largest context sent (client-side estimate)",
           "max over ok turn rows", row="context tokens first / max / last", fmt="{:,.0f}",
           compare=True),
    Metric("context_tokens_last", "tokens", "context at a session's last turn "
           "(client-side estimate)", "mean over sessions of the last ok turn's estimate",
           row="context tokens first / max / last", fmt="{:,.0f}"),
    Metric("compaction_events", "count", "compactions (a retried request's label counts "
           "once)", "distinct (session, turn, compaction) labels", row="compaction events",
           fmt="{:d}", compare=True),
    Metric("post_compaction_turn_tok_s_median", _TOK_S, "median turn tok/s of the turn "
           "sent right after a compaction (the slow one)", "median over those ok turn rows",
           row="turn tok/s after compaction / other (median)", compare=True),
    Metric("other_turn_tok_s_median", _TOK_S, "median turn tok/s of every other turn",
           "median over the remaining ok turn rows",
           row="turn tok/s after compaction / other (median)"),
    Metric("server_cache_read_share", "share", "server-reported cache reads / prompt tokens",
           "Σ cache_read_tokens / Σ prompt_tokens over ok rows that report both",
           row="cache: server-reported read share", compare=True),
    Metric("client_reusable_share", "share", "client-side reusable prefix / context "
           "(what a perfect prefix cache could reuse)",
           "Σ reusable_prefix_tokens / Σ context_tokens_est over ok rows",
           row="cache: client reusable prefix share", compare=True),
    Metric("cache_shared_pct", "%", "the server-reported share where the server reports "
           "it, else the client-side one (`cache_shared_source` says which)",
           "100 × server_cache_read_share, else 100 × client_reusable_share",
           compare=True),
    Metric("server_prefix_cache_hit_share", "share", "server counters: prefix-cache hits / "
           "queries over the run (never lifetime totals)",
           "Σ per-window deltas (scraped /metrics), or the twin's own counters",
           source="server", row="cache: server counters hit share"),
    Metric("kv_usage_peak", "share", "peak KV-cache usage", "max of the gauge over windows, "
           "or the twin's own peak", source="server", row="KV usage peak / preemptions"),
    Metric("preemptions", "count", "sequences the server preempted (KV pressure)",
           "Σ per-window deltas, or the twin's own count", source="server",
           row="KV usage peak / preemptions", fmt="{:,.0f}"),
    Metric("kv_capacity_tokens", "tokens", "KV-cache capacity the server reports",
           "max of the gauge, or the twin profile's capacity", source="server",
           fmt="{:,.0f}"),
    Metric("usd_per_mtok", "$", "cost of 1M output tokens at price_per_hour",
           "price_per_hour / (aggregate_tok_s × 3600) × 1e6", source="run",
           row="$ per 1M output tokens", fmt="{:,.3f}", compare=True),
    # speculative decoding, from the per-request columns only the twin fills
    Metric("tokens_per_forward_pass", "tokens", "output tokens per forward pass that "
           "emitted them (1 without speculation; why speculation won or lost)",
           "Σ output_tokens / Σ spec_forward_passes over successful requests that report "
           "passes (twin only)", compare=True, fmt="{:,.2f}"),
    Metric("spec_mean_acceptance_length", "tokens", "vLLM's mean acceptance length: "
           "1 + accepted / drafts (bonus token included)",
           "1 + Σ spec_accepted_tokens / Σ spec_drafts (twin only, None without drafts)",
           fmt="{:,.2f}"),
    Metric("ngram_reference_tokens_per_pass", "tokens", "tokens per forward pass the "
           "reference n-gram proposer (ngram:24, lookup 5) would give the run's replies "
           "alone, speculation on or off: how much the replies copy their context",
           "Σ reply tokens / Σ ngram_ref_passes over successful requests that report it "
           "(the first 8 sessions of a run; the twin counts its own ids, twin/"
           "predictability.py; for a real server the client counts its cl100k tokens of "
           "the request and reply, endpoints/client_meter.py, an estimate)",
           row="what n-gram speculation would see (ngram:24 tokens/pass)", compare=True,
           fmt="{:,.2f}"),
    Metric("ngram_reference_tokens", "label", "whose tokens the reference figure counts: "
           "`twin tokens`, or `client tokens (estimate)` (a real server's tokenizer "
           "differs from the client's cl100k)",
           "`client tokens (estimate)` when any metered row has ngram_ref_tokens",
           row="what n-gram speculation would see (ngram:24 tokens/pass)", fmt="{}"),
    Metric("spec_acceptance_share", "share", "accepted / proposed draft tokens (a "
           "misleading indicator alone, as the published measurements note)",
           "Σ spec_accepted_tokens / Σ spec_draft_tokens (twin only)"),
)

_W = ("in the steady-state window (all N sessions active and past their first turn, until "
      "the first one ends, or the configured window; `analysis/steady.py`)")
METRICS += (
    Metric("requested_sessions", "count", "sessions the run was asked to hold at once",
           "from the scenario / load shape", source="steady", fmt="{:d}"),
    Metric("achieved_sessions", "sessions", "time-weighted mean of active sessions " + _W,
           "∫ active sessions dt / window length; below 90% of requested → not steady", source="steady"),
    Metric("achieved_sessions_run", "sessions", "time-weighted mean of active sessions over "
           "the whole run", "∫ active sessions dt / whole-run window", source="steady"),
    Metric("achieved_in_flight", "requests", "time-weighted mean of in-flight requests " + _W,
           "∫ in-flight requests dt / window length", source="steady"),
    Metric("achieved_in_flight_run", "requests", "time-weighted mean of in-flight requests "
           "over the whole run", "∫ in-flight requests dt / whole-run window", source="steady"),
    Metric("window_s", "s", "length of the steady-state window", "window end − window start",
           source="steady"),
    Metric("window_output_tokens", "tokens", "output tokens emitted " + _W,
           "each request's output spread evenly over its decode interval, clipped to the "
           "window", fmt="{:,.0f}", source="steady"),
    Metric("window_aggregate_tok_s", _TOK_S, "aggregate tok/s " + _W,
           "window_output_tokens / window_s", compare=True, source="steady"),
    Metric("window_per_session_tok_s", _TOK_S, "per-session sustained tok/s " + _W,
           "Σ window tokens / Σ busy time over sessions (busy-time-weighted mean)",
           compare=True, source="steady"),
    Metric("window_n_x_per_session_tok_s", _TOK_S, "N × per-session tok/s in the window, "
           "as published capacity tables define aggregate", "requested N × "
           "window_per_session_tok_s", compare=True,
           source="steady"),
    Metric("window_ttft_p50_s", "s", "median TTFT of requests sent in the window",
           "50th percentile", fmt="{:,.2f}", source="steady"),
    Metric("window_ttft_p95_s", "s", "95th percentile TTFT of requests sent in the window",
           "95th percentile", fmt="{:,.2f}", compare=True, source="steady"),
    Metric("window_itl_p50_s", "s", "median inter-token latency in the window",
           "50th percentile of per-request (last − first token) / (output − 1)",
           fmt="{:,.4f}", source="steady"),
    Metric("window_itl_p95_s", "s", "95th percentile inter-token latency in the window",
           "95th percentile of per-request mean ITL", fmt="{:,.4f}", source="steady"),
    Metric("window_requests", "count", "turn requests sent in the window", "count",
           fmt="{:d}", source="steady"),
    Metric("window_usd_per_mtok", "$", "cost of 1M output tokens in the window "
           "(no idle ramp or tail)", "price_per_hour / (window_aggregate_tok_s × 3600) × 1e6",
           source="steady", fmt="{:,.3f}"),
)

# Goodput (`analysis/goodput.py`): turn requests that met the per-request SLO (the
# scenario's `goodput:` section, by default TTFT ≤ 15 s and ≥ 30 output tok/s).
_G = ("turn requests that met the goodput SLO (TTFT ≤ goodput.ttft_s and decode tok/s ≥ "
      "goodput.output_tok_s; failed ones never)")
METRICS += (
    Metric("goodput_share", "share", "share of turn requests that met the goodput SLO "
           "(DistServe's attainment)", "met / turn requests that ended (cancelled-at-stop "
           "and context-overflow attempts excluded)", row="goodput: share / tok/s",
           compare=True),
    Metric("goodput_requests_per_s", "requests/s", _G + " per second of the whole run",
           "count met / wall_window_s"),
    Metric("goodput_tok_s", _TOK_S, "output tokens of " + _G + " per second of the whole run",
           "Σ output_tokens of met requests / wall_window_s", row="goodput: share / tok/s",
           compare=True),
    Metric("window_goodput_share", "share", "share of the window's turn requests (first "
           "token in the window) that met the goodput SLO", "met / those requests",
           source="steady"),
    Metric("window_goodput_tok_s", _TOK_S, "output tokens of met requests apportioned to the "
           "steady-state window, per second", "Σ tokens_in_window of met requests / window_s",
           source="steady", compare=True),
    Metric("window_goodput_per_session_tok_s", _TOK_S, "window_goodput_tok_s per requested "
           "session", "window_goodput_tok_s / requested_sessions", source="steady"),
)

# Queue wait (`analysis/queueing.py`): arrival at the server → first scheduled.
METRICS += (
    Metric("queue_time_p50_s", "s", "median server queue wait of a turn (arrival → first "
           "scheduled; the twin records it, a real server's rows do not)",
           "50th percentile over ok turn rows with queue_s", fmt="{:,.2f}",
           row="queue wait p50 / p95 (s), share of TTFT"),
    Metric("queue_time_p95_s", "s", "95th percentile server queue wait of a turn",
           "95th percentile over ok turn rows with queue_s", fmt="{:,.2f}",
           row="queue wait p50 / p95 (s), share of TTFT"),
    Metric("queue_share_of_ttft", "share", "share of TTFT spent waiting in the server's queue",
           "Σ queue_s / Σ ttft_s over ok turn rows; else server_queue_time_mean_s / mean TTFT",
           row="queue wait p50 / p95 (s), share of TTFT", compare=True),
    Metric("server_queue_time_mean_s", "s", "server counters: mean queue time over the run "
           "(vLLM's vllm:request_queue_time_seconds histogram)",
           "Δ histogram sum / Δ histogram count over the run's scrape windows",
           source="server", fmt="{:,.3f}"),
    Metric("window_queue_time_p95_s", "s", "95th percentile queue wait of requests whose "
           "first token falls in the steady-state window", "95th percentile",
           fmt="{:,.2f}", source="steady"),
    Metric("window_queue_share_of_ttft", "share", "share of TTFT spent queueing in the "
           "steady-state window (what `size` reads to name `queueing` as binding)",
           "Σ queue_s / Σ ttft_s over those requests", source="steady"),
)

# Saturation gate (`analysis/steady.py`): slopes over the steady-state window.
METRICS += (
    Metric("window_ttft_slope", "s/s", "least-squares slope of TTFT against first-token time "
           "in the window; with the in-flight slope, both significantly positive (one-sided "
           "t-test, 95%) and TTFT ≥ 2.5 s at the window's end → `saturated`",
           "OLS slope over ok turns whose first token falls in the window", fmt="{:,.4f}",
           source="steady"),
    Metric("window_in_flight_slope", "requests/s", "least-squares slope of in-flight requests "
           "(sampled at each request sent in the window) against time",
           "OLS slope over requests sent in the window", fmt="{:,.4f}", source="steady"),
)

# Coordinated omission (`analysis/closed_loop.py`): the loop's rates beside latency, and
# how late requests were sent against their planned start.
METRICS += (
    Metric("turns_per_s", "turns/s", "successful turns per second over the whole run (a "
           "closed loop: a slower server lowers it, latency percentiles alone hide that)",
           "ok_turns / wall_window_s", row="turns/s / sessions/s (whole run)", fmt="{:,.3f}",
           compare=True),
    Metric("sessions_per_s", "sessions/s", "sessions served per second over the whole run",
           "sessions / wall_window_s", row="turns/s / sessions/s (whole run)", fmt="{:,.4f}"),
    Metric("schedule_lag_p95_s", "s", "95th percentile of how late a request was sent "
           "against its planned start (previous reply + think/tool time, or a back-off's "
           "end): the client's own delay (limiter, busy loop)",
           "95th percentile over attempts with schedule_lag_s", fmt="{:,.3f}",
           row="schedule lag p95 / max (s)", compare=True),
    Metric("schedule_lag_max_s", "s", "largest schedule lag of any attempt",
           "max over attempts with schedule_lag_s", fmt="{:,.3f}",
           row="schedule lag p95 / max (s)"),
    Metric("window_turns_per_s", "turns/s", "successful turns whose reply ended in the "
           "steady-state window, per second", "count / window_s", fmt="{:,.3f}",
           source="steady"),
    Metric("window_sessions_per_s", "sessions/s", "sessions that ended in the steady-state "
           "window, per second (constant-load runs; a fixed-turn window ends when the first "
           "session does)", "count / window_s", fmt="{:,.4f}", source="steady"),
)

# Recall probes (`analysis/recall.py`, issue 22): from the probe rows only. Their table
# is on docs/recall.md (`python -m simulator.analysis.metrics_registry --recall`).
_BOOT = ("95% percentile bootstrap over sessions (over facts when there is one session), "
         "2000 resamples, seeded")
METRICS += (
    Metric("probe_requests", "count", "recall probes sent (one question about one planted "
           "fact on a turn's context; never counted as turns or requests above)",
           "count of rows with request_kind=probe", fmt="{:d}", source="probes"),
    Metric("probes_answered", "count", "probes that got a reply (a failed probe has no verdict)",
           "count of ok probe rows", fmt="{:d}", source="probes"),
    Metric("facts_probed", "count", "distinct planted facts asked about", "distinct fact_id "
           "over probe rows", fmt="{:d}", source="probes"),
    Metric("probe_recall", "share", "answered probes whose reply names the fact's value "
           "(normalised match): what the model could still use",
           "mean of probe_correct over ok probe rows", source="probes", compare=True),
    Metric("probe_recall_ci_low", "share", "lower end of probe_recall's 95% interval", _BOOT,
           source="probes"),
    Metric("probe_recall_ci_high", "share", "upper end of probe_recall's 95% interval", _BOOT,
           source="probes"),
    Metric("fact_retention", "share", "probes whose fact was still in the context sent "
           "(verbatim, or its value in a summary; client-side): what the policy kept",
           "mean of fact_retained ≠ dropped over probe rows", source="probes", compare=True),
    Metric("fact_retention_ci_low", "share", "lower end of fact_retention's 95% interval",
           _BOOT, source="probes"),
    Metric("fact_retention_ci_high", "share", "upper end of fact_retention's 95% interval",
           _BOOT, source="probes"),
)

# Measured GPU power (a `--scrape` target such as NVIDIA's DCGM exporter;
# `analysis/energy.py`): None without a power series, never estimated.
_MEASURED = "measured by the --scrape target(s) `energy_source` names"
METRICS += (
    Metric("gpu_power_mean_w", "W", "mean GPU power over the run, " + _MEASURED,
           "energy counter increase ÷ scraped time, else the power gauge's time-weighted "
           "mean; GPUs of a target and targets summed", source="gpu", fmt="{:,.0f}"),
    Metric("gpu_util_mean", "share", "mean GPU utilisation over the run, " + _MEASURED,
           "the utilisation gauge's time-weighted mean (÷ 100), averaged over GPUs and "
           "targets", source="gpu"),
    Metric("energy_wh", "Wh", "GPU energy over the run's window, " + _MEASURED,
           "gpu_power_mean_w × wall_window_s / 3600", source="gpu", fmt="{:,.2f}"),
    Metric("energy_wh_per_mtok", "Wh", "GPU energy per 1M output tokens, " + _MEASURED,
           "energy_wh / output_tokens × 10⁶", source="gpu", fmt="{:,.1f}", compare=True),
    Metric("sessions_per_kw", "sessions/kW", "sessions held per kW of GPU power "
           "(AA-AgentPerf's agents per MW, per kW), " + _MEASURED,
           "achieved_sessions / (gpu_power_mean_w / 1000)", source="gpu", fmt="{:,.2f}",
           compare=True),
)

# prefill/decode disaggregation on the twin (`analysis/pd.py`; None without P/D rows)
_PD = "over ok turn rows of a P/D run (`fleet.prefill` > 0)"
METRICS += (
    Metric("remote_prefill_share", "share", "share of turns prefilled on a prefill "
           "instance (the rest on their decode instance: uncached part ≤ the threshold)",
           "count of prefill_where=remote / count with prefill_where, " + _PD),
    Metric("kv_transfer_gb", "GB", "KV pulled from prefill to decode instances",
           "Σ kv_transfer_bytes / 1e9, " + _PD, fmt="{:,.2f}"),
    Metric("kv_transfer_wait_p95_s", "s", "95th percentile wait of a remote prefill's "
           "decode instance for its KV (admission → pulled, link queue included)",
           "95th percentile of kv_transfer_wait_s over remote rows, " + _PD, fmt="{:,.3f}"),
    Metric("ttft_queue_share", "share", "share of TTFT spent queueing (prefill and decode "
           "queues)", "Σ queue_s / Σ ttft_s, " + _PD),
    Metric("ttft_transfer_share", "share", "share of TTFT spent waiting for KV transfer",
           "Σ kv_transfer_wait_s / Σ ttft_s, " + _PD),
    Metric("ttft_prefill_share", "share", "share of TTFT spent prefilling (and in the "
           "decode instance's first step)", "1 − ttft_queue_share − ttft_transfer_share, "
           + _PD),
    Metric("prefill_utilization", "share", "busy share of the prefill instances",
           "Σ engine seconds in forward passes / (run span × prefill instances)",
           source="engine"),
    Metric("decode_utilization", "share", "busy share of the decode instances",
           "Σ engine seconds in forward passes / (run span × decode instances)",
           source="engine"),
)

REGISTRY: Mapping[str, Metric] = {m.key: m for m in METRICS}
BY_KEY: Mapping[MetricKey, Metric] = {m.key: m for m in METRICS}   # typed keys

# Keys older summary.json files used → the registry key (read, never written).
ALIASES: Mapping[str, str] = {"turns": "ok_turns"}

# Non-numeric entries of a summary (breakdowns, provenance, run status): not metrics.
FACT_KEYS: frozenset[FactKey] = frozenset({
    "errors_by_type", "compactions_by_kind", "compaction_messages_removed",
    "compaction_tokens_removed", "cache_shared_source", "price_per_hour", "simulated",
    "engine", "twin", "status", "status_reason", "failed_sessions", "deadline_reached",
    "run_id", "contains_verbatim_content", "workers",
    "time_scale",   # an HTTP twin's --time-scale (simulated runs against `twin serve`)
    "fleet",   # replicas behind a router: per replica and aggregate (`analysis/fleet.py`)
    "goodput_slo",   # the per-request SLO the goodput figures count (`analysis/goodput.py`)
    "ramp",   # a stepped ramp's steps, windows, verdicts and answer (`analysis/ramp.py`)
    "bench",  # a benchmark run's figures by vLLM's definitions (`analysis/bench.py`)
    # steady state: flags and bounds (`analysis/steady.py`)
    "steady_state", "steady_state_reason", "window_start_s", "window_end_s",
    "usd_per_mtok_counts_idle",
    # KV tiers: post-idle TTFT, host-tier share, preempted turns (`analysis/kv_tier.py`)
    "kv_tier",
    # saturation gate over the window (`analysis/steady.py`, `saturation`)
    "saturated", "saturated_reason",
    # recall breakdowns (`analysis/recall.py`)
    "recall_ci_unit", "recall_by_kind", "recall_by_age", "retention_by_state",
    "recall_by_compactions_crossed",
    # which --scrape targets measured the GPU power, and how each target fared:
    # status ok / failed / invalid and why (`analysis/energy.py`, `telemetry_block`)
    "energy_source", "telemetry"})

NUMERIC_KEYS: tuple[MetricKey, ...] = tuple(m.key for m in METRICS)
COMPARE_KEYS: tuple[MetricKey, ...] = tuple(m.key for m in METRICS if m.compare)

# The columns of a sweep / sizing table, in order, with their headers: a point is read
# on its steady-state window (the whole run's aggregate beside it, ramp and tail
# included). `steady_state` is a fact shown as a yes/NO flag.
SWEEP_COLUMNS: tuple[tuple[MetricKey | Literal["steady_state"], str], ...] = (
    ("requested_sessions", "sessions"), ("achieved_sessions", "achieved"),
    ("steady_state", "steady"), ("window_aggregate_tok_s", "window aggregate tok/s"),
    ("window_n_x_per_session_tok_s", "N×per-session"),
    ("window_per_session_tok_s", "per-session tok/s"), ("window_ttft_p50_s", "TTFT p50 s"),
    ("window_ttft_p95_s", "TTFT p95 s"), ("window_turns_per_s", "turns/s"),
    ("cache_shared_pct", "cache shared %"), ("kv_usage_peak", "KV peak %"),
    ("preemptions", "preemptions"), ("window_usd_per_mtok", "$/1M tok"),
    ("aggregate_tok_s", "run aggregate tok/s"))

# The facts a sweep row or a sizing probe carries beside every figure of its run.
SWEEP_FACT_KEYS: tuple[FactKey, ...] = (
    "simulated", "steady_state", "steady_state_reason", "window_start_s", "window_end_s",
    "usd_per_mtok_counts_idle", "saturated", "saturated_reason", "kv_tier", "fleet")

# A whole-run figure → its steady-state window's figure: what a point of a sweep or a
# sizing search is judged on (an SLO on `per_session_tok_s` reads the window's) when
# the run computed a window.
WINDOW_OF: Mapping[str, NumberKey] = {
    "aggregate_tok_s": "window_aggregate_tok_s",
    "per_session_tok_s": "window_per_session_tok_s",
    "ttft_p50_s": "window_ttft_p50_s",
    "ttft_p95_s": "window_ttft_p95_s",
    "usd_per_mtok": "window_usd_per_mtok",
}
ENGINE_KEYS: tuple[MetricKey, ...] = tuple(m.key for m in METRICS if m.source == "server")
# Present only in summaries made with a steady-state config (every run since the window).
STEADY_KEYS: tuple[MetricKey, ...] = tuple(m.key for m in METRICS if m.source == "steady")


def read(summary: Mapping[str, object], key: str) -> object:
    """`summary[key]`, also from a summary written under an older key (None if absent)."""
    if key in summary:
        return summary[key]
    old = [k for k, new in ALIASES.items() if new == key and k in summary]
    return summary[old[0]] if old else None


def upgrade(summary: Mapping[str, object]) -> dict[str, object]:
    """A copy of an old summary with its keys renamed to the registry's."""
    out = dict(summary)
    for old, new in ALIASES.items():
        if old in out and new not in out:
            out[new] = out.pop(old)
    return out


def table_rows(summary: Mapping[str, object]) -> list[tuple[str, str]]:
    """(row label, formatted values) in registry order, metrics of a row joined by " / "."""
    rows: dict[str, list[str]] = {}
    g = summary.get("goodput_slo")
    counted = (f"goodput (TTFT ≤ {_float(g, 'ttft_s'):g} s, ≥ {_float(g, 'output_tok_s'):g} "
               "tok/s):" if isinstance(g, Mapping) and {"ttft_s", "output_tok_s"} <= set(g)
               else "goodput:")           # the thresholds wherever the figure is shown
    for m in METRICS:
        if m.row is not None:
            row = m.row.replace("goodput:", counted, 1)
            rows.setdefault(row, []).append(m.format(read(summary, m.key)))
    return [(label, " / ".join(values)) for label, values in rows.items()]


def _float(m: Mapping[str, object], key: str) -> float:
    return to_float(m[key])


def vocabulary_markdown(recall: bool = False) -> str:
    """The metric reference table of docs/metrics.md (between its `metrics-registry`
    markers); with `recall`, docs/recall.md's table of the probe metrics instead."""
    lines = ["| metric | unit | what it is | how it aggregates |", "|---|---|---|---|"]
    for m in METRICS:
        if (m.source == "probes") != recall:
            continue
        unit = "share (0..1)" if m.unit == "share" else m.unit
        lines.append(f"| `{m.key}` | {unit} | {m.definition} | {m.aggregation} |")
    return "\n".join(lines)


def write_vocabulary(page: Path) -> None:
    """Replace the table between the page's `metrics-registry` markers."""
    begin, end = "<!-- metrics-registry:begin -->\n", "\n<!-- metrics-registry:end -->"
    text = page.read_text(encoding="utf-8")
    head, rest = text.split(begin, 1)
    page.write_text(head + begin + vocabulary_markdown() + end + rest.split(end, 1)[1],
                    encoding="utf-8")


if __name__ == "__main__":
    import sys
    if sys.argv[1:] == ["--write"]:
        write_vocabulary(Path(__file__).resolve().parents[2] / "docs" / "metrics.md")
    else:
        print(vocabulary_markdown(recall="--recall" in sys.argv[1:]))
