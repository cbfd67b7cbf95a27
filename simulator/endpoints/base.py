"""The `Endpoint` protocol and the request/response types every endpoint shares.

The driver builds an `LLMRequest`, awaits `Endpoint.send`, and gets an `LLMResponse`
(success) or an `EndpointError` carrying an `ErrorType` and whatever timings were
measured before the failure. Times are seconds on the loop's monotonic clock.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypedDict, runtime_checkable

from simulator.protocol.messages import Block, Message, Prefix
from simulator.records.prometheus import MetricsRow
from simulator.twin.core.stats import EngineStats
from simulator.util.jsontypes import JSONObject


class ErrorType(enum.StrEnum):
    RATE_LIMITED = "rate_limited"          # 429
    OVERLOADED = "overloaded"              # 529
    SERVER = "server_error"                # other 5xx
    PROXY_CUTOFF = "proxy_cutoff"          # 524 and friends (proxy gave up)
    TIMEOUT = "timeout"                    # connect/read timeout, stalled server
    CONNECTION = "connection"              # refused/reset before any byte
    DISCONNECT = "disconnect"              # stream cut after it started
    STREAM_ERROR = "stream_error"          # `error` event after HTTP 200
    MALFORMED = "malformed_stream"         # SSE we cannot parse
    CONTEXT_OVERFLOW = "context_overflow"  # prompt too long (triggers compaction)
    BAD_REQUEST = "bad_request"            # other 400/413/422
    AUTH = "auth"                          # 401/403
    NOT_FOUND = "not_found"                # 404: not an Anthropic endpoint?
    CANCELLED = "cancelled"                # we stopped it (deadline, Ctrl-C)
    FIRST_BYTE_TIMEOUT = "first_byte_timeout"  # no response head within first_byte_s
    STREAM_TIMEOUT = "stream_timeout"      # the attempt ran past total_s
    RESPONSE_TOO_LARGE = "response_too_large"  # more than max_response_bytes
    OTHER = "other"

    @property
    def retryable(self) -> bool:
        return self in _RETRYABLE


_RETRYABLE = frozenset({ErrorType.RATE_LIMITED, ErrorType.OVERLOADED, ErrorType.SERVER,
                        ErrorType.PROXY_CUTOFF, ErrorType.TIMEOUT, ErrorType.CONNECTION,
                        ErrorType.DISCONNECT, ErrorType.STREAM_ERROR, ErrorType.MALFORMED,
                        ErrorType.FIRST_BYTE_TIMEOUT, ErrorType.STREAM_TIMEOUT})


@dataclass(frozen=True, slots=True)
class LLMRequest:
    """One Messages-API call. `hints` are advisory metadata for simulated servers
    (e.g. ``{"turn_kind": "edit"}``) sent as `x-endurance-*` headers over HTTP; real
    servers ignore them. `sampling`: the sampling fields beyond `temperature` the
    scenario sets (`top_p`, `top_k`, `repetition_penalty`, `frequency_penalty`,
    `presence_penalty`, vLLM's names); a field not in it is not sent, and the server
    applies its own default (vLLM: the model's generation config)."""

    model: str
    prefix: Prefix
    messages: tuple[Message, ...]
    max_tokens: int
    temperature: float | None = None
    session_id: str = ""
    hints: dict[str, str] = field(default_factory=dict)
    sampling: dict[str, float | int] = field(default_factory=dict)

    def to_api_kwargs(self) -> dict[str, object]:
        """Keyword arguments for `messages.create` / the JSON body (without `stream`)."""
        kw: dict[str, object] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": [{"type": "text", "text": self.prefix.system,
                        "cache_control": {"type": "ephemeral"}}],
            "messages": [m.to_api() for m in self.messages],
        }
        if self.prefix.tools:
            kw["tools"] = list(self.prefix.tools)
        if self.temperature is not None:
            kw["temperature"] = self.temperature
        # Messages fields; the scenario refuses penalties on this protocol (vLLM's
        # Anthropic endpoint drops them), so anything else here is sent as given
        kw.update(self.sampling)
        return kw


@dataclass(frozen=True, slots=True)
class Usage:
    """Server-reported usage. `None` means the server did not say (not zero)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None

    @property
    def prompt_tokens(self) -> int | None:
        if self.input_tokens is None:
            return None
        return (self.input_tokens + (self.cache_read_input_tokens or 0)
                + (self.cache_creation_input_tokens or 0))

    def merged(self, later: Usage) -> Usage:
        """Later values win per field (message_delta over message_start)."""
        return Usage(
            later.input_tokens if later.input_tokens is not None else self.input_tokens,
            later.output_tokens if later.output_tokens is not None else self.output_tokens,
            later.cache_read_input_tokens if later.cache_read_input_tokens is not None
            else self.cache_read_input_tokens,
            later.cache_creation_input_tokens if later.cache_creation_input_tokens is not None
            else self.cache_creation_input_tokens,
        )

    @staticmethod
    def from_mapping(d: object) -> Usage:
        if d is None:
            return Usage()
        def get(key: str) -> int | None:
            v = d.get(key) if isinstance(d, dict) else getattr(d, key, None)
            return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

        return Usage(get("input_tokens"), get("output_tokens"),
                     get("cache_read_input_tokens"), get("cache_creation_input_tokens"))


@dataclass(frozen=True, slots=True)
class Timing:
    """Monotonic timestamps of one attempt. `token_times` holds one entry per
    content delta received (the arrival time of each chunk of generated text).
    `first_chunk`: the first streamed chunk of the reply, text or not, which is what
    vLLM's bench client times as the first token. An OpenAI chat role chunk comes with
    the first token, before a reasoning model's first text (gpt-oss: three header
    tokens later). None where the dialect knows no earlier chunk than its first text."""

    sent: float
    first_token: float | None = None
    last_token: float | None = None
    done: float | None = None
    n_deltas: int = 0
    first_chunk: float | None = None


class ReplyExtra(TypedDict, total=False):
    """What an endpoint knows of a reply beyond the Messages API: the wire's delta
    times and request id, the in-process twin's per-request counters, the replica that
    answered (a fleet), a P/D reply's prefill placement and KV pull, the client's n-gram
    reference count. A key is there only where the endpoint knows it; the turn row's
    columns are read from these (`session/agent.py`, `records/rows.py`)."""

    num_preemptions: int
    spec_drafts: int
    spec_draft_tokens: int
    spec_accepted_tokens: int
    forward_passes: int              # steps that emitted its tokens
    ngram_ref_passes: int | None
    ngram_ref_tokens: int
    queue_s: float | None            # arrival → first scheduled (engine seconds)
    host_cached_tokens: int          # of the cached tokens, loaded from the host tier
    replica: str                     # the replica that answered ("0", …)
    remote_tokens: int               # P/D: prompt tokens whose KV came from a prefill
    prefill_where: str               # P/D: remote | local
    prefill_instance: int
    prefill_queue_s: float
    prefill_s: float
    kv_transfer_bytes: int
    kv_transfer_wait_s: float
    token_times: Sequence[float]     # the wire's: one monotonic time per content delta
    request_id: str | None           # the server's request id header


@dataclass(frozen=True, slots=True)
class LLMResponse:
    content: tuple[Block, ...]
    stop_reason: str | None
    usage: Usage
    timing: Timing
    output_tokens_est: int
    status: int = 200
    extra: ReplyExtra = field(default_factory=ReplyExtra)

    @property
    def text(self) -> str:
        return "".join(getattr(b, "text", "") for b in self.content)


class EndpointError(Exception):
    """A failed attempt, classified, with what was measured before it failed."""

    def __init__(self, error_type: ErrorType, message: str, *, status: int | None = None,
                 retry_after_s: float | None = None, timing: Timing | None = None,
                 partial_output_tokens: int = 0) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.status = status
        self.retry_after_s = retry_after_s
        self.timing = timing
        self.partial_output_tokens = partial_output_tokens
        self.replica: str | None = None     # set by a fleet router: which replica failed


def classify_status(status: int, body_text: str = "") -> ErrorType:
    """Map an HTTP status (and the error body) to an `ErrorType`."""
    low = body_text.lower()
    if status == 429:
        return ErrorType.RATE_LIMITED
    if status == 529:
        return ErrorType.OVERLOADED
    if status in (520, 522, 523, 524, 598):
        return ErrorType.PROXY_CUTOFF
    if status == 504 or status == 408:
        return ErrorType.TIMEOUT
    if status in (401, 403):
        return ErrorType.AUTH
    if status == 404:
        return ErrorType.NOT_FOUND
    if status in (400, 413, 422):
        if _looks_like_overflow(low):
            return ErrorType.CONTEXT_OVERFLOW
        return ErrorType.BAD_REQUEST
    if 500 <= status < 600:
        return ErrorType.SERVER
    return ErrorType.OTHER


_OVERFLOW_MARKERS = ("prompt is too long", "context length", "maximum context",
                     "context_length_exceeded", "too many tokens", "exceeds the context",
                     "context window", "max_model_len", "exceed_context_size",
                     "exceeds the available context")


def _looks_like_overflow(low: str) -> bool:
    return any(m in low for m in _OVERFLOW_MARKERS)


class Endpoint(Protocol):
    """Anything that answers a Messages request, streaming, and measures it."""

    name: str
    simulated: bool

    async def send(self, request: LLMRequest) -> LLMResponse:
        """Send one attempt. Raises `EndpointError` on failure (never retries)."""
        ...

    async def aclose(self) -> None:
        ...

    def describe(self) -> JSONObject:
        """What to write into the manifest (no secrets)."""
        ...


# a driver task of an in-process engine, made when the run starts (an `async def`'s
# coroutine function: what `asyncio.create_task` takes)
BackgroundTask = Callable[[], Coroutine[object, object, None]]


@runtime_checkable
class EngineEndpoint(Endpoint, Protocol):
    """An endpoint that runs its own engine in this process (the in-process twin): the
    run drives it, samples its log and reads its counters — typed, never by `getattr`."""

    def background(self) -> list[BackgroundTask]:
        """The engine's driver tasks, run beside the sessions."""
        ...

    def timeline_rows(self) -> list[MetricsRow]:
        """The engine log as `server_metrics` rows."""
        ...

    def engine_stats(self) -> EngineStats:
        """The engine's counters at the end of the run."""
        ...

    def stats(self) -> dict[str, object]:
        """`engine_stats()` as the summary reads it, with what has no typed field yet
        (the host KV tier's counters, a fleet's per-replica entries)."""
        ...

    def continue_timeline(self, offset_s: float) -> None:
        """A resumed run's engine log continues from `offset_s`."""
        ...


@runtime_checkable
class SampledEngine(Protocol):
    """An in-process engine whose log a live view can read while the run goes on."""

    def timeline_since(self, done: int) -> tuple[list[MetricsRow], int]:
        """The log's rows after its first `done` windows, and how many are done now."""
        ...
