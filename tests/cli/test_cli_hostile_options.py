"""Options checked where they are parsed (issue 38 item 2): fleet options that mean
nothing where they are given, replica counts past what the in-process twin holds, a
host KV tier that is not a finite size — one line, exit 2, before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import refused_in_one_line, small_scenario
from tests.reliability_twin import write_yaml

DEAD = "http://127.0.0.1:9"      # never reached: the options are refused first


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    return write_yaml(tmp_path / "s.yaml", small_scenario(turns=1))


@pytest.mark.parametrize(("extra", "needle"), [
    (["--replicas", "4", "--endpoint", DEAD], "--replicas is for the twin"),
    (["--router", "kv_cost", "--endpoint", DEAD], "--router is the twin fleet's policy"),
    (["--route", "least_loaded"], "--route routes over several --endpoint URLs"),
    (["--route", "round_robin", "--endpoint", DEAD], "give two or more"),
    (["--route", "round_robin", "--router", "kv_cost"], "--route and --router"),
    (["--replicas", "1024"], "1,024 replicas"),
    (["--set", "twin.kv_offload_gib=1e308"], "kv_offload_gib"),
], ids=["replicas-with-endpoint", "router-with-endpoint", "route-on-the-twin",
        "route-with-one-endpoint", "route-and-router", "replicas-1024", "kv-offload-1e308"])
def test_run_refuses_options_that_mean_nothing_here(scenario: Path, tmp_path: Path,
                                                    extra: list[str], needle: str) -> None:
    refused_in_one_line(["run", str(scenario), "--out", str(tmp_path / "r"), "--quiet", *extra], needle)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("sets", "needle"), [
    ("twin.kv_offload_gib=1e308", "kv_offload_gib"),
    ("fleet.replicas=1024", "1,024 replicas"),
])
def test_validate_refuses_what_run_would(scenario: Path, sets: str, needle: str) -> None:
    refused_in_one_line(["validate", str(scenario), "--set", sets], needle)


def test_a_sweep_may_not_list_a_replica_count_twice(scenario: Path, tmp_path: Path) -> None:
    refused_in_one_line(["sweep", str(scenario), "--sessions", "1", "--out", str(tmp_path / "r"),
               "--replicas", "1,1"], "listed twice")


@pytest.mark.parametrize("gib", ["inf", "nan", "1e308", "-1"])
def test_twin_serve_refuses_a_host_tier_that_is_not_a_finite_size(gib: str) -> None:
    refused_in_one_line(["twin", "serve", "--port", "0", "--kv-offload-gib", gib], "--kv-offload-gib")
