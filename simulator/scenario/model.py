"""The scenario model: validated once at the edge, immutable afterwards.

Every size is in tokens (cl100k estimates) and every time in seconds. Distributions
are a discriminated union on `dist`; a bare number means a constant. The compaction
policy is a discriminated union on `kind`.
"""

from __future__ import annotations

import math
import random
from itertools import pairwise
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from simulator.scenario.bench import BenchSpec, expand
from simulator.scenario.names import check_name
from simulator.scenario.probes import ProbesSpec
from simulator.scenario.replay import ReplaySpec
from simulator.util.numbers import is_number

# Upper bounds (issue 15): numbers a scenario may hold, so that no value can make a run
# allocate without bound or wait for ever. Token sizes, seconds and counts alike.
MAX_SAMPLE = 10_000_000          # any draw of a distribution (tokens or seconds)
MAX_TOKENS = 10_000_000          # one message, prompt part or reply (tokens)
MAX_WINDOW_TOKENS = 100_000_000  # context windows and compaction thresholds (tokens)
MAX_SECONDS = 86_400.0           # timeouts, back-off (s)
MAX_COUNT = 1_000_000            # message counts, in-flight bounds, rates
MAX_SESSIONS = 100_000           # sessions of one run (a ramp's steps too)


class _Frozen(BaseModel):
    # No NaN or infinity anywhere; booleans are not numbers (YAML `yes` is not 1).
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_booleans_as_numbers(cls, data: object) -> object:
        if isinstance(data, dict):
            for name, f in cls.model_fields.items():
                key = f.alias or name
                value = data.get(key, data.get(name))
                if isinstance(value, bool) and _is_numeric(f.annotation):
                    raise ValueError(f"{key}: expected a number, got a boolean ({value})")
        return data


def _is_numeric(annotation: object) -> bool:
    """int, float, or a union with one of them (an optional, or `int | "dense"`): a
    boolean is none of its choices."""
    import types
    import typing
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if annotation in (int, float):
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_is_numeric(a) for a in typing.get_args(annotation))
    return False


# ---------------------------------------------------------------- distributions
class _Bounded(_Frozen):
    min: float | None = None
    max: float | None = None

    @model_validator(mode="after")
    def _check_bounds(self) -> _Bounded:
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) must be <= max ({self.max})")
        return self

    def _clip(self, x: float) -> float:
        if self.min is not None:
            x = max(self.min, x)
        if self.max is not None:
            x = min(self.max, x)
        return min(x, MAX_SAMPLE)


class Constant(_Bounded):
    dist: Literal["constant"] = "constant"
    value: float = Field(ge=0, le=MAX_SAMPLE)

    def sample(self, rng: random.Random) -> float:
        return self._clip(self.value)

    @property
    def mean(self) -> float:
        return self._clip(self.value)


class Uniform(_Bounded):
    dist: Literal["uniform"]
    low: float = Field(ge=0, le=MAX_SAMPLE)
    high: float = Field(ge=0, le=MAX_SAMPLE)

    @model_validator(mode="after")
    def _order(self) -> Uniform:
        if self.low > self.high:
            raise ValueError(f"low ({self.low}) must be <= high ({self.high})")
        return self

    def sample(self, rng: random.Random) -> float:
        return self._clip(rng.uniform(self.low, self.high))

    @property
    def mean(self) -> float:
        return (self.low + self.high) / 2


class Normal(_Bounded):
    dist: Literal["normal"]
    mean_: float = Field(alias="mean", ge=0, le=MAX_SAMPLE)
    std: float = Field(ge=0, le=MAX_SAMPLE)
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True,
                              allow_inf_nan=False)

    def sample(self, rng: random.Random) -> float:
        return self._clip(max(0.0, rng.gauss(self.mean_, self.std)))

    @property
    def mean(self) -> float:
        return self.mean_


class LogNormal(_Bounded):
    """Log-normal given by its median and the σ of log(x) — heavy right tail, like
    real tool outputs and reply lengths."""

    dist: Literal["lognormal"]
    median: float = Field(gt=0, le=MAX_SAMPLE)
    sigma: float = Field(ge=0, le=10)

    def sample(self, rng: random.Random) -> float:
        return self._clip(rng.lognormvariate(math.log(self.median), self.sigma))

    @property
    def mean(self) -> float:
        return self.median * math.exp(self.sigma**2 / 2)


Distribution = Annotated[Constant | Uniform | Normal | LogNormal, Field(discriminator="dist")]


def _coerce_dist(v: object) -> object:
    if is_number(v):
        return {"dist": "constant", "value": v}
    if isinstance(v, dict) and "dist" not in v and "value" in v:
        return {"dist": "constant", **v}
    return v


class _WithDists(_Frozen):
    """Accept a bare number wherever a distribution is expected."""

    @model_validator(mode="before")
    @classmethod
    def _numbers_are_constants(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for name, f in cls.model_fields.items():
            key = f.alias or name
            if (key in out and "Distribution" in str(f.annotation)) or (
                    key in out and f.annotation is not None
                    and "Constant" in str(f.annotation)):
                out[key] = _coerce_dist(out[key])
        return out


# ---------------------------------------------------------------- prefix content
class SystemSpec(_Frozen):
    """The system prompt: a file, or a target size of synthetic text."""

    file: str | None = None
    tokens: int | None = Field(default=None, ge=0, le=MAX_TOKENS)

    @model_validator(mode="after")
    def _one_source(self) -> SystemSpec:
        if (self.file is None) == (self.tokens is None):
            raise ValueError("give exactly one of 'file' or 'tokens'")
        return self


class ToolsSpec(_Frozen):
    """Tool definitions: a JSON/YAML file with a list of tools, or a count and a total
    size of synthetic JSON schemas."""

    file: str | None = None
    count: int = Field(default=16, ge=0, le=500)
    tokens: int | None = Field(default=None, ge=0, le=MAX_TOKENS)

    @model_validator(mode="after")
    def _one_source(self) -> ToolsSpec:
        if self.file is not None and self.tokens is not None:
            raise ValueError("give either 'file' or 'tokens', not both")
        if self.file is None and self.tokens is None:
            raise ValueError("give 'file' or 'tokens'")
        return self


ToolKind = Literal["read", "grep", "glob", "bash", "edit", "write", "task", "todo", "web"]


class ToolCall(_WithDists):
    """The tool the assistant calls at the end of a turn, and what comes back."""

    kind: ToolKind
    result_tokens: Distribution
    latency_s: Distribution = Field(default_factory=lambda: Constant(value=0.5))
    error_rate: float = Field(default=0.0, ge=0, le=1)


class TurnTemplate(_WithDists):
    """One kind of turn, drawn with `weight`.

    `tool` is what the assistant calls at the end of its reply (None ends the agent
    loop: the next request starts with a new user prompt after think time).
    `code_edit` marks replies that repeat text already in the context (edits, whole
    file writes): `repeat_fraction` of the reply copies the latest tool result.
    """

    name: str
    weight: float = Field(gt=0, le=1e9)
    output_tokens: Distribution
    tool: ToolCall | None = None
    code_edit: bool = False
    repeat_fraction: float = Field(default=0.8, ge=0, le=1)
    # share of the copied lines the edit changes (the twin's textgen default 0.08);
    # lower gives longer verbatim runs, up to ~20 tokens per pass at 0 (docs/twin-fidelity.md)
    edit_share: float | None = Field(default=None, ge=0, le=1)
    # the reference n-gram tokens per forward pass the twin paces this reply to (a
    # replayed call's measured predictability; textgen): None copies `repeat_fraction`
    tokens_per_pass: float | None = Field(default=None, ge=1, le=1000)


# ---------------------------------------------------------------- compaction
class NoCompaction(_Frozen):
    kind: Literal["none"] = "none"


class PruneCompaction(_Frozen):
    """Each turn, while the context is over `budget_tokens`, drop the oldest
    non-pinned messages `drop_messages` at a time."""

    kind: Literal["prune"]
    budget_tokens: int = Field(gt=0, le=MAX_WINDOW_TOKENS)
    drop_messages: int = Field(default=2, ge=2, le=MAX_COUNT)


class BlockCompaction(_Frozen):
    """Over `high_water_tokens`, drop oldest messages down to `low_water_tokens`."""

    kind: Literal["block"]
    high_water_tokens: int = Field(gt=0, le=MAX_WINDOW_TOKENS)
    low_water_tokens: int = Field(gt=0, le=MAX_WINDOW_TOKENS)

    @model_validator(mode="after")
    def _water_marks(self) -> BlockCompaction:
        if self.low_water_tokens >= self.high_water_tokens:
            raise ValueError(f"low_water_tokens ({self.low_water_tokens}) must be < "
                             f"high_water_tokens ({self.high_water_tokens})")
        return self


class SummarizeCompaction(_Frozen):
    """At `threshold_tokens`, send a real summary request, then replace the history
    with its output plus the last `keep_messages` messages (Claude Code auto-compact)."""

    kind: Literal["summarize"]
    threshold_tokens: int = Field(gt=0, le=MAX_WINDOW_TOKENS)
    summary_max_tokens: int = Field(default=2000, gt=0, le=MAX_TOKENS)
    keep_messages: int = Field(default=4, ge=0, le=MAX_COUNT)
    prompt: str = ("Your task is to create a detailed summary of the conversation so far, "
                   "paying close attention to the user's explicit requests and your previous "
                   "actions. Include file names, code snippets and pending tasks.")


class ClearToolResultsCompaction(_Frozen):
    """Over `trigger_tokens`, replace the contents of all but the last `keep_last`
    tool results with a placeholder (Anthropic clear_tool_uses / microcompact)."""

    kind: Literal["clear_tool_results"]
    trigger_tokens: int = Field(gt=0, le=MAX_WINDOW_TOKENS)
    keep_last: int = Field(default=3, ge=0, le=MAX_COUNT)
    placeholder: str = "[Old tool result content cleared]"


Compaction = Annotated[
    NoCompaction | PruneCompaction | BlockCompaction | SummarizeCompaction
    | ClearToolResultsCompaction,
    Field(discriminator="kind"),
]


# ---------------------------------------------------------------- run shape
class Arrival(_Frozen):
    """How sessions start: all at once, a staggered ramp, or Poisson arrivals."""

    pattern: Literal["all_at_once", "ramp", "poisson"] = "all_at_once"
    interval_s: float = Field(default=0.0, ge=0, le=MAX_SECONDS)   # ramp: gap between starts
    rate_per_s: float = Field(default=1.0, ge=1e-6, le=MAX_COUNT)  # poisson: session starts/s


class GoodputSpec(_Frozen):
    """The per-request SLO the goodput figures count (analysis/goodput.py): a turn request
    met it when its TTFT ≤ `ttft_s` and its output speed (decode tok/s) ≥ `output_tok_s`.
    Defaults: AA-AgentPerf's loosest tier."""

    ttft_s: float = Field(default=15.0, gt=0, le=MAX_SECONDS)
    output_tok_s: float = Field(default=30.0, ge=0, le=1e6)


class RampTier(_Frozen):
    """One SLO tier a ramp's steps are judged against: its `slos` (`metric op value`),
    and, for an output-speed tier (`size --tier`), the per-request goodput SLO its
    `window_goodput_share` is counted under (else the scenario's `goodput:`)."""

    name: str = Field(min_length=1, max_length=64)
    slos: list[str] = Field(min_length=1, max_length=16)
    goodput: GoodputSpec | None = None


class StepRamp(_Frozen):
    """A stepped ramp in one run (docs/sizing.md, `run --ramp`, `size --ramp`): the
    session count steps through `steps` (ascending; `size` builds them from a start ×
    factor or start + step up to its bound), each step held until its own steady-state
    window reaches `hold_s` (a step with no window by `max_step_s` after it began is not
    steady). With `tiers` (the loosest first) every step is judged on its window against
    each: the ramp stops rising after the loosest tier's first failure, `refine` steps
    back down between each tier's last pass and first failure, and `confirm` holds the
    first tier's answer once more. Sessions join a step primed, as a warm start does; one
    that ends is replaced at once (closed loop)."""

    steps: list[int] = Field(min_length=1, max_length=4096)
    # a window under a second holds no whole request: nothing to judge a step on
    hold_s: float = Field(default=180.0, ge=1, le=MAX_SECONDS)
    max_step_s: float = Field(default=1800.0, gt=0, le=MAX_SECONDS)
    tiers: list[RampTier] = Field(default_factory=list, max_length=16)
    refine: bool = True
    confirm: bool = True

    @field_validator("steps")
    @classmethod
    def _ascending(cls, v: list[int]) -> list[int]:
        if any(n < 1 or n > MAX_SESSIONS for n in v) or any(b <= a for a, b in pairwise(v)):
            raise ValueError(f"steps must be ascending session counts within 1 … "
                             f"{MAX_SESSIONS}, got {v[:8]}{'…' if len(v) > 8 else ''}")
        return v

    @model_validator(mode="after")
    def _hold_within_step(self) -> StepRamp:
        if self.hold_s >= self.max_step_s:
            raise ValueError(f"hold_s ({self.hold_s:g}) must be shorter than max_step_s "
                             f"({self.max_step_s:g})")
        return self


class LoadShape(_Frozen):
    """Constant-load runs and warm start (issue 12), for sizing at steady state.

    `duration_s`: sessions run in closed loop — one that ends is replaced at once by a
    fresh one (new session id, new cache-bust nonce) — until this many seconds (virtual
    on the twin, wall on a server); then no new turn starts and in-flight ones finish.
    `warmup_s`/`cooldown_s` bound the steady-state window (s since the run started /
    s before dispatch stops). `warm_start`: each initial session begins at a seeded
    random turn with its history synthesised to that point (nothing sent for it).
    `warm_start_prime` (with warm start): as mid-day, every initial session is active
    from t = 0 (the arrival ramp is skipped for them) and its first request, which
    prefills its history into the cache, waits a seeded random fraction of that turn's
    own think/tool time, so first requests are spread over a think-time interval, not
    ramped; the window opens once they are all answered (docs/kv-tiers.md). False: the
    old warm start (the arrival pattern, first requests at once).
    """

    duration_s: float | None = Field(default=None, gt=0)
    warmup_s: float | None = Field(default=None, ge=0)
    cooldown_s: float = Field(default=0.0, ge=0)
    warm_start: bool = False
    warm_start_prime: bool = True
    ramp: StepRamp | None = None

    @model_validator(mode="after")
    def _ramp_has_its_own_length(self) -> LoadShape:
        if self.ramp is not None and self.duration_s is not None:
            raise ValueError("a stepped ramp ends when its steps are judged (each held "
                             "hold_s); duration_s would cut it short: drop one of them")
        return self


class RetryPolicy(_Frozen):
    max_attempts: int = Field(default=4, ge=1, le=100)
    backoff_s: float = Field(default=1.0, ge=0, le=MAX_SECONDS)
    backoff_max_s: float = Field(default=30.0, ge=0, le=MAX_SECONDS)
    jitter: float = Field(default=0.2, ge=0, le=1)


class Limits(_Frozen):
    max_in_flight: int | None = Field(default=None, ge=1, le=MAX_COUNT)
    requests_per_s: float | None = Field(default=None, gt=0, le=MAX_COUNT)
    max_failed_sessions_frac: float = Field(default=0.5, ge=0, le=1)


class EndpointSpec(_Frozen):
    api_key_env: str = "ANTHROPIC_API_KEY"
    timeout_s: float = Field(default=600.0, gt=0, le=MAX_SECONDS)
    connect_timeout_s: float = Field(default=10.0, gt=0, le=MAX_SECONDS)
    # The lean client (hand-written HTTP/1.1 on asyncio.Protocol) is the default: it
    # spends the least client CPU per streamed token of the three paths
    # (benchmarks/client_ceiling.py); all three record the same fields.
    client: Literal["lean", "aiohttp", "sdk"] = "lean"
    # The wire protocol: Anthropic Messages or OpenAI Chat Completions (same records).
    api: Literal["anthropic", "openai-chat"] = "anthropic"


class Timeouts(_Frozen):
    """Per-attempt limits (seconds, bytes); each ends the attempt with its own error
    type. `idle_s` None = `endpoint.timeout_s`; `null` total/first-byte = unbounded."""

    first_byte_s: float | None = Field(default=600.0, gt=0, le=86_400)
    idle_s: float | None = Field(default=None, gt=0, le=86_400)
    total_s: float | None = Field(default=3600.0, gt=0, le=7 * 86_400)
    max_response_bytes: int | None = Field(default=256 * 1024 * 1024, ge=1024)
    retry_after_max_s: float = Field(default=300.0, ge=0, le=86_400)
    # The pre-flight `GET /v1/models` before a run: its response head and whole reply
    # within this (or first_byte_s / total_s when lower). A listing is ~1 KB; a server
    # that says nothing for 30 s is reported before any results directory exists.
    preflight_s: float = Field(default=30.0, gt=0, le=86_400)


_PENALTIES = ("repetition_penalty", "frequency_penalty", "presence_penalty")


class SamplingSpec(_Frozen):
    """What the requests sample with (issue 48). Each field is sent only when set; a
    server applies its own default to the rest (vLLM: the model's generation_config.json
    under its default `--generation-config auto`; the twin: the model profile's
    `generation_config`). Bounds are vLLM's (`SamplingParams._verify_args`) where it has
    one and the APIs' otherwise: temperature 0–2 (OpenAI's range; Anthropic's is 0–1),
    top_p in (0, 1], top_k -1 or 0 (off) or 1 … 2²⁰ (above any vocabulary),
    repetition_penalty in (0, 10] (vLLM takes any > 0; past 10 a repeated token's logit
    is cut tenfold, no working setting), frequency/presence penalties in [−2, 2].
    `temperature` here, when set, wins over the scenario's top-level `temperature`
    (which the bundled scenarios set to Claude Code's 1)."""

    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    top_k: int | None = Field(default=None, ge=-1, le=1 << 20)
    repetition_penalty: float | None = Field(default=None, gt=0, le=10)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    # vLLM's extra parameter: generate to max_tokens past the end-of-sequence token, as
    # `vllm bench serve --ignore-eos` (the benchmark shape sets it; the twin ignores it:
    # it always replies with the asked length)
    ignore_eos: bool | None = None

    def sent(self) -> dict[str, float | int]:
        """The fields set, other than temperature, by vLLM's names."""
        return {k: v for k, v in self.model_dump(exclude={"temperature"}).items()
                if v is not None}


# A scenario's name goes into its run id, a directory name (255 bytes on most file systems).
MAX_NAME_CHARS = 100


class TwinSpec(_Frozen):
    hardware: str = "a40"
    model: str = "qwen3-coder-30b-a3b-awq"
    spec: str = "off"          # off | ngram:K | draft:K | mtp:K
    # vLLM engine flags the twin models (run: --kv-dtype, --gpu-memory-utilization,
    # --kv-cache-gib, --no-prefix-caching); None keeps the profile's setting
    kv_dtype: Literal["auto", "bf16", "fp8"] = "auto"
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    kv_cache_gib: float | None = Field(default=None, gt=0)
    prefix_caching: bool = True
    # host KV tier (--kv-offload-gib), at most 1 PiB (1e308 overflowed its block count)
    kv_offload_gib: float = Field(default=0.0, ge=0, le=1_048_576.0)
    # vLLM --max-num-batched-tokens / --max-num-seqs; None keeps the profile's (with
    # speculation on, the profile's spec_max_num_batched_tokens unless this is set)
    max_num_batched_tokens: int | None = Field(default=None, gt=0, le=1 << 24)
    max_num_seqs: int | None = Field(default=None, gt=0, le=1 << 16)
    # hybrids' kept linear-attention states (vLLM --prefix-cache-retention-interval): 0 the
    # replay boundary and shared-prefix junctions (vLLM 0.32's default), "dense" every
    # block boundary a step ends on (vLLM's None), N also every N tokens; None: the
    # vllm_version's default
    prefix_cache_retention_interval: Annotated[int, Field(ge=0)] | Literal["dense"] | None = None
    # the vLLM release the twin imitates (twin/model/vllm_versions.py: the defaults that
    # moved between releases, e.g. the retention above); None: the profile's (0.32)
    vllm_version: str | None = Field(default=None, pattern=r"^v?\d+\.\d+(\.\d+)?$",
                                     max_length=16)
    # a replica of `tp` GPUs (vLLM --tensor-parallel-size; `twin/model/parallel`) and,
    # for MoE models, experts split whole over them (--enable-expert-parallel); at most
    # 64 (past any single NVLink domain's GPUs)
    tp: int = Field(default=1, ge=1, le=64)
    ep: bool = False

    @field_validator("vllm_version", mode="before")
    @classmethod
    def _version_text(cls, v: object) -> object:
        """YAML and --set read 0.28 as a number: releases have two-digit minors, so a
        number whose own text is two-digit is that release. One that is not (0.3: was
        it 0.30 or 0.3?) lost what was written: refused, not guessed (issue 57)."""
        if isinstance(v, float):
            if repr(v) != f"{v:.2f}":
                raise ValueError(f"{v!r} is read as a number, which drops trailing zeros "
                                 f"(0.30 reads as 0.3): quote it, e.g. \"{v:.2f}\"")
            return f"{v:.2f}"
        return v

    def engine_overrides(self) -> dict[str, object]:
        """These settings as `build_perf_model` overrides."""
        out: dict[str, object] = {"kv_dtype": self.kv_dtype}
        for key in ("max_num_batched_tokens", "max_num_seqs"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.gpu_memory_utilization is not None:
            out["gpu_memory_utilization"] = self.gpu_memory_utilization
        if self.kv_cache_gib is not None:
            out["kv_cache_gib"] = self.kv_cache_gib
        if not self.prefix_caching:
            out["enable_prefix_caching"] = False
        if self.kv_offload_gib > 0:
            out["kv_offload_gib"] = self.kv_offload_gib
        if self.vllm_version is not None:
            out["vllm_version"] = self.vllm_version
        if self.tp != 1:
            out["tensor_parallel_size"] = self.tp
        if self.ep:
            out["enable_expert_parallel"] = True
        keep = self.prefix_cache_retention_interval
        if keep is not None:
            out["prefix_cache_retention_interval"] = None if keep == "dense" else keep
        return out


class FleetSpec(_Frozen):
    """Replicas behind a router (`docs/fleet.md`; policies: `twin/router.py`). On the
    twin, `replicas` engines; against several `--endpoint`s, one replica per URL."""

    replicas: int = Field(default=1, ge=1, le=1024)
    router: Literal["round_robin", "least_loaded", "session_affinity",
                    "prefix_aware", "kv_cost"] = "round_robin"
    # session_affinity: a session leaves a replica holding ≥ floor in flight and more
    # than (1 + tolerance) × the fleet's mean (or KV-bound with a queue)
    affinity_floor: int = Field(default=4, ge=1)
    affinity_tolerance: float = Field(default=1.0, ge=0)
    # prefix_aware: llm-d's scorer weights (prefix, queue, KV utilisation)
    prefix_weight: float = Field(default=3.0, ge=0)
    queue_weight: float = Field(default=2.0, ge=0)
    kv_weight: float = Field(default=2.0, ge=0)
    # prefill/decode disaggregation (docs/disaggregation.md, `twin/pd`): `prefill` > 0
    # adds that many prefill instances and makes the `replicas` decode instances
    # (routed by session affinity); a prompt whose part uncached on its decode instance
    # exceeds `max_local_prefill` tokens is prefilled remotely (Dynamo's rule), its KV
    # pulled over the card's `kv_link` (hardware profile; bandwidth/latency overridable)
    prefill: int = Field(default=0, ge=0, le=1024)
    prefill_router: Literal["least_loaded", "prefix_aware", "kv_cost",
                            "round_robin"] = "prefix_aware"
    max_local_prefill: int = Field(default=1000, ge=0)
    kv_link: str = Field(default="auto", min_length=1, max_length=40)   # auto: IB, RoCE, …
    # bounded as `twin/pd/policy.py` bounds a link (MIN_LINK_GB_S, MAX_LINK_LATENCY_S):
    # past 1 Gbit/s Ethernet's pace or a second per transfer a run never ends (issue 57)
    kv_link_gb_s: float | None = Field(default=None, ge=0.1)      # inf: instantaneous
    kv_link_latency_s: float | None = Field(default=None, ge=0, le=1.0, allow_inf_nan=False)
    # the prefill instances' TP degree (vLLM --tensor-parallel-size on the prefill role;
    # decode TP4, prefill TP1 is common); None: twin.tp, as the decode instances
    prefill_tp: int | None = Field(default=None, ge=1, le=64)

    @model_validator(mode="after")
    def _no_router_under_pd(self) -> FleetSpec:
        """A P/D fleet picks decode instances by session affinity and prefill instances
        by `prefill_router`: another `router` would be silently dropped (issue 57). The
        default (round_robin) cannot be told from an unset one in a dumped scenario."""
        if self.prefill > 0 and self.router not in ("round_robin", "session_affinity"):
            raise ValueError(f"fleet.router {self.router}: a P/D fleet (fleet.prefill > 0) "
                             "picks decode instances by session affinity and prefill "
                             "instances by fleet.prefill_router; drop fleet.router (or --router)")
        return self


class Scenario(_WithDists):
    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS)   # part of the run id
    description: str = ""
    model: str = "default"
    max_tokens: int = Field(default=32000, gt=0, le=MAX_TOKENS)
    temperature: float | None = Field(default=1.0, ge=0, le=2)
    sampling: SamplingSpec = Field(default_factory=SamplingSpec)
    history: Literal["live", "scripted"] = "live"
    # How reply lengths are steered: "max_tokens" sends each turn's drawn output size as
    # max_tokens (works on any server; replies end with stop_reason max_tokens when the
    # model would go on); "hint" sends `max_tokens` and the size as an advisory header
    # that only the twin honours (real models then choose their own length).
    output_control: Literal["max_tokens", "hint"] = "max_tokens"
    sessions: int = Field(default=1, ge=1, le=MAX_SESSIONS)
    turns: int = Field(default=100, ge=1, le=1_000_000)
    seed: int = Field(default=0, ge=-(2**63), le=2**63 - 1)
    deadline_s: float | None = Field(default=None, gt=0, le=100 * 365 * MAX_SECONDS)
    arrival: Arrival = Field(default_factory=Arrival)
    load: LoadShape = Field(default_factory=LoadShape)
    goodput: GoodputSpec = Field(default_factory=GoodputSpec)
    system: SystemSpec = Field(default_factory=lambda: SystemSpec(tokens=3000))
    tools: ToolsSpec = Field(default_factory=lambda: ToolsSpec(tokens=16000))
    cache_bust: Literal["none", "per_session", "per_request"] = "none"
    first_prompt_tokens: Distribution = Field(default_factory=lambda: Constant(value=400))
    user_prompt_tokens: Distribution = Field(default_factory=lambda: Constant(value=120))
    think_time_s: Distribution = Field(default_factory=lambda: Constant(value=0.0))
    turn_templates: tuple[TurnTemplate, ...] = ()   # at least one unless `replay` is set
    compaction: Compaction = Field(default_factory=NoCompaction)
    context_window_tokens: int = Field(default=262_144, gt=0, le=MAX_WINDOW_TOKENS)
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    limits: Limits = Field(default_factory=Limits)
    endpoint: EndpointSpec = Field(default_factory=EndpointSpec)
    timeouts: Timeouts = Field(default_factory=Timeouts)
    twin: TwinSpec = Field(default_factory=TwinSpec)
    # Planted facts and recall probes (issue 22; `scenario/probes.py`); None = off.
    probes: ProbesSpec | None = None
    fleet: FleetSpec = Field(default_factory=FleetSpec)
    # Set by the loader: where relative file references resolve from.
    base_dir: str = "."
    # A recorded session script (`endurance import claude-code`) replayed instead of
    # synthetic turns; `contains_verbatim_content` says loudly that it holds real text.
    replay: ReplaySpec | None = None
    # Journal each request's chained token-block hashes (blocks.jsonl) so the run can
    # be exported as a cc-traces / Mooncake trace (`endurance export`).
    record_blocks: bool = False
    contains_verbatim_content: bool = False
    # The benchmark load shape (`scenario/bench.py`, `run --bench`): its workload fields
    # are set from this block before validation
    bench: BenchSpec | None = None

    @model_validator(mode="before")
    @classmethod
    def _bench_shape(cls, data: object) -> object:
        return expand(data) if isinstance(data, dict) and data.get("bench") is not None \
            else data

    @field_validator("name")
    @classmethod
    def _name_is_a_file_name(cls, v: str) -> str:
        return check_name(v)

    @model_validator(mode="after")
    def _unique_template_names(self) -> Scenario:
        if not self.turn_templates and self.replay is None:
            raise ValueError("turn_templates: at least one template is required (or a replay)")
        if self.replay is not None:
            if self.replay.contains_verbatim_content and not self.contains_verbatim_content:
                raise ValueError("replay holds verbatim content: set contains_verbatim_content: true")
            if self.sessions % len(self.replay.sessions):
                raise ValueError(f"sessions ({self.sessions}) must be a multiple of the "
                                 f"{len(self.replay.sessions)} recorded sessions")
        if self.replay is not None and self.replay.team is not None:
            load = self.load
            for key, given in (("duration_s", load.duration_s is not None),
                               ("warm_start", load.warm_start), ("ramp", load.ramp is not None)):
                if given:
                    flag = "--" + key.removesuffix("_s").replace("_", "-")
                    raise ValueError(f"load.{key} ({flag}): a team replay runs the team's own "
                                     "arrivals through its day; drop it (a shorter "
                                     "window is imported: import … --busiest 1h)")
        names = [t.name for t in self.turn_templates]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"turn template names must be unique: {sorted(dup)}")
        return self

    @model_validator(mode="after")
    def _sampling_on_the_wire(self) -> Scenario:
        sp = self.sampling
        if self.endpoint.api == "anthropic":
            for key in _PENALTIES:
                if getattr(sp, key) is not None:
                    raise ValueError(
                        f"sampling.{key}: the Anthropic Messages API has no penalty fields "
                        f"and vLLM's Anthropic endpoint drops them; send penalties with "
                        f"endpoint.api: openai-chat")
        return self

    def wire_sampling(self) -> tuple[float | None, dict[str, float | int]]:
        """(the temperature the requests send, the other sampling fields they send)."""
        sp = self.sampling
        temperature = sp.temperature if sp.temperature is not None else self.temperature
        return temperature, sp.sent()
