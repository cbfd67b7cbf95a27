"""Prefill/decode disaggregation settings and the rule that decides where a prompt is
prefilled (pure).

Conditional disaggregation is Dynamo's rule: a prompt whose part not already cached on
its decode worker is longer than `max_local_prefill_length` is prefilled on a prefill
worker, else on the decode worker itself (ai-dynamo/dynamo `lib/llm/src/disagg_router.rs`,
`DisaggregatedRouter::prefill_remote`: `prefill_length - prefix_hit_length >
max_local_prefill_length`; its examples default the threshold to 1000 tokens,
`examples/python_rs/llm/vllm_nixl/router/disagg_router.py`). The decode worker keeps a
session's KV between turns (vLLM's NixlConnector pulls only the prompt past the decode
side's own prefix-cache hit), so a follow-up turn's uncached part is its new messages.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simulator.twin.fleet.router import POLICIES, Policy

DYNAMO_MAX_LOCAL_PREFILL = 1000     # tokens: Dynamo's examples' default threshold
PREFILL_POLICIES: tuple[Policy, ...] = ("least_loaded", "prefix_aware", "kv_cost",
                                         "round_robin")
MAX_INSTANCES = 1024
# The links a KV transfer can take (issue 57): no slower than 1 Gbit/s Ethernet
# (0.125 GB/s; the slowest link any P/D deployment pulls KV over), no fixed cost over a
# second per transfer (a cross-continent round trip is ~0.3 s; NIXL's set-up is µs).
# Past these a run never ends: every remote prefill waits hours of simulated time.
MIN_LINK_GB_S = 0.1
MAX_LINK_LATENCY_S = 1.0


@dataclass(frozen=True, slots=True)
class LinkSpec:
    """The link a prefill instance's KV crosses to a decode instance."""

    kind: str
    bytes_s: float           # sustained one-direction bandwidth (inf: instantaneous)
    latency_s: float         # fixed cost per transfer

    def __post_init__(self) -> None:
        if not self.bytes_s >= MIN_LINK_GB_S * 1e9:          # NaN fails this too
            raise ValueError(f"KV link {self.kind}: bandwidth must be at least "
                             f"{MIN_LINK_GB_S:g} GB/s (1 Gbit/s Ethernet), got "
                             f"{self.bytes_s / 1e9:g}")
        if not (0 <= self.latency_s <= MAX_LINK_LATENCY_S and math.isfinite(self.latency_s)):
            raise ValueError(f"KV link {self.kind}: latency must be within 0.."
                             f"{MAX_LINK_LATENCY_S:g} s per transfer, got {self.latency_s:g}")

    def transfer_s(self, nbytes: float) -> float:
        """Seconds one transfer of `nbytes` holds the link."""
        return self.latency_s + (nbytes / self.bytes_s if nbytes else 0.0)


@dataclass(frozen=True, slots=True)
class PDConfig:
    """P prefill and D decode instances, the threshold, the prefill router, the link."""

    prefill: int
    decode: int
    link: LinkSpec
    max_local_prefill: int = DYNAMO_MAX_LOCAL_PREFILL
    # Dynamo's prefill router is KV-aware (its KvRouter over the prefill workers), as is
    # llm-d's prefill scheduling profile: llm-d's prefix scorer by default
    prefill_router: Policy = "prefix_aware"

    def __post_init__(self) -> None:
        for name, n in (("prefill", self.prefill), ("decode", self.decode)):
            if not 1 <= n <= MAX_INSTANCES:
                raise ValueError(f"P/D: {name} instances must be within 1..{MAX_INSTANCES}, "
                                 f"got {n}")
        if self.max_local_prefill < 0:
            raise ValueError(f"P/D: the local-prefill threshold must be ≥ 0 tokens, got "
                             f"{self.max_local_prefill}")
        if self.prefill_router not in PREFILL_POLICIES or self.prefill_router not in POLICIES:
            raise ValueError(f"P/D: prefill router {self.prefill_router!r}: expected one of "
                             f"{', '.join(PREFILL_POLICIES)}")

    @property
    def cards(self) -> int:
        return self.prefill + self.decode


def prefill_remote(prompt_len: int, decode_hit_tokens: int, max_local_prefill: int) -> bool:
    """Dynamo's conditional disaggregation: prefill remotely when the part of the prompt
    the decode instance would have to compute is longer than the threshold."""
    return prompt_len - decode_hit_tokens > max_local_prefill


def parse_split(text: str) -> tuple[int, int]:
    """`P:D` (e.g. "1:2") as (P, D); ValueError, one line, for anything else."""
    parts = text.strip().split(":")
    try:
        if len(parts) != 2:
            raise ValueError
        p, d = int(parts[0]), int(parts[1])
    except ValueError:
        raise ValueError(f"{text!r}: expected a P:D split such as 1:2") from None
    if not (1 <= p <= MAX_INSTANCES and 1 <= d <= MAX_INSTANCES):
        raise ValueError(f"{text!r}: prefill and decode instances must each be within "
                         f"1..{MAX_INSTANCES}")
    return p, d
