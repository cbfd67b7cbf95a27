"""The registry's keys as types mypy checks: a misspelt metric or fact name fails mypy.

`MetricKey` names every metric of `metrics_registry.METRICS` (`NumberKey` those whose
value is a number, `LabelKey` the one that is a label) and `FactKey` every fact of
`FACT_KEYS`; `SummaryRecord` is a run summary as summary.json holds it, each key typed.
Code reads a figure by a literal key: `figure(record, "window_ttft_p95_s")` on a record,
`summary.figure("window_ttft_p95_s")` on a `RunSummary`, `record["…"]` where the key is
there; building a record (`{"window_ttft_p95_s": …}`) is checked alike. mypy rejects a
name the registry does not have, but not the key of a plain `record.get("…")` (it
returns `object` for a key the record lacks): read figures with `figure`. A name a user
types (an SLO such as `window_ttft_p95_s<=4`) is checked at run time by `is_metric_key`.
The test tests/analysis/test_metric_keys.py fails while these lists and the registry
differ.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypedDict, TypeGuard, TypeVar, cast, get_args, overload

NumberKey = Literal[
    "sessions", "ok_turns", "requests", "failed_requests", "cancelled_requests",
    "overflow_requests", "summary_requests", "wall_window_s", "output_tokens",
    "aggregate_tok_s", "per_session_tok_s", "turn_tok_s_min", "turn_tok_s_median",
    "turn_tok_s_max", "decode_tok_s_median", "first_third_tok_s", "last_third_tok_s",
    "drift_pct", "ttft_p50_s", "ttft_p95_s", "context_tokens_first", "context_tokens_max",
    "context_tokens_last", "compaction_events", "post_compaction_turn_tok_s_median",
    "other_turn_tok_s_median", "server_cache_read_share", "client_reusable_share",
    "cache_shared_pct", "server_prefix_cache_hit_share", "kv_usage_peak", "preemptions",
    "kv_capacity_tokens", "usd_per_mtok", "tokens_per_forward_pass",
    "spec_mean_acceptance_length", "ngram_reference_tokens_per_pass",
    "spec_acceptance_share", "requested_sessions",
    "achieved_sessions", "achieved_sessions_run", "achieved_in_flight",
    "achieved_in_flight_run", "window_s", "window_output_tokens", "window_aggregate_tok_s",
    "window_per_session_tok_s", "window_n_x_per_session_tok_s", "window_ttft_p50_s",
    "window_ttft_p95_s", "window_itl_p50_s", "window_itl_p95_s", "window_requests",
    "window_usd_per_mtok", "goodput_share", "goodput_requests_per_s", "goodput_tok_s",
    "window_goodput_share", "window_goodput_tok_s", "window_goodput_per_session_tok_s",
    "queue_time_p50_s", "queue_time_p95_s", "queue_share_of_ttft", "server_queue_time_mean_s",
    "window_queue_time_p95_s", "window_queue_share_of_ttft", "window_ttft_slope",
    "window_in_flight_slope", "turns_per_s", "sessions_per_s", "schedule_lag_p95_s",
    "schedule_lag_max_s", "window_turns_per_s", "window_sessions_per_s", "probe_requests",
    "probes_answered", "facts_probed", "probe_recall", "probe_recall_ci_low",
    "probe_recall_ci_high", "fact_retention", "fact_retention_ci_low",
    "fact_retention_ci_high", "gpu_power_mean_w", "gpu_util_mean", "energy_wh",
    "energy_wh_per_mtok", "sessions_per_kw", "remote_prefill_share", "kv_transfer_gb",
    "kv_transfer_wait_p95_s", "ttft_queue_share", "ttft_transfer_share", "ttft_prefill_share",
    "prefill_utilization", "decode_utilization"
]
LabelKey = Literal["ngram_reference_tokens"]   # the metrics whose value is a label
MetricKey = NumberKey | LabelKey

FactKey = Literal[
    "bench", "cache_shared_source", "compaction_messages_removed", "compaction_tokens_removed",
    "compactions_by_kind", "contains_verbatim_content", "deadline_reached", "energy_source",
    "engine", "errors_by_type", "failed_sessions", "fleet", "goodput_slo", "kv_tier",
    "price_per_hour", "ramp", "recall_by_age", "recall_by_compactions_crossed",
    "recall_by_kind", "recall_ci_unit", "retention_by_state", "run_id", "saturated",
    "saturated_reason", "simulated", "status", "status_reason", "steady_state",
    "steady_state_reason", "telemetry", "time_scale", "twin", "usd_per_mtok_counts_idle",
    "window_end_s", "window_start_s", "workers"
]

# facts by the type of their value (`fact` reads each group typed)
FlagFact = Literal["simulated", "steady_state", "saturated", "deadline_reached",
                   "contains_verbatim_content", "usd_per_mtok_counts_idle"]
TextFact = Literal["steady_state_reason", "saturated_reason", "status", "status_reason",
                   "run_id", "cache_shared_source", "recall_ci_unit", "energy_source"]
NumberFact = Literal["price_per_hour", "window_start_s", "window_end_s", "time_scale",
                     "compaction_messages_removed", "compaction_tokens_removed"]
BlockFact = Literal["engine", "twin", "fleet", "kv_tier", "goodput_slo", "ramp", "bench",
                    "recall_by_kind", "recall_by_age", "retention_by_state",
                    "recall_by_compactions_crossed"]

METRIC_KEYS: frozenset[str] = frozenset((*get_args(NumberKey), *get_args(LabelKey)))
FACT_KEYS: frozenset[str] = frozenset(get_args(FactKey))


def is_metric_key(name: str) -> TypeGuard[MetricKey]:
    """True when `name` is a registry metric (a user-typed name, checked at run time)."""
    return name in METRIC_KEYS


class RecallRecord(TypedDict, total=False):
    """The recall probes' figures (`analysis/recall.py`); a policy sweep's row pools
    them over its runs (`policy_sweep.PolicyRow`)."""

    probe_requests: int | None
    probes_answered: int | None
    facts_probed: int | None
    probe_recall: float | None
    probe_recall_ci_low: float | None
    probe_recall_ci_high: float | None
    fact_retention: float | None
    fact_retention_ci_low: float | None
    fact_retention_ci_high: float | None


class SummaryRecord(RecallRecord, total=False):
    """A run summary as summary.json holds it: every registry metric (None when unknown)
    and the facts, each typed. Figures that count are ints, labels strings, the rest
    floats (an int is a float to mypy); nested facts are read with isinstance checks."""

    sessions: int | None
    ok_turns: int | None
    requests: int | None
    failed_requests: int | None
    cancelled_requests: int | None
    overflow_requests: int | None
    summary_requests: int | None
    wall_window_s: float | None
    output_tokens: int | None
    aggregate_tok_s: float | None
    per_session_tok_s: float | None
    turn_tok_s_min: float | None
    turn_tok_s_median: float | None
    turn_tok_s_max: float | None
    decode_tok_s_median: float | None
    first_third_tok_s: float | None
    last_third_tok_s: float | None
    drift_pct: float | None
    ttft_p50_s: float | None
    ttft_p95_s: float | None
    context_tokens_first: float | None
    context_tokens_max: float | None
    context_tokens_last: float | None
    compaction_events: int | None
    post_compaction_turn_tok_s_median: float | None
    other_turn_tok_s_median: float | None
    server_cache_read_share: float | None
    client_reusable_share: float | None
    cache_shared_pct: float | None
    server_prefix_cache_hit_share: float | None
    kv_usage_peak: float | None
    preemptions: float | None
    kv_capacity_tokens: float | None
    usd_per_mtok: float | None
    tokens_per_forward_pass: float | None
    spec_mean_acceptance_length: float | None
    ngram_reference_tokens_per_pass: float | None
    ngram_reference_tokens: str | None
    spec_acceptance_share: float | None
    requested_sessions: int | None
    achieved_sessions: float | None
    achieved_sessions_run: float | None
    achieved_in_flight: float | None
    achieved_in_flight_run: float | None
    window_s: float | None
    window_output_tokens: float | None
    window_aggregate_tok_s: float | None
    window_per_session_tok_s: float | None
    window_n_x_per_session_tok_s: float | None
    window_ttft_p50_s: float | None
    window_ttft_p95_s: float | None
    window_itl_p50_s: float | None
    window_itl_p95_s: float | None
    window_requests: int | None
    window_usd_per_mtok: float | None
    goodput_share: float | None
    goodput_requests_per_s: float | None
    goodput_tok_s: float | None
    window_goodput_share: float | None
    window_goodput_tok_s: float | None
    window_goodput_per_session_tok_s: float | None
    queue_time_p50_s: float | None
    queue_time_p95_s: float | None
    queue_share_of_ttft: float | None
    server_queue_time_mean_s: float | None
    window_queue_time_p95_s: float | None
    window_queue_share_of_ttft: float | None
    window_ttft_slope: float | None
    window_in_flight_slope: float | None
    turns_per_s: float | None
    sessions_per_s: float | None
    schedule_lag_p95_s: float | None
    schedule_lag_max_s: float | None
    window_turns_per_s: float | None
    window_sessions_per_s: float | None
    gpu_power_mean_w: float | None
    gpu_util_mean: float | None
    energy_wh: float | None
    energy_wh_per_mtok: float | None
    sessions_per_kw: float | None
    remote_prefill_share: float | None
    kv_transfer_gb: float | None
    kv_transfer_wait_p95_s: float | None
    ttft_queue_share: float | None
    ttft_transfer_share: float | None
    ttft_prefill_share: float | None
    prefill_utilization: float | None
    decode_utilization: float | None
    # facts (`metrics_registry.FACT_KEYS`)
    errors_by_type: dict[str, int]
    compactions_by_kind: dict[str, int]
    compaction_messages_removed: int
    compaction_tokens_removed: int
    cache_shared_source: str | None
    price_per_hour: float | None
    simulated: bool
    engine: Mapping[str, object]
    twin: Mapping[str, object]
    status: str
    status_reason: str
    failed_sessions: list[str]
    deadline_reached: bool
    run_id: str
    contains_verbatim_content: bool
    workers: object
    time_scale: float
    fleet: Mapping[str, object] | None
    goodput_slo: Mapping[str, object]
    ramp: Mapping[str, object]
    bench: Mapping[str, object]
    steady_state: bool | None
    steady_state_reason: str | None
    window_start_s: float | None
    window_end_s: float | None
    usd_per_mtok_counts_idle: bool
    kv_tier: Mapping[str, object] | None
    saturated: bool | None
    saturated_reason: str | None
    recall_ci_unit: str | None
    recall_by_kind: Mapping[str, Mapping[str, float | None]]
    recall_by_age: Mapping[str, Mapping[str, float | None]]
    retention_by_state: Mapping[str, int]
    recall_by_compactions_crossed: Mapping[str, Mapping[str, float | None]]
    energy_source: str | None
    telemetry: list[Mapping[str, object]]


R = TypeVar("R", bound=SummaryRecord)


@overload
def as_record(built: Mapping[str, object]) -> SummaryRecord: ...
@overload
def as_record(built: Mapping[str, object], kind: type[R]) -> R: ...


def as_record(built: Mapping[str, object],
              kind: type[SummaryRecord] = SummaryRecord) -> SummaryRecord:
    """A mapping whose keys were computed (`dict.fromkeys` over a registry list, a
    comprehension over a record, a record read back from a file) as the record it is:
    a `SummaryRecord`, or the record type `kind` that extends it. mypy checks a record's
    keys only where they are written literally, so this is the one place such a mapping
    becomes a record (docs/architecture.md, "Casts left on purpose")."""
    return cast(SummaryRecord, built)


@overload
def figure(record: SummaryRecord, key: NumberKey) -> float | None: ...
@overload
def figure(record: SummaryRecord, key: LabelKey) -> str | None: ...
@overload
def figure(record: SummaryRecord, key: MetricKey) -> float | str | None: ...


def figure(record: SummaryRecord, key: MetricKey) -> float | str | None:
    """A record's figure by a registry key mypy checks (None when absent or unknown)."""
    return cast(float | str | None, record.get(key))


@overload
def fact(record: SummaryRecord, key: FlagFact) -> bool | None: ...
@overload
def fact(record: SummaryRecord, key: TextFact) -> str | None: ...
@overload
def fact(record: SummaryRecord, key: NumberFact) -> float | None: ...
@overload
def fact(record: SummaryRecord, key: BlockFact) -> Mapping[str, object] | None: ...
@overload
def fact(record: SummaryRecord, key: FactKey) -> object: ...


def fact(record: SummaryRecord, key: FactKey) -> object:
    """A record's fact by a key mypy checks (None when absent)."""
    return record.get(key)
