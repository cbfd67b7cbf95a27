"""The per-request record: frozen, flat, units in the names.

One row per attempt sent (turns, summary requests, retries, recall probes). Token fields named
`*_est` are client-side cl100k estimates; the others are what the server reported
(None when it did not report them). Times: `started_at` is Unix wall time for labels;
every duration is computed from the monotonic clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any, Literal, TypedDict

from simulator.clock import RunClock
from simulator.util.jsontypes import JSONObject
from simulator.util.numbers import is_number, to_float

RequestKind = Literal["turn", "summary", "probe"]


@dataclass(frozen=True, slots=True)
class TurnRecord:
    run_id: str
    session_id: str
    turn_index: int                 # 0-based turn of the session (summary: the turn it precedes)
    request_kind: RequestKind
    attempt: int                    # 1-based attempt number of this request
    started_at: float               # Unix epoch seconds (label only)
    started_mono_s: float           # monotonic seconds since the run started
    context_tokens_est: int         # client estimate of the whole prompt
    reusable_prefix_tokens: int     # client-side: longest prefix shared with any earlier request
    max_tokens: int
    turn_kind: str                  # template name (or "summary")
    think_time_s: float             # idle time before this request (user think / tool latency)
    input_tokens: int | None = None           # server: uncached prompt tokens
    cache_read_tokens: int | None = None      # server: usage.cache_read_input_tokens
    cache_creation_tokens: int | None = None  # server: usage.cache_creation_input_tokens
    prompt_tokens: int | None = None          # server: input + cache read + cache creation
    output_tokens: int | None = None          # server-reported, else client count of deltas
    output_tokens_est: int | None = None      # client cl100k estimate of the reply text
    ttft_s: float | None = None
    decode_tok_s: float | None = None
    turn_tok_s: float | None = None
    e2e_s: float | None = None
    stop_reason: str | None = None
    compaction: str | None = None            # policy that fired just before this request
    compaction_messages_removed: int = 0
    compaction_tokens_removed: int = 0
    error_type: str | None = None
    error_message: str | None = None
    http_status: int | None = None
    ok: bool = True
    # speculative decoding, per request: only the in-process twin reports these (vLLM
    # and other servers count them per engine, not per request), so None elsewhere
    spec_drafts: int | None = None            # steps that verified a draft for it
    spec_draft_tokens: int | None = None      # draft tokens proposed
    spec_accepted_tokens: int | None = None   # draft tokens accepted
    spec_forward_passes: int | None = None    # forward passes that emitted its tokens
    # passes the reply would take under the reference n-gram proposer, set with
    # speculation off too: what n-gram speculation would see (twin/predictability). The
    # twin counts its own ids; for a real server the client counts its cl100k tokens
    # (endpoints/client_meter) and gives their number for the reply, an estimate
    ngram_ref_passes: int | None = None
    ngram_ref_tokens: int | None = None       # the client's reply tokens (None: the twin's)
    # server queue wait: request arrived → first scheduled (s); the twin's engine knows
    # it, a real server's rows leave it None (its /metrics histogram gives a mean)
    queue_s: float | None = None
    # coordinated omission: sent − planned start (previous reply + think/tool time, or
    # the end of a retry back-off), s; the client's own delay (limiter, a busy loop)
    schedule_lag_s: float | None = None
    # recall probes (request_kind = probe, `session/probing.py`); None on other rows.
    # A probe is turn `turn_index`'s context plus one question about one planted fact.
    fact_id: str | None = None                # "<session>:f<n>"
    fact_kind: str | None = None              # user_value | tool_value | decision | edited_path
    fact_turn: int | None = None              # the turn the fact was planted at
    fact_age_turns: int | None = None         # turn_index − fact_turn
    fact_compactions_crossed: int | None = None  # compactions since it entered the context
    fact_retained: str | None = None          # verbatim | summary | dropped (client-side)
    probe_reason: str | None = None           # compaction | turn | end, "+"-joined
    probe_expected: str | None = None         # the planted value
    probe_reply: str | None = None            # the reply's text (first 200 characters)
    probe_correct: bool | None = None         # the reply names the value (normalised)
    # KV tiers, per request (the in-process twin's; None elsewhere): preemptions it
    # suffered, and the share of its cached tokens loaded from the host tier
    preemptions: int | None = None
    kv_host_cached_tokens: int | None = None
    # a fleet (`--replicas`, several `--endpoint`s): the replica that answered ("0", …)
    replica: str | None = None
    # prefill/decode disaggregation (the twin's `fleet.prefill`; None elsewhere): where
    # the prompt was prefilled (remote | local to its decode instance), the KV bytes
    # pulled to the decode instance, and its wait for them (s, link queue included)
    prefill_where: str | None = None
    kv_transfer_bytes: int | None = None
    kv_transfer_wait_s: float | None = None
    # sent → the reply's first streamed chunk, text or not: vLLM's bench client's TTFT
    # (an OpenAI chat role chunk comes with the first token, a reasoning model's first
    # text later: gpt-oss's three header tokens); ttft_s where no earlier chunk is known
    first_chunk_s: float | None = None

    def to_row(self) -> JSONObject:
        """The row as a dict of its columns, as the journal holds it (what
        `dataclasses.asdict` gives: every field is a scalar, so no deep copy is needed;
        ~10× cheaper, once per request)."""
        return dict(zip(COLUMNS, _VALUES(self), strict=True))

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> TurnRecord:
        """A journal row back as its record: `TurnRecord(**row)`, so a key that is no
        column is a TypeError; the values go in as the row holds them, unchecked (the
        dataclass checks no type, hence the untyped mapping)."""
        return cls(**row)


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(TurnRecord))
_VALUES = attrgetter(*COLUMNS)

# seconds on the loop's clock (the schedule lag too: a client's delay of d wall seconds
# is d × K of the scaled twin's simulated time, like the e2e it adds to)
_SCALED_DURATIONS = ("started_mono_s", "ttft_s", "e2e_s", "schedule_lag_s", "first_chunk_s")
_SCALED_RATES = ("decode_tok_s", "turn_tok_s")               # tokens per loop second
_METRICS_TIMES = ("t_start_s", "t_end_s")                    # a /metrics window's bounds


def in_simulated_time(row: JSONObject, clock: RunClock) -> JSONObject:
    """A row measured on the run's loop clock, in the run's simulated time (against a
    twin at `--time-scale K`: durations × K, rates ÷ K, by `clock`). `think_time_s` is
    drawn in simulated time already, and `started_at` stays a wall-clock label."""
    if clock.rate == 1.0:
        return row
    out = dict(row)
    for k in _SCALED_DURATIONS:
        if (v := out.get(k)) is not None:
            out[k] = clock.to_sim(to_float(v))
    for k in _SCALED_RATES:
        if (v := out.get(k)) is not None:
            out[k] = clock.rate_to_sim(to_float(v))
    return out


def metrics_in_simulated_time(row: Mapping[str, object], clock: RunClock
                              ) -> Mapping[str, object]:
    """A /metrics window row (`t_start_s`, `t_end_s` on the loop clock) in simulated time."""
    if clock.rate == 1.0:
        return row
    return {**row, **{k: clock.to_sim(to_float(v)) for k in _METRICS_TIMES
                      if (v := row.get(k)) is not None}}


# TurnRecord column ← the in-process twin's reply extra (`endpoints/twin.py`)
_SPEC_EXTRAS = (("spec_drafts", "spec_drafts"), ("spec_draft_tokens", "spec_draft_tokens"),
                ("spec_accepted_tokens", "spec_accepted_tokens"),
                ("spec_forward_passes", "forward_passes"),
                ("ngram_ref_passes", "ngram_ref_passes"),
                ("ngram_ref_tokens", "ngram_ref_tokens"))
_TIER_EXTRAS = (("preemptions", "num_preemptions"),
                ("kv_host_cached_tokens", "host_cached_tokens"))


class PDColumns(TypedDict, total=False):
    """`TurnRecord`'s P/D columns, as `pd_columns` gives them (none, or all three)."""

    prefill_where: str
    kv_transfer_bytes: int | None
    kv_transfer_wait_s: float | None


def pd_columns(extra: Mapping[str, object]) -> PDColumns:
    """The per-request P/D columns from a reply's extras (None where absent: every
    endpoint but the twin's P/D instances)."""
    where = extra.get("prefill_where")
    if where is None:
        return {}
    size, wait = extra.get("kv_transfer_bytes"), extra.get("kv_transfer_wait_s")
    return {"prefill_where": str(where),
            "kv_transfer_bytes": int(size) if is_number(size) else None,
            "kv_transfer_wait_s": float(wait) if isinstance(wait, int | float) else None}


def spec_columns(extra: Mapping[str, object]) -> dict[str, int | None]:
    """The per-request speculation columns from a reply's extras (None where absent,
    i.e. for every real server)."""
    return _int_columns(extra, _SPEC_EXTRAS)


def tier_columns(extra: Mapping[str, object]) -> dict[str, int | None]:
    """The per-request KV columns (preemptions, tokens loaded from the host tier) from a
    reply's extras; None where absent (real servers; the host column without a tier)."""
    return _int_columns(extra, _TIER_EXTRAS)


def _int_columns(extra: Mapping[str, object], pairs: tuple[tuple[str, str], ...]
                 ) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for col, key in pairs:
        v = extra.get(key)
        out[col] = int(v) if is_number(v) else None
    return out


def derive_rates(output_tokens: int | None, sent: float, first: float | None,
                 last: float | None) -> tuple[float | None, float | None, float | None, float | None]:
    """(ttft_s, decode_tok_s, turn_tok_s, e2e_s) from monotonic times, per design.md:

    ttft = first − sent; decode = (n − 1) / (last − first); turn = n / (last − sent).
    """
    ttft = (first - sent) if first is not None else None
    e2e = (last - sent) if last is not None else None
    decode = None
    if output_tokens and output_tokens > 1 and first is not None and last is not None \
            and last > first:
        decode = (output_tokens - 1) / (last - first)
    turn = None
    if output_tokens and last is not None and last > sent:
        turn = output_tokens / (last - sent)
    return ttft, decode, turn, e2e
