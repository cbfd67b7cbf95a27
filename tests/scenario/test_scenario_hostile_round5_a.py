"""Issue 57 items 2 and 6 (hostile round five), where the scenario is read: settings a
run would silently drop or read as something else are refused in one line — a router
on a P/D fleet (its decode instances go by session affinity), a vLLM version written as
a YAML number whose text is lost (0.3 → 0.30), and a team replay's day cut short, ramped
or warm-started (it runs the team's own arrivals)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from simulator.cli import main
from simulator.errors import ScenarioError
from simulator.scenario.load import load_scenario
from tests.conftest import small_scenario
from tests.otel_export import team_day, write_json_logs


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(small_scenario(turns=1)) + text)
    return p


@pytest.mark.parametrize("router", ["least_loaded", "kv_cost", "prefix_aware"])
def test_a_pd_fleet_refuses_a_router_it_would_not_use(tmp_path: Path, router: str) -> None:
    p = _write(tmp_path, f"fleet:\n  prefill: 1\n  router: {router}\n")
    with pytest.raises(ScenarioError) as err:
        load_scenario(p)
    msg = str(err.value)
    assert "fleet.router" in msg and "session affinity" in msg and "\n" not in msg
    # what P/D does is accepted; so is the router on an aggregated fleet
    assert load_scenario(p, ["fleet.router=session_affinity"])[0].fleet.prefill == 1
    assert load_scenario(p, ["fleet.prefill=0"])[0].fleet.router == router


@pytest.mark.parametrize("written", ["0.3", "0.2", "0.30", "0.1"])
def test_a_version_written_as_a_number_that_loses_its_text_is_refused(
        tmp_path: Path, written: str) -> None:
    p = _write(tmp_path, f"twin:\n  vllm_version: {written}\n")
    with pytest.raises(ScenarioError) as err:
        load_scenario(p)
    assert "quote it" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ScenarioError, match="quote it"):
        load_scenario(_write(tmp_path, ""), [f"twin.vllm_version={written}"])


def test_a_version_number_that_keeps_its_text_and_a_quoted_one_are_read(tmp_path: Path) -> None:
    assert load_scenario(_write(tmp_path, "twin:\n  vllm_version: 0.28\n"))[0] \
        .twin.vllm_version == "0.28"
    assert load_scenario(_write(tmp_path, "twin:\n  vllm_version: '0.30'\n"))[0] \
        .twin.vllm_version == "0.30"


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("team")
    src = write_json_logs(tmp / "day.jsonl", team_day(seed=5, sessions=3, requests=(2, 3)))
    out = tmp / "team.yaml"
    r = CliRunner().invoke(main, ["import", "claude-code-otel", str(src), "-o", str(out)])
    assert r.exit_code == 0, r.output
    return out


@pytest.mark.parametrize("override", ["load.duration_s=60", "load.warm_start=true",
                                      "load.ramp={steps: [1, 2], hold_s: 60}"])
def test_a_team_replay_refuses_a_load_shape_of_its_own(team: Path, override: str) -> None:
    with pytest.raises(ScenarioError) as err:
        load_scenario(team, [override])
    msg = str(err.value)
    assert "team replay" in msg and override.split("=")[0] in msg and "\n" not in msg
    assert load_scenario(team)[0].replay is not None
