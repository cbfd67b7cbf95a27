"""Sessions per card against the host KV tier's size (`size/sweep --kv-offload-gib`).

One `size` answer (or `sweep` row set) per tier size, for the scenario's compaction
policy; the table names the binding constraint at each size and the knee: the
smallest tier that reaches (nearly) the most sessions any size gave, i.e. where
HBM stopped being enough and more host memory stops helping.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pydantic import ConfigDict, TypeAdapter, with_config
from typing_extensions import TypedDict  # pydantic reads a TypedDict of typing_extensions on 3.11

from simulator.errors import InputError


@with_config(ConfigDict(extra="allow"))
class TierRow(TypedDict, total=False):
    """One host-KV-tier size of `size --kv-offload-gib` (size-tiers.json's `rows`): the
    tier, the policy, and that size's sizing answer (`SizingResult.to_dict`)."""

    kv_offload_gib: float
    policy: str
    sessions: int
    sessions_range: list[int]
    binding: str | None
    binding_kind: str | None
    cards: list[int] | None

KNEE_SHARE = 0.95       # a tier within 5% of the best answer counts as reaching it


MAX_HOST_GIB = 1_048_576.0          # 1 PiB of host memory: past any machine's


def parse_tiers(text: str) -> list[float]:
    """`0,64,256` → [0.0, 64.0, 256.0] (GiB; sorted, no duplicates; finite, within
    [0, 1 PiB]); one InputError line otherwise."""
    try:
        tiers = sorted({float(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise InputError(f"--kv-offload-gib: expected comma-separated GiB, got {text!r}") \
            from None
    if not tiers or any(not (math.isfinite(t) and 0 <= t <= MAX_HOST_GIB) for t in tiers):
        raise InputError(f"--kv-offload-gib: expected finite sizes within [0, "
                         f"{MAX_HOST_GIB:g}] GiB, got {text!r}")
    return tiers


def tier_set(gib: float) -> str:
    """The `--set` that gives a run this tier."""
    return f"twin.kv_offload_gib={gib:g}"


def policy_of(sets: Sequence[str]) -> str:
    """The compaction policy a `--set compaction.kind=…` names (else the scenario's)."""
    for s in reversed(sets):
        key, _, value = s.partition("=")
        if key.strip() == "compaction.kind":
            return value.strip()
    return "scenario"


_TIER_ROWS = TypeAdapter(list[TierRow])


def read_tier_rows(rows: Sequence[Mapping[str, object]]) -> list[TierRow]:
    """size-tiers.json's rows (or the ones `size` is writing) as typed records, checked
    by pydantic (a key the record does not name is kept)."""
    return _TIER_ROWS.validate_python(list(rows))


def knee(rows: Sequence[Mapping[str, object]]) -> float | None:
    """The smallest tier (GiB) whose answer is within 5% of the best; None when none."""
    tiers = read_tier_rows(rows)
    best = max((r["sessions"] for r in tiers), default=0)
    if best <= 0:
        return None
    return float(min(r["kv_offload_gib"] for r in tiers if r["sessions"] >= KNEE_SHARE * best))


