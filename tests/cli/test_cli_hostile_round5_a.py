"""Issue 57 items 2, 3 and 6 (hostile round five), where the options are parsed: a P/D
fleet past the in-process twin's memory, P/D options given where nothing reads them
(`--router` with `--pd`, `twin serve --kv-link` without it), `twin serve --pd` past what
one server holds, `size --team` with a fixed P:D unit (it answered "1 card" for three)
or a team no search can run, and `twin show --context` that is no context — one line,
exit 2, before anything runs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.conftest import refused_in_one_line, small_scenario
from tests.reliability_twin import write_yaml
from tests.size_refusals import TEAM_PAST_SEARCH, TEAM_UNIT, Refusal


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    return write_yaml(tmp_path / "s.yaml", small_scenario(turns=1))


@pytest.mark.parametrize(("extra", "needles"), [
    (["--pd", "1024:1"], ("1,024 prefill + 1 decode", "P + D")),
    (["--pd", "1:1", "--router", "kv_cost"], ("--router", "--pd")),
    (["--pd", "1:1", "--set", "fleet.router=least_loaded"], ("fleet.router",)),
], ids=["pd-1024-1", "pd-with-router-flag", "pd-with-router-set"])
def test_run_refuses_a_pd_fleet_it_cannot_hold_or_would_route_otherwise(
        scenario: Path, tmp_path: Path, extra: list[str], needles: tuple[str, ...]) -> None:
    refused_in_one_line(["run", str(scenario), "--out", str(tmp_path / "r"), "--quiet", *extra], *needles)
    assert not (tmp_path / "r").exists()


def test_run_refuses_a_router_in_the_file_of_a_pd_run(tmp_path: Path) -> None:
    p = write_yaml(tmp_path / "s.yaml", small_scenario(turns=1, fleet={"router": "kv_cost"}))
    refused_in_one_line(["run", str(p), "--pd", "1:1", "--out", str(tmp_path / "r")], "fleet.router")


@pytest.mark.parametrize(("extra", "needles"), [
    (["--pd", "1024:1024"], ("--pd 1024:1024", "2,048 instances", "64")),
    (["--pd", "40:40"], ("80 instances", "64")),
    (["--kv-link", "nvlink"], ("--kv-link", "--pd")),
    (["--max-local-prefill", "5"], ("--max-local-prefill", "--pd")),
    (["--pd", "1:1", "--router", "least_loaded"], ("--router", "--pd")),
    (["--pd", "1:1", "--replicas", "1"], ("--replicas",)),
], ids=["pd-1024-1024", "pd-40-40", "kv-link-alone", "threshold-alone", "pd-router",
        "pd-replicas-1"])
def test_twin_serve_refuses_pd_options_it_cannot_honour(extra: list[str],
                                                       needles: tuple[str, ...]) -> None:
    refused_in_one_line(["twin", "serve", "--port", "0", *extra], *needles)


def test_size_refuses_a_team_on_a_fixed_pd_unit(scenario: Path, tmp_path: Path) -> None:
    """`--pd 1:2` sizes one unit of three cards; `--team` would count it as one card
    (so do `--set fleet.prefill=1` and `--replicas 2`)."""
    for case in TEAM_UNIT:
        refused_in_one_line(["size", str(scenario), *case.args, "--out", str(tmp_path / "o")],
                            *case.needles)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("case", TEAM_PAST_SEARCH, ids=[c.id for c in TEAM_PAST_SEARCH])
def test_size_refuses_a_team_past_what_a_search_runs_before_any_run(
        scenario: Path, tmp_path: Path, case: Refusal) -> None:
    """The fleet and P/D searches run the whole team on the twin: a team past what it
    holds is refused before the card search runs (it ran, then failed on the team)."""
    t0 = time.monotonic()
    refused_in_one_line(["size", str(scenario), *case.args, "--out", str(tmp_path / "o")],
                        *case.needles)
    assert not (tmp_path / "o").exists() and time.monotonic() - t0 < 30


@pytest.mark.parametrize(("context", "needle"), [
    ("-5000000", "--context"), ("0", "--context"), ("5000000", "262,144")])
def test_twin_show_refuses_a_context_that_is_none(context: str, needle: str) -> None:
    refused_in_one_line(["twin", "show", "a40/qwen3-coder-30b-a3b-awq", "--context", context], needle)
