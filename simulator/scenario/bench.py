"""The benchmark load shape (`bench:`, `run --bench ISL:OSL`): the one every published
serving figure uses, expressed as an ordinary scenario so that it runs the product's
one path (runner → endpoint → recorder → summary) on the twin and on a real server.

What `vllm bench serve` does, and how it maps here (docs/bench.md):

- N requests, each an independent prompt of `input_tokens` (fixed, or uniform in
  [L·(1 − r), L·(1 + r)] as its `--random-range-ratio r`) asking for `output_tokens`
  (the same rule): here N one-turn sessions, the prompt a fresh synthetic text (no
  prefix shared between requests), `prefix_share` of the input a system prompt every
  request shares (its `--prefix-len`, the shared-prefix datasets).
- The output length is enforced: `max_tokens` is the drawn length, and `ignore_eos`
  is sent (vLLM's extra parameter, its `--ignore-eos`), so a real model does not stop
  early; the twin replies with exactly the asked length.
- Its client starts every request at once and gates them by a semaphore of
  `--max-concurrency` C (a closed loop: the next request starts as one finishes), or
  sends them at `--request-rate` R as a Poisson process (burstiness 1), also under the
  semaphore when C is given. Here: all sessions arrive at t = 0 (or Poisson at R) and
  the run's in-flight limit (`limits.max_in_flight`, an asyncio semaphore, first come
  first served) is C.
- Warm-up (`--num-warmups W`): W requests before the measured ones, excluded. Here the
  first W sessions of the same loop (they take the semaphore first) are left out of the
  figures, as GuideLLM's warm-up share is: the measured requests meet a server already
  under load, not a cold one.

Pure: `expand` turns the `bench:` block of a scenario's plain data into the fields it
sets, before the scenario is validated.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

MAX_BENCH_TOKENS = 10_000_000      # the scenario's own bound on a prompt or reply
MAX_REQUESTS = 100_000             # the scenario's session bound (warm-ups included)

# The bundled scenario `run --bench` starts from when no SCENARIO is given (the twin,
# the default model and card; the bench block's defaults).
BUNDLED = Path(__file__).resolve().parents[2] / "scenarios" / "bench.yaml"


class BenchSpec(BaseModel):
    """The `bench:` block. `input_tokens` counts the whole prompt, the shared prefix
    included; `concurrency` None with `request_rate` None sends everything at once
    (vLLM's default `--request-rate inf`, no `--max-concurrency`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, strict=True)

    input_tokens: int = Field(ge=1, le=MAX_BENCH_TOKENS)
    output_tokens: int = Field(ge=1, le=MAX_BENCH_TOKENS)
    range_ratio: float = Field(default=0.0, ge=0, lt=1)
    prefix_share: float = Field(default=0.0, ge=0, lt=1)
    concurrency: int | None = Field(default=None, ge=1, le=MAX_REQUESTS)
    request_rate: float | None = Field(default=None, gt=0, le=1e6)
    requests: int = Field(default=100, ge=1, le=MAX_REQUESTS)
    warmups: int = Field(default=0, ge=0, le=MAX_REQUESTS)
    ignore_eos: bool = True

    @model_validator(mode="after")
    def _fits(self) -> BenchSpec:
        if self.requests + self.warmups > MAX_REQUESTS:
            raise ValueError(f"requests + warmups ({self.requests + self.warmups}) must be "
                             f"at most {MAX_REQUESTS}")
        return self

    @property
    def shared_tokens(self) -> int:
        """The shared system prompt's size (tokens)."""
        return int(round(self.prefix_share * self.input_tokens))

    def lengths(self, mean: int) -> dict[str, object]:
        """A length as the scenario's distribution: constant, or vLLM's uniform range."""
        if self.range_ratio == 0:
            return {"dist": "constant", "value": mean}
        low = max(1, int(mean * (1 - self.range_ratio)))
        return {"dist": "uniform", "low": low, "high": int(mean * (1 + self.range_ratio)),
                "min": 1}

    def describe(self) -> str:
        """One line: the shape as the console and the docs spell it."""
        load = (f"{self.request_rate:g} req/s Poisson" if self.request_rate is not None
                else "all at once")
        if self.concurrency is not None:
            load += f", at most {self.concurrency} in flight"
        lengths = "fixed" if self.range_ratio == 0 else f"uniform ±{self.range_ratio:g}"
        return (f"{self.input_tokens}:{self.output_tokens} tokens ({lengths}), "
                f"{self.requests} requests after {self.warmups} warm-up, {load}"
                + (f", {self.prefix_share:.0%} shared prefix" if self.prefix_share else ""))




def expand(data: Mapping[str, object]) -> dict[str, object]:
    """A scenario's plain data with its `bench:` block turned into the workload fields
    it sets (sessions, prompt and reply sizes, arrivals, in-flight limit, ignore_eos),
    which replace the file's: a scenario file lends a bench its model, twin, endpoint
    and timeouts, not its sessions. What cannot be a benchmark (a replay, probes, a
    timed or ramped load, another in-flight limit) is refused by name (ValueError);
    data without `bench` is returned unchanged."""
    raw = data.get("bench")
    if raw is None:
        return dict(data)
    spec = raw if isinstance(raw, BenchSpec) else BenchSpec.model_validate(raw)
    shared = spec.shared_tokens
    fields: dict[str, object] = {
        "sessions": spec.warmups + spec.requests,
        "turns": 1,
        "system": {"tokens": shared},
        "tools": {"count": 0, "tokens": 0},
        "first_prompt_tokens": spec.lengths(max(1, spec.input_tokens - shared)),
        "turn_templates": [{"name": "bench", "weight": 1.0,
                            "output_tokens": spec.lengths(spec.output_tokens)}],
        "think_time_s": {"dist": "constant", "value": 0.0},
        "cache_bust": "none",
        "output_control": "max_tokens",
        "arrival": ({"pattern": "poisson", "rate_per_s": spec.request_rate}
                    if spec.request_rate is not None else {"pattern": "all_at_once"}),
        # a failed request counts as failed, as vLLM's client does (no retry)
        "retry": {**_plain(data.get("retry")), "max_attempts": 1},
    }
    out = {**data, **fields}
    out["limits"] = {**_plain(out.get("limits")), "max_in_flight": spec.concurrency}
    if spec.ignore_eos:
        out["sampling"] = {**_plain(out.get("sampling")), "ignore_eos": True}
    for key in ("replay", "probes"):
        if out.get(key) is not None:
            raise ValueError(f"bench: a benchmark load has no {key}; drop it")
    load = _plain(out.get("load"))
    if load.get("duration_s") is not None or load.get("ramp") is not None:
        raise ValueError("bench: N requests end the run; drop load.duration_s / load.ramp")
    return out



def _plain(value: object) -> dict[str, object]:
    """A section as a plain dict (absent: empty; a model: its fields)."""
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True)
    return dict(value) if isinstance(value, Mapping) else {}
