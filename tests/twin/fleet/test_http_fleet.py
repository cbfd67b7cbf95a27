"""`endurance twin serve --replicas R --router …`: a fleet behind one URL."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from simulator.twin.fleet.service import session_key
from tests.conftest import SCENARIOS, run_scenario, turns_of
from tests.http_twin import twin_server

TEAM = SCENARIOS / "claude-code-team.yaml"
SMALL = ["sessions=4", "turns=4", "arrival.interval_s=0.5", "think_time_s.median=0.5"]


def _per_replica(url: str, name: str) -> dict[str, float]:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name:
                out[s.labels["replica"]] = s.value
    return out


def _share(url: str, tmp_path: Path) -> float:
    res = run_scenario(TEAM, tmp_path, SMALL, endpoint_url=url)
    assert res.status == "completed", res.outcome.reason
    df = turns_of(res)
    assert res.manifest.simulated is True
    return float(df.cache_read_tokens.sum() / df.prompt_tokens.sum())


@pytest.mark.slow
def test_fleet_behind_one_url_labels_metrics_per_replica(tmp_path: Path) -> None:
    with twin_server("--replicas", "2", "--router", "session_affinity",
                     time_scale=2000.0) as url:
        share = _share(url, tmp_path)
        queries = _per_replica(url, "vllm:prefix_cache_queries_total")
    assert set(queries) == {"0", "1"} and all(v > 0 for v in queries.values())
    assert share > 0.85


@pytest.mark.slow
def test_round_robin_behind_one_url_loses_hits_affinity_keeps(tmp_path: Path) -> None:
    shares = {}
    for policy in ("round_robin", "session_affinity"):
        with twin_server("--replicas", "2", "--router", policy, time_scale=2000.0) as url:
            shares[policy] = _share(url, tmp_path)
    assert shares["round_robin"] < shares["session_affinity"] - 0.01


def test_session_key_prefers_the_header_then_the_first_message() -> None:
    a = {"messages": [{"role": "user", "content": "task A"}, {"role": "assistant"}]}
    b = {"messages": [{"role": "user", "content": "task B"}]}
    assert session_key(a, {}) == session_key({"messages": a["messages"][:1]}, {})
    assert session_key(a, {}) != session_key(b, {})
    assert session_key(a, {"x-session-id": "s1"}) == "s1"
