"""One validated request for every `size` search (issue 60): the request a library caller
builds refuses with the command's own line, the command's `size` is the request built
and handed to the search, and `lab.size` leaves the command's `size.json`."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from simulator import lab
from simulator.cli import main
from simulator.cli.sweep import size_command
from simulator.errors import InputError
from simulator.sweep import SizeRequest, prepare
from simulator.sweep.request import NOT_A_TEAM_DAY
from tests.conftest import refused_in_one_line, small_scenario
from tests.reliability_twin import write_yaml
from tests.size_refusals import ALL, SLO, Refusal

ROOT = Path(__file__).resolve().parents[2]
TEAM = str(ROOT / "scenarios" / "claude-code-team.yaml")
TWIN = "a40/qwen3-coder-30b-a3b-awq"


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    return write_yaml(tmp_path / "s.yaml", small_scenario(turns=1))


@pytest.mark.parametrize("case", ALL, ids=[c.id for c in ALL])
def test_the_request_built_in_python_refuses_with_the_commands_line(
        case: Refusal, scenario: Path, tmp_path: Path) -> None:
    line = refused_in_one_line(["size", str(scenario), *case.args, "--out",
                                str(tmp_path / "o")], *case.needles)
    with pytest.raises(InputError) as refused:
        case.request(str(scenario))
    said = str(refused.value)
    if case.by_click:          # click words the command's line; the option is named alike
        assert all(n in said for n in case.needles) and "\n" not in said, said
    else:
        assert line == f"error: {said}"
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("given", "kind"), [
    ({"node": "8xh100"}, "node"), ({"node": "8xh100", "team": 16}, "node"),
    ({"ramp": "1,2"}, "ramp"), ({"tiers": (30.0,)}, "speed_tiers"),
    ({"kv_offload_gibs": (0.0, 8.0)}, "kv_tiers"), ({"team": 8, "pd": True}, "pd"),
    ({"team": 8, "router": "least_loaded"}, "fleet"), ({"team": 8}, "card"), ({}, "card")])
def test_every_search_the_command_runs_is_a_request_it_accepts(
        given: dict[str, object], kind: str, scenario: Path) -> None:
    request = SizeRequest(str(scenario), (SLO,), **given)
    assert request.kind() == kind


def test_from_python_an_override_is_named_as_the_set_it_is(scenario: Path) -> None:
    """No `--replicas` was typed: the refusal names the override the caller gave, and
    `lab.size` meets it before any run."""
    with pytest.raises(InputError, match="size --team with --set fleet.replicas: "):
        SizeRequest(str(scenario), (SLO,), ("fleet.replicas=2",), team=4)
    with pytest.raises(InputError, match="a --set list is a sweep"):
        lab.size(scenario, [SLO], 4, ["compaction.kind=none,prune"], scenario.parent / "r")
    assert not (scenario.parent / "r").exists()


def test_what_only_the_scenario_tells_is_refused_by_prepare_before_any_run(
        scenario: Path, tmp_path: Path) -> None:
    line = refused_in_one_line(["size", str(scenario), "--slo", SLO, "--interval", "1h",
                                "--out", str(tmp_path / "o")], "--interval")
    request = SizeRequest(str(scenario), (SLO,), interval="1h", out=tmp_path / "o")
    with pytest.raises(InputError) as refused:
        prepare(request)
    assert line == f"error: {refused.value}" == f"error: {NOT_A_TEAM_DAY}"
    assert not (tmp_path / "o").exists()


def test_the_command_is_short_its_options_make_the_request() -> None:
    callback = size_command.callback
    assert callback is not None
    lines, _ = inspect.getsourcelines(callback)
    assert len(lines) < 40, len(lines)


def test_lab_size_writes_the_commands_size_json(tmp_path: Path) -> None:
    """The same search from the command and from `lab.size`: the same size.json, byte
    for byte, once each run directory's path (its own folder, its start time and
    random suffix) is replaced by one word — nothing else in the file differs."""
    r = CliRunner().invoke(main, ["size", TEAM, "--twin", TWIN, "--turns", "3", "--slo",
                                  "per_session_tok_s>=50", "--max-sessions", "2",
                                  "--repeats", "0", "--json", "--out", str(tmp_path / "cli")])
    assert r.exit_code == 0, r.output
    (folder,) = (tmp_path / "cli").glob("size-*")
    answer = lab.size(TEAM, ["per_session_tok_s>=50"], 2, ["turns=3"], tmp_path / "lab",
                      twin=TWIN, repeats=0, save=tmp_path / "lab")
    cli_text = (folder / "size.json").read_text()
    lab_text = (tmp_path / "lab" / "size.json").read_text()

    def runs_named(text: str, where: Path) -> str:
        return re.sub(re.escape(str(where)) + r'/[^"/]+', "RUN", text)

    assert str(tmp_path) not in runs_named(cli_text, folder) + runs_named(lab_text,
                                                                         tmp_path / "lab")
    assert runs_named(cli_text, folder) == runs_named(lab_text, tmp_path / "lab")
    data = json.loads(lab_text)
    assert data["sessions"] == answer.sessions == 2 and len(data["probes"]) == 2
