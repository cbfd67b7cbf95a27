"""The recorded-session script a replay scenario carries (`Scenario.replay`).

Built by `simulator.importers.claude_code` from Claude Code transcripts. It keeps the
structure and sizes of every call — the blocks of each message, the recorded usage,
stop reason, timings, compaction points and sub-agent sessions — and, by default, no
original text: a block's content is a list of synthetic *spans* (one per distinct
original line, regenerated from the seed at replay time), so repeated text stays
repeated. With `--keep-content` blocks point into the verbatim `texts` table instead
and `contains_verbatim_content` is true. Sizes are tokens (cl100k × `token_scale`),
times are seconds.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# Recorded times (waits, model time, session starts): finite and at most a century, the
# bound of a run's `deadline_s`; the trace importers refuse more than a year up front.
MAX_REPLAY_S = 100 * 365.25 * 86_400


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class ReplayArg(_Frozen):
    """One argument of a tool call: a number/bool kept as is, or a text reference."""

    key: str
    tokens: int = Field(default=0, ge=0)
    text: int | None = None          # index into ReplaySpec.texts (verbatim)
    spans: str | None = None         # synthetic span ranges, e.g. "0-41,7"
    value: int | float | bool | None = None


class ReplayBlock(_Frozen):
    """One content block of a recorded message."""

    kind: Literal["text", "tool_use", "tool_result", "thinking"]
    tokens: int = Field(ge=0)        # size in replay tokens
    tool: str | None = None          # tool name (tool_use, and the tool a result answers)
    id: str | None = None            # tool_use id / tool_result's tool_use_id (anonymised)
    is_error: bool = False
    text: int | None = None
    spans: str | None = None
    numbered_from: int | None = None  # Read output: lines carry "   N→" prefixes from N
    numbered_lines: int | None = Field(default=None, ge=0)  # only the first N lines (else all)
    args: tuple[ReplayArg, ...] = ()
    summary: bool = False            # part of the compact summary that starts a new history


class RecordedUsage(_Frozen):
    input_tokens: int = Field(default=0, ge=0)
    cache_read_tokens: int = Field(default=0, ge=0)
    cache_creation_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_creation_tokens


class CompactionPoint(_Frozen):
    """A compact boundary recorded just before a call; `at` is the index of the call's
    first user block that belongs to the new history (earlier ones were compacted away)."""

    trigger: str = "auto"
    pre_tokens: int | None = None
    at: int = Field(default=0, ge=0)
    # Block-hash traces: the leading messages of the old history the new one keeps
    # (the shared blocks), and the kind of drop inferred from the sizes.
    keep_messages: int = Field(default=0, ge=0)
    inferred: str | None = None


class ReplayCall(_Frozen):
    """One API call: the user blocks sent since the previous reply, and the reply."""

    user: tuple[ReplayBlock, ...] = ()
    assistant: tuple[ReplayBlock, ...] = ()
    usage: RecordedUsage | None = None
    stop_reason: str | None = None
    wait_s: float = Field(default=0.0, ge=0, le=MAX_REPLAY_S)   # idle before the request
    wait_kind: Literal["think", "tool", "none"] = "none"
    model_s: float | None = Field(default=None, ge=0, le=MAX_REPLAY_S)  # request → last reply
    compaction: CompactionPoint | None = None
    spawns: tuple[int, ...] = ()     # sub-agent sessions its Task/Agent call starts
    model: str | None = None         # the model the trace recorded (kept, not sent)
    # how much of the twin's reply copies its context (the import measures the real
    # reply's predictability); None: edit tools copy at the template default, others not
    repeat_fraction: float | None = Field(default=None, ge=0, le=1)
    # share of copied lines edited, set by the import where copying runs beyond what
    # the default edits allow (None: the twin's default)
    edit_share: float | None = Field(default=None, ge=0, le=1)
    # the reference n-gram tokens per pass the twin paces the reply to (the import's
    # measure of the real reply, hidden thinking included: `importers.predictability`);
    # set, it replaces repeat_fraction and edit_share
    tokens_per_pass: float | None = Field(default=None, ge=1, le=1000)
    # telemetry imports: the recorded start since the session began; `timing: arrivals`
    # sends the call then (or when the previous reply arrives, if later)
    at_s: float | None = Field(default=None, ge=0, le=MAX_REPLAY_S)


class ReplaySession(_Frozen):
    id: str
    parent: int | None = None        # index of the parent session (sub-agents)
    parent_call: int | None = None   # the parent's call whose Task/Agent tool_use starts it
    # since the parent (else the run) began
    start_offset_s: float = Field(default=0.0, ge=0, le=MAX_REPLAY_S)
    prefix_tokens: int | None = Field(default=None, ge=0)  # recorded system+tools size
    calls: tuple[ReplayCall, ...] = Field(min_length=1)


class TeamDay(_Frozen):
    """A team's day from its telemetry (`import claude-code-otel` / `otel-genai`): where
    the replay sits in it and the sessions in flight over the whole day."""

    source: str                      # claude-code-otel | otel-genai
    day_start_unix_s: float = Field(ge=0)       # midnight UTC of the first request
    replay_start_s: float = Field(ge=0)         # the replay's t=0, s since day start
    replay_end_s: float = Field(ge=0)           # the window's end (the day's last reply)
    window: str | None = None                   # "10:00-11:00", "busiest 1h", None: all
    scale: float = Field(default=1.0, gt=0)
    sessions: int = Field(ge=0)                 # distinct sessions replayed
    day_sessions: int = Field(ge=0)             # distinct sessions in the (scaled) day
    profile_step_s: int = Field(gt=0)
    day_profile: tuple[int, ...] = ()           # sessions in flight per step, day start on


class ReplaySpec(_Frozen):
    """How to replay, and what was recorded."""

    mode: Literal["recorded", "live"] = "recorded"
    # auto: the recorded compactions unless the scenario names a policy (kind != none)
    compaction: Literal["recorded", "policy", "auto"] = "recorded"
    summary_request: bool = True     # recorded compactions: send the summary call too
    # recorded: the recorded waits between calls; none: no waits; arrivals: each call at
    # its recorded start (`at_s`) or when the previous reply arrives, if later
    timing: Literal["recorded", "none", "arrivals"] = "recorded"
    team: TeamDay | None = None
    max_wait_s: float = Field(default=600.0, ge=0, le=MAX_REPLAY_S)
    summary_prompt_tokens: int = Field(default=120, ge=0)
    token_scale: float = Field(default=1.0, gt=0)
    thinking_in_context: bool = False
    contains_verbatim_content: bool = False
    texts: tuple[str, ...] = ()
    span_tokens: tuple[int, ...] = ()
    span_kinds: str = ""             # one letter per span: c code, p prose, g grep, b bash
    sessions: tuple[ReplaySession, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> ReplaySpec:
        if len(self.span_kinds) != len(self.span_tokens):
            raise ValueError("span_kinds and span_tokens must have the same length")
        if self.texts and not self.contains_verbatim_content:
            raise ValueError("texts hold verbatim content: contains_verbatim_content must be true")
        n = len(self.sessions)
        for i, s in enumerate(self.sessions):
            if s.parent is not None and not 0 <= s.parent < n:
                raise ValueError(f"sessions.{i}.parent: no session {s.parent}")
        return self


def parse_spans(ranges: str) -> list[int]:
    """"0-3,7" → [0, 1, 2, 3, 7]."""
    out: list[int] = []
    for part in ranges.split(","):
        if not part:
            continue
        a, _, b = part.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out


def format_spans(ids: list[int]) -> str:
    """[0, 1, 2, 3, 7] → "0-3,7" (runs of consecutive ids collapse)."""
    parts: list[str] = []
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(parts)
