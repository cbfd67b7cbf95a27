"""Client-side routing over several endpoints (`endpoints/routed.py`), on fakes."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from simulator.endpoints.base import ErrorType
from simulator.endpoints.fake import FakeEndpoint
from simulator.endpoints.routed import RoutedEndpoint
from simulator.run.spec import RunResult
from simulator.twin.fleet.router import Router, RouterConfig
from tests.conftest import SCENARIOS, run_scenario, turns_of

TEAM = SCENARIOS / "claude-code-team.yaml"
SMALL = ["sessions=3", "turns=5", "arrival.interval_s=0.5"]


def _routed(policy: str, *fakes: FakeEndpoint) -> RoutedEndpoint:
    urls = [f"http://127.0.0.1:{9000 + i}" for i in range(len(fakes))]
    return RoutedEndpoint(list(fakes), urls, Router(RouterConfig(policy), len(fakes)))  # type: ignore[arg-type]


def _run(tmp_path: Path, policy: str) -> tuple[pd.DataFrame, RunResult]:
    # each fake caches a session's previous request *on that fake*: a turn sent to the
    # other replica misses, as a real server's prefix cache does
    res = run_scenario(TEAM, tmp_path, SMALL, endpoint=_routed(policy, FakeEndpoint(), FakeEndpoint()))
    assert res.status == "completed"
    return turns_of(res), res


def _share(df: pd.DataFrame) -> float:
    later = df[df.turn_index > 0]
    return float(later.cache_read_tokens.sum() / later.prompt_tokens.sum())


def test_affinity_keeps_the_cache_round_robin_loses(tmp_path: Path) -> None:
    rr, _ = _run(tmp_path, "round_robin")
    aff, _ = _run(tmp_path, "session_affinity")
    assert (aff.groupby("session_id").replica.nunique() == 1).all()
    assert (rr.groupby("session_id").replica.nunique() == 2).all()
    # the fake counts the system prompt (hit on either fake) and the messages matching
    # the session's previous request on that fake, not the tools: RR keeps the system
    assert _share(aff) > _share(rr) + 0.04


@pytest.mark.parametrize("policy", ["round_robin", "least_loaded"])
def test_rows_and_manifest_record_the_replica(tmp_path: Path, policy: str) -> None:
    df, res = _run(tmp_path, policy)
    assert set(df.replica) == {"0", "1"}
    fleet = res.summary["fleet"]
    assert sum(p["requests"] for p in fleet["per_replica"]) == len(df)
    assert res.manifest.to_json()["endpoint"]["route"] == policy
    assert [r["url"] for r in res.manifest.to_json()["endpoint"]["replicas"]] == [
        "http://127.0.0.1:9000", "http://127.0.0.1:9001"]


def test_a_failed_attempt_records_the_replica_it_failed_on(tmp_path: Path) -> None:
    routed = _routed("round_robin", FakeEndpoint(faults=[ErrorType.OVERLOADED]), FakeEndpoint())
    df = turns_of(run_scenario(TEAM, tmp_path, ["sessions=1", "turns=2"], endpoint=routed))
    failed = df[~df.ok]
    assert list(failed.replica) == ["0"] and failed.error_type.iloc[0] == "overloaded"
    assert routed.in_flight == [0, 0]      # every attempt accounted for


def test_prefix_routing_on_the_client_is_refused() -> None:
    with pytest.raises(ValueError, match="cache state"):
        _routed("prefix_aware", FakeEndpoint(), FakeEndpoint())
