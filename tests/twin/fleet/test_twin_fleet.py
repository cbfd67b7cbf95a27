"""The twin as a fleet: R engines behind a router on one virtual clock."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from simulator.cli import main
from simulator.endpoints.inprocess.fleet import InProcessFleet
from simulator.endpoints.inprocess.twin import InProcessTwin
from simulator.twin.core.types import EngineRequest
from simulator.twin.fleet.router import RouterConfig
from tests.conftest import SCENARIOS, run_scenario, turns_of

TEAM = SCENARIOS / "claude-code-team.yaml"
# a shared ~20k-token prefix, multi-turn sessions: what a router decides the cache of
SMALL = ["sessions=4", "turns=5", "arrival.interval_s=0.5"]
LABELS = ("started_at", "run_id", "replica")     # wall-clock labels and the fleet's tag


def _fleet(policy: str, replicas: int = 2, seed: int = 11) -> list[str]:
    return [*SMALL, f"seed={seed}", f"fleet.replicas={replicas}", f"fleet.router={policy}"]


def _read_share(df: pd.DataFrame) -> float:
    ok = df[df.ok]
    return float(ok.cache_read_tokens.sum() / ok.prompt_tokens.sum())


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[pd.DataFrame, dict]]:
    out = tmp_path_factory.mktemp("fleet")
    runs = {}
    for policy in ("round_robin", "session_affinity", "prefix_aware"):
        res = run_scenario(TEAM, out, _fleet(policy))
        assert res.status == "completed"
        runs[policy] = (turns_of(res), res.summary)
    return runs


def test_one_replica_is_the_single_engine_row_for_row(tmp_path: Path) -> None:
    single = run_scenario(TEAM, tmp_path, SMALL, endpoint=InProcessTwin(
        "a40", "qwen3-coder-30b-a3b-awq", seed=11))
    fleet = run_scenario(TEAM, tmp_path, SMALL, endpoint=InProcessFleet(
        "a40", "qwen3-coder-30b-a3b-awq", replicas=1, router=RouterConfig("prefix_aware"),
        seed=11))
    a, b = turns_of(single).drop(columns=list(LABELS)), turns_of(fleet).drop(columns=list(LABELS))
    pd.testing.assert_frame_equal(a, b)
    assert (turns_of(fleet).replica == "0").all() and turns_of(single).replica.isna().all()
    for key in ("server_prefix_cache_hit_share", "kv_usage_peak", "preemptions",
                "aggregate_tok_s", "ttft_p95_s"):
        assert single.summary[key] == fleet.summary[key], key


def test_round_robin_loses_the_hits_affinity_keeps(policies: dict) -> None:
    rr, aff = _read_share(policies["round_robin"][0]), _read_share(policies["session_affinity"][0])
    assert rr < aff - 0.01
    # every turn of a session moved under round robin; none did under affinity
    assert policies["round_robin"][1]["fleet"]["session_spread_mean"] > 1.5
    assert policies["session_affinity"][1]["fleet"]["session_spread_mean"] == 1.0


def test_prefix_aware_is_not_worse_than_round_robin_or_affinity(policies: dict) -> None:
    pa = _read_share(policies["prefix_aware"][0])
    assert pa >= _read_share(policies["round_robin"][0])
    assert pa >= _read_share(policies["session_affinity"][0]) - 0.005


def test_rows_server_metrics_and_summary_are_per_replica(policies: dict) -> None:
    df, summary = policies["round_robin"]
    assert set(df.replica) == {"0", "1"}
    fleet = summary["fleet"]
    assert [p["replica"] for p in fleet["per_replica"]] == ["0", "1"]
    assert sum(p["requests"] for p in fleet["per_replica"]) == int(df.ok.sum())
    assert fleet["load_imbalance"] == pytest.approx(1.0, abs=0.1)
    # the engine counters per replica: the twin's exact prefix-cache hit share
    for p in fleet["per_replica"]:
        assert 0 < p["server_prefix_cache_hit_share"] <= 1
    engine = summary["engine"]
    assert engine["router"] == "round_robin" and len(engine["replicas"]) == 2
    assert engine["prefix_cache_queries"] == sum(r["prefix_cache_queries"]
                                                 for r in engine["replicas"])


def test_timeline_rows_are_tagged_with_their_replica(tmp_path: Path) -> None:
    res = run_scenario(TEAM, tmp_path, [*_fleet("least_loaded"), "turns=3"])
    server = pd.read_parquet(res.run_dir / "server_metrics.parquet")
    assert set(server.replica.astype(str)) == {"0", "1"}
    hits = server[(server.kind == "delta") & (server.metric == "prefix_cache_hits")]
    assert hits.groupby("replica").value.sum().gt(0).all()
    manifest = json.loads((res.run_dir / "manifest.json").read_text())
    assert manifest["endpoint"]["replicas"] == 2 and manifest["endpoint"]["router"] == "least_loaded"
    # two cards rented: twice the hardware's price per hour
    single = InProcessTwin("a40", "qwen3-coder-30b-a3b-awq").describe()
    assert manifest["price_per_hour"] == pytest.approx(
        2 * single["profile"]["hardware"]["usd_per_hour"])


def test_cli_replicas_and_router(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["run", str(TEAM), "--sessions", "2", "--turns", "2",
                                  "--replicas", "2", "--router", "session_affinity",
                                  "--quiet", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    run_dir = Path(r.output.strip().splitlines()[-1])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["fleet"]["router"] == "session_affinity"
    assert summary["fleet"]["session_spread_mean"] == 1.0


def test_cli_refuses_prefix_routing_on_the_client(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["run", str(TEAM), "--endpoint", "http://127.0.0.1:9",
                                  "--endpoint", "http://127.0.0.1:10", "--route",
                                  "prefix_aware", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "'prefix_aware' is not one of" in r.output
    r = CliRunner().invoke(main, ["run", str(TEAM), "--endpoint", "http://127.0.0.1:9",
                                  "--endpoint", "http://127.0.0.1:10", "--set",
                                  "fleet.router=prefix_aware", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "needs the servers' cache state" in r.output
    assert len(r.output.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_prefix_aware_never_worse_than_both_over_seeds(tmp_path: Path, seed: int) -> None:
    shares = {p: _read_share(turns_of(run_scenario(TEAM, tmp_path, _fleet(p, 3, seed))))
              for p in ("round_robin", "least_loaded", "session_affinity", "prefix_aware")}
    assert shares["round_robin"] < shares["session_affinity"]
    assert shares["prefix_aware"] >= max(shares["round_robin"], shares["least_loaded"])
    assert shares["prefix_aware"] >= shares["session_affinity"] - 0.005


@pytest.mark.slow
def test_sweep_over_replica_counts(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["sweep", str(TEAM), "--sessions", "2", "--turns", "2",
                                  "--replicas", "1,2", "--router", "session_affinity",
                                  "--json", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output.strip().splitlines()[-1])
    assert [(x["replicas"], x["sessions"], x["router"]) for x in rows] == [
        (1, 2, "session_affinity"), (2, 2, "session_affinity")]
    r = CliRunner().invoke(main, ["run", str(TEAM), "--replicas", "1,2", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "is for `sweep`" in r.output
    r = CliRunner().invoke(main, ["run", str(TEAM), "--replicas", "0", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "within 1..1024" in r.output


def test_the_routers_chain_goes_to_the_engine_and_changes_no_row(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`prefix_aware` hashes each prompt to score the replicas and hands the chain to
    the engine it picks (which then hashes none of it): the rows are those of the
    same fleet whose engines hash every prompt themselves."""
    from simulator.twin.core.engine import TwinEngine
    submit, told = TwinEngine.submit, []

    def spy(self: TwinEngine, request: EngineRequest) -> None:
        told.append(request.prefix_hashes is not None)
        submit(self, request)

    monkeypatch.setattr(TwinEngine, "submit", spy)
    handed = run_scenario(TEAM, tmp_path / "a", _fleet("prefix_aware"))
    assert told and all(told)
    loads = InProcessFleet.loads
    monkeypatch.setattr(InProcessFleet, "loads",
                        lambda self, request: (*loads(self, request)[:2], None))
    told.clear()
    hashed = run_scenario(TEAM, tmp_path / "b", _fleet("prefix_aware"))
    assert told and not any(told)
    pd.testing.assert_frame_equal(turns_of(handed).drop(columns=["started_at", "run_id"]),
                                  turns_of(hashed).drop(columns=["started_at", "run_id"]))
