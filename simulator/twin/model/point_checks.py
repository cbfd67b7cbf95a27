"""What a fit point must be for its prediction to mean something (issue 49): the unit
its kind is predicted in (a point in seconds is never compared with a rate), and for a
spec_replay point an n-gram setting, a prompt lookup and a number of streams the twin
can replay in bounded time. Pure; `fit.Observation` calls it as it is validated."""

from __future__ import annotations

from simulator.twin.spec_decode.ngram import NgramSpec, parse_spec

# vLLM's prompt lookup is a few tokens (default 5; each step tries every length from
# max down to min); streams are what one server runs at once
MAX_PROMPT_LOOKUP = 128
MAX_REPLAY_STREAMS = 1024
# the unit each kind's prediction is in (`fit.predict`), and what it is
UNITS: dict[str, tuple[str, ...]] = {
    "decode": ("tok_s",), "prefill": ("s", "tok_s"), "kv_capacity": ("tokens",),
    "spec_decode": ("tok_s", "ratio"), "spec_replay": ("tok_s",)}
UNIT_MEANS = {
    "decode": "decode tokens/s", "prefill": "TTFT seconds or prompt tokens/s",
    "kv_capacity": "KV cache tokens", "spec_decode": "the run's figure or its ratio to "
    "speculation off", "spec_replay": "Σ output tokens / Σ request seconds (tok_s)"}


def check_point(kind: str, unit: str, *, spec: str, batch: int, lookup: tuple[int, int],
                exchanges: str | None) -> None:
    """ValueError (one line) when a point of `kind` cannot be predicted as given."""
    units = UNITS[kind]
    if unit not in units:
        raise ValueError(f"a {kind} point is measured in {' or '.join(units)}, not {unit}: "
                         f"the twin predicts {UNIT_MEANS[kind]}")
    if kind != "spec_replay":
        return
    if not isinstance(parse_spec(spec), NgramSpec):   # parse_spec: ValueError naming the forms
        raise ValueError(f"spec_replay replays n-gram speculation: spec must be ngram:K, "
                         f"not {spec!r}")
    if lookup[0] > lookup[1]:
        raise ValueError(f"prompt_lookup_min {lookup[0]} is above prompt_lookup_max {lookup[1]}")
    if batch > MAX_REPLAY_STREAMS:
        raise ValueError(f"spec_replay with {batch:,} streams: at most {MAX_REPLAY_STREAMS:,} "
                         "(each replays every exchange)")
    if exchanges is None:
        raise ValueError("a spec_replay point needs an exchanges file")
