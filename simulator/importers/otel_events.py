"""OTLP records → the requests and tool runs of a team's day (sizes and times only).

Two sources:

* **Claude Code's events** (its monitoring guide; `CLAUDE_CODE_ENABLE_TELEMETRY=1`,
  `OTEL_LOGS_EXPORTER=otlp`): `claude_code.api_request` with `session.id`, `model`,
  `input_tokens` (uncached), `cache_read_tokens`, `cache_creation_tokens`,
  `output_tokens`, `duration_ms` and `event.timestamp`; `query_source` where the
  build sends it (a sub-agent or an auxiliary request, kept as its own stream);
  `claude_code.tool_result` (`tool_name`, `duration_ms`, `tool_result_size_bytes`);
  `claude_code.user_prompt` (`prompt_length`; a `prompt` text, when logged, is
  counted and dropped, never kept). An event is logged when its request or tool
  finished: it began `duration_ms` earlier.
* **OTel GenAI spans** (semantic conventions): a span with `gen_ai.usage.input_tokens`
  is a request — `gen_ai.conversation.id`, `gen_ai.request.model`,
  `gen_ai.usage.output_tokens`, `gen_ai.usage.cache_read.input_tokens`,
  `gen_ai.usage.cache_creation.input_tokens`, start and end times; an
  `execute_tool` span is a tool run. The conventions count cached tokens inside
  `input_tokens`; an instrumentation that does not (input < cached) is read as
  Anthropic's split.

Every field is checked where it is read (`otlp_read.attr_*`): a missing session id,
a negative or fractional count, a non-finite duration is one line naming the file,
the record and the attribute.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from simulator.errors import InputError
from simulator.importers.otlp_read import (
    OtlpRecord,
    attr_count,
    attr_seconds,
    attr_text,
    iso_nanos,
)

MAX_DURATION_S = 86_400.0       # one request or tool run: a day at most
MAIN_SOURCES = frozenset({"", "repl_main_thread", "main", "sdk", "print"})


@dataclass(slots=True)
class TeamRequest:
    """One recorded API request: who sent it, when it began (Unix s), its sizes."""

    session: str
    stream: str                  # "" the session's main thread, else its query source
    start_s: float
    api_s: float | None          # request → last reply token (None: not recorded)
    input: int                   # uncached prompt tokens
    cache_read: int
    cache_write: int
    output: int
    model: str | None
    where: str

    @property
    def prompt(self) -> int:
        return self.input + self.cache_read + self.cache_write


@dataclass(slots=True)
class ToolRun:
    session: str
    start_s: float
    end_s: float


@dataclass
class TeamLog:
    """What the records held: requests, tool runs, and counts of the rest."""

    requests: list[TeamRequest] = field(default_factory=list)
    tools: list[ToolRun] = field(default_factory=list)
    prompts: int = 0                 # user prompts seen
    prompt_texts_dropped: int = 0    # of which carried their text (never kept)
    records: int = 0
    skipped: Counter[str] = field(default_factory=Counter)


def _event_name(rec: OtlpRecord) -> str:
    """`claude_code.api_request` whether named by the record (body / eventName) or by
    its `event.name` attribute (`api_request`); another service's record keeps its own."""
    if rec.name.startswith("claude_code."):
        return rec.name
    attr = attr_text(rec, "event.name")
    return f"claude_code.{attr}" if attr else (rec.name or "unnamed")


def _event_time(rec: OtlpRecord) -> float:
    """When the event was logged, Unix s: `event.timestamp`, else the record's time."""
    ts = attr_text(rec, "event.timestamp")
    ns = None
    if ts is not None:
        try:
            ns = iso_nanos(ts)
        except ValueError as exc:
            raise InputError(f"{rec.where} ({rec.name}): attribute 'event.timestamp': "
                             f"{ts[:40]!r} is not a time we read: {exc}") from None
    ns = ns or rec.start_ns
    if not ns:
        raise InputError(f"{rec.where} ({rec.name}): no time (neither 'event.timestamp' "
                         "nor timeUnixNano / observedTimeUnixNano)")
    return ns / 1e9


def _began(rec: OtlpRecord, end_s: float, dur_s: float | None) -> None:
    """An event is logged when its request or tool ends: one that began before 1970
    (its time less its duration) is named, not carried to a day starting before it."""
    if end_s - (dur_s or 0.0) < 0:
        raise InputError(f"{rec.where} ({rec.name}): began before 1970 (its time "
                         f"{end_s:.3f} s after Unix time 0, less 'duration_ms' "
                         f"{(dur_s or 0.0) * 1e3:,.0f})")


def claude_code_events(records: Iterable[OtlpRecord]) -> TeamLog:
    log = TeamLog()
    for rec in records:
        log.records += 1
        name = _event_name(rec)
        if name == "claude_code.api_request":
            end = _event_time(rec)
            dur = attr_seconds(rec, "duration_ms", 1e-3, MAX_DURATION_S)
            _began(rec, end, dur)
            source = attr_text(rec, "query_source") or ""
            log.requests.append(TeamRequest(
                session=_session(rec, "session.id"),
                stream="" if source in MAIN_SOURCES else source,
                start_s=end - (dur or 0.0), api_s=dur,
                input=attr_count(rec, "input_tokens"),
                cache_read=attr_count(rec, "cache_read_tokens", default=0),
                cache_write=attr_count(rec, "cache_creation_tokens", default=0),
                output=attr_count(rec, "output_tokens"),
                model=attr_text(rec, "model"), where=rec.where))
        elif name == "claude_code.tool_result":
            end = _event_time(rec)
            dur = attr_seconds(rec, "duration_ms", 1e-3, MAX_DURATION_S) or 0.0
            _began(rec, end, dur)
            log.tools.append(ToolRun(_session(rec, "session.id"), end - dur, end))
        elif name == "claude_code.user_prompt":
            _session(rec, "session.id")
            log.prompts += 1
            log.prompt_texts_dropped += "prompt" in rec.attrs
        else:
            log.skipped[name[:60]] += 1
    return log


def _session(rec: OtlpRecord, key: str) -> str:
    s = attr_text(rec, key, required=True)
    assert s is not None
    return s


GENAI_REQUEST_OPS = frozenset({"chat", "text_completion", "generate_content", ""})


def genai_spans(records: Iterable[OtlpRecord]) -> TeamLog:
    log = TeamLog()
    for rec in records:
        log.records += 1
        op = attr_text(rec, "gen_ai.operation.name") or ""
        if op == "execute_tool":
            conv = attr_text(rec, "gen_ai.conversation.id")
            if conv is not None and rec.start_ns and rec.end_ns >= rec.start_ns:
                log.tools.append(ToolRun(conv, rec.start_ns / 1e9, rec.end_ns / 1e9))
            continue
        if "gen_ai.usage.input_tokens" not in rec.attrs or op not in GENAI_REQUEST_OPS:
            log.skipped[(op or rec.name)[:60]] += 1
            continue
        conv = _session(rec, "gen_ai.conversation.id")
        if not rec.start_ns:
            raise InputError(f"{rec.where} ({rec.name}): field 'startTimeUnixNano': missing")
        if rec.end_ns and rec.end_ns < rec.start_ns:
            raise InputError(f"{rec.where} ({rec.name}): field 'endTimeUnixNano': before "
                             "the span's start")
        dur = (rec.end_ns - rec.start_ns) / 1e9 if rec.end_ns else None
        if dur is not None and dur > MAX_DURATION_S:
            raise InputError(f"{rec.where} ({rec.name}): a span of {dur:,.0f} s (at most "
                             f"{MAX_DURATION_S:,.0f})")
        total = attr_count(rec, "gen_ai.usage.input_tokens")
        read = attr_count(rec, "gen_ai.usage.cache_read.input_tokens", default=0)
        write = attr_count(rec, "gen_ai.usage.cache_creation.input_tokens", default=0)
        new = total - read - write if total >= read + write else total
        log.requests.append(TeamRequest(
            session=conv, stream=attr_text(rec, "gen_ai.agent.name") or "",
            start_s=rec.start_ns / 1e9, api_s=dur, input=new, cache_read=read,
            cache_write=write, output=attr_count(rec, "gen_ai.usage.output_tokens"),
            model=attr_text(rec, "gen_ai.request.model")
            or attr_text(rec, "gen_ai.response.model"), where=rec.where))
    return log
