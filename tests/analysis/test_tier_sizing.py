"""Sessions per card by host KV tier: parsing, knee, table (`analysis/tier_sizing`)."""

from __future__ import annotations

import pytest

from simulator.analysis.tier_sizing import knee, parse_tiers, policy_of, tier_set
from simulator.errors import InputError
from simulator.report.sweeps import format_tier_table, plot_tiers


def _row(gib: float, n: int, kind: str = "kv_capacity") -> dict[str, object]:
    return {"kv_offload_gib": gib, "policy": "prune", "sessions": n,
            "sessions_range": [n, n], "binding": "ttft_p95_s<=5", "binding_kind": kind,
            "cards": None}


def test_tiers_parse_sorted_and_reject_bad_input() -> None:
    assert parse_tiers("256,0,64,64") == [0.0, 64.0, 256.0]
    assert tier_set(64.0) == "twin.kv_offload_gib=64"
    for bad in ("", "a,b", "-1"):
        with pytest.raises(InputError, match="--kv-offload-gib"):
            parse_tiers(bad)


def test_the_knee_is_the_smallest_tier_near_the_best_answer() -> None:
    rows = [_row(0, 20), _row(64, 39), _row(256, 40)]
    assert knee(rows) == 64.0
    assert knee([_row(0, 0), _row(64, 0)]) is None
    text = format_tier_table(rows)
    assert "HBM alone (tier 0): 20 sessions" in text and "knee: 64 GiB" in text
    assert "[kv_capacity]" in text
    assert plot_tiers(rows).axes


def test_policy_comes_from_the_last_compaction_set() -> None:
    assert policy_of(("compaction.kind=block", "x=1", "compaction.kind=summarize")) == "summarize"
    assert policy_of(()) == "scenario"
