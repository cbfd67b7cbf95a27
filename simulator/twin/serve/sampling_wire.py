"""A request's sampling fields as the twin reads them off the wire, checked and resolved.

What each protocol carries, as vLLM reads it: the Anthropic Messages endpoint takes
`temperature`, `top_p` and `top_k` (vLLM's `AnthropicMessagesRequest`; anything else,
penalties included, is dropped), the Chat Completions endpoint takes those and
`frequency_penalty`, `presence_penalty` and vLLM's extra `repetition_penalty`. A field
the request leaves unset takes the model's generation config, as vLLM's default
`--generation-config auto` applies it (`ModelConfig.get_diff_sampling_param`), and
vLLM's neutral value where the config says nothing. Out-of-range values are refused
with vLLM's own bounds (`SamplingParams._verify_args`), one `ValueError` line naming
the field: the server answers 400 with it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, replace

from simulator.twin.core.sampling import NEUTRAL, SamplingParams

MESSAGES_FIELDS = ("temperature", "top_p", "top_k")
CHAT_FIELDS = ("temperature", "top_p", "top_k", "repetition_penalty", "frequency_penalty",
               "presence_penalty")
_INT_FIELDS = frozenset({"top_k"})


def check(name: str, value: object) -> float | int:
    """One field's value, or ValueError naming it (vLLM's bounds)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name}: expected a finite number, got {value!r}")
    if name in _INT_FIELDS:
        if value != int(value) or (value < 1 and value not in (0, -1)):
            raise ValueError(f"{name}: expected -1 or 0 (off) or an integer >= 1, got {value!r}")
        return int(value)
    v = float(value)
    if name == "temperature" and v < 0:
        raise ValueError(f"temperature: must be >= 0, got {value!r}")
    if name == "top_p" and not 0 < v <= 1:
        raise ValueError(f"top_p: must be in (0, 1], got {value!r}")
    if name == "repetition_penalty" and v <= 0:
        raise ValueError(f"repetition_penalty: must be > 0, got {value!r}")
    if name in ("frequency_penalty", "presence_penalty") and not -2 <= v <= 2:
        raise ValueError(f"{name}: must be in [-2, 2], got {value!r}")
    return v


def request_fields(body: Mapping[str, object], *, chat: bool) -> dict[str, float | int]:
    """The sampling fields a request body sets (null counts as unset), checked."""
    names = CHAT_FIELDS if chat else MESSAGES_FIELDS
    return {n: check(n, body[n]) for n in names if body.get(n) is not None}


def _with(base: SamplingParams, fields: Mapping[str, float | int]) -> SamplingParams:
    """`base` with `fields` (vLLM's names) over it; other keys are ignored."""
    v = {**asdict(base), **{k: fields[k] for k in CHAT_FIELDS if k in fields}}
    return SamplingParams(float(v["temperature"]), float(v["top_p"]), int(v["top_k"]),
                          float(v["repetition_penalty"]), float(v["frequency_penalty"]),
                          float(v["presence_penalty"]))


def defaults_of(generation_config: Mapping[str, float | int] | None) -> SamplingParams:
    """What a request that sets nothing samples with: the generation config's values
    over vLLM's neutral ones."""
    if not generation_config:
        return NEUTRAL
    return _with(NEUTRAL, generation_config)


def resolve(fields: Mapping[str, float | int], defaults: SamplingParams) -> SamplingParams:
    """The request's fields over the defaults; vLLM's top_k of -1 means off, as 0."""
    out = _with(defaults, fields) if fields else defaults
    return replace(out, top_k=0) if out.top_k < 0 else out
