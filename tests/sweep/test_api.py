"""The searches as library calls (`simulator.sweep`): each answers as the command does
on the same scenario, a table over host KV tiers or output-speed tiers is one search
per value of an outer dimension, and a stepped ramp reaches the run as a typed value
that resolves to the scenario a `--set load.ramp=…` gave."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from simulator import sweep
from simulator.analysis.run_summary import RunSummary
from simulator.analysis.slo import parse_slo
from simulator.cli import main
from simulator.errors import InputError
from simulator.scenario.load import load_scenario, with_step_ramp
from simulator.sweep.card_size import SizeProfile
from simulator.sweep.pipeline import run_profile
from simulator.sweep.point import Point, PointResult
from simulator.sweep.profiles import Counts
from simulator.sweep.step_ramp import step_ramp
from simulator.sweep.tiers import (
    KvTierTable,
    SpeedTierTable,
    ramp_tiers,
    read_tier_table,
    speed_tiers_dim,
)
from tests.sweep.toy import BASE, Wide, toy_server

ROOT = Path(__file__).resolve().parents[2]
TEAM = str(ROOT / "scenarios" / "claude-code-team.yaml")
TWIN = "a40/qwen3-coder-30b-a3b-awq"
SLO = "per_session_tok_s>=50"


def _tiered(p: Point) -> PointResult:
    """A toy card whose knee moves with the host KV tier the point's overrides set."""
    gib = next((float(o.split("=")[1]) for o in p.overrides
                if o.startswith("twin.kv_offload_gib=")), 0.0)
    n = p.coords["requested_sessions"]
    return PointResult(p, f"{p.out_dir}/run-{n}", "completed", "",
                       RunSummary.from_json(toy_server(n, knee=10 + int(gib))), 0.0, 0.0)


def test_a_search_per_kv_tier_is_one_search_per_value_of_an_outer_dimension() -> None:
    from simulator.sweep.tiers import EachValue, kv_tiers_dim
    heard: list[tuple[float, int]] = []
    slos = (parse_slo("window_per_session_tok_s>=50"),)
    profile = EachValue(BASE, kv_tiers_dim([0.0, 40.0]),
                        lambda b, _g: SizeProfile(b, slos, 64, 0),
                        lambda g, r: heard.append((g, r.sessions)))
    answers = run_profile(profile, Wide(2), runner=_tiered)
    # 100 / (1 + n / knee) >= 50 holds up to n = knee: 10 on no tier, 50 on 40 GiB
    assert [(g, r.sessions) for g, r in answers] == [(0.0, 10), (40.0, 50)] == heard
    for g, r in answers:          # each search ran in its own folder, with its override
        assert all(f"/tier-{g:g}gib/" in p.run_dir for p in r.probes)
    table = KvTierTable("prune", answers)
    data = table.to_dict()
    assert data["knee_gib"] == 40.0 and table.any_answer
    assert [(r["kv_offload_gib"], r["policy"], r["sessions"]) for r in table.rows()] == \
        [(0.0, "prune", 10), (40.0, "prune", 50)]


def test_speed_tiers_are_named_apart_and_judge_their_own_goodput() -> None:
    tiers = sweep.speed_tiers_for([parse_slo("ttft_p95_s<=5")], [100.0, 30.0, 100.0], None,
                                  0.9)
    assert [t.name for t in tiers] == ["30 tok/s", "100 tok/s"]      # loosest first, once
    assert tiers[0].judged() == ["window_goodput_share>=0.9", "ttft_p95_s<=5"]
    assert tiers[0].overrides() == ("goodput.ttft_s=15.0", "goodput.output_tok_s=30.0")
    dim = speed_tiers_dim(tiers)
    assert [dim.sub(t) for t in tiers] == ["tier-30", "tier-100"]
    assert SpeedTierTable([]).to_dict() == {"rows": []}


def test_a_typed_step_ramp_resolves_to_the_scenario_the_set_string_gave(tmp_path: Path) -> None:
    """The plan `size --ramp` passes as a value is the `load.ramp` a `--set` YAML string
    used to carry: the same resolved scenario (so the same hash and the same run)."""
    slos = (parse_slo("per_session_tok_s>=45"),)
    speed = sweep.speed_tiers_for(slos, [30.0], 15.0, 0.9)
    for tiers in (ramp_tiers(slos, ()), ramp_tiers(slos, speed)):
        plan = step_ramp((1, 2, 4), 40.0, 600.0, tiers)
        old = {"steps": [1, 2, 4], "hold_s": 40.0, "max_step_s": 600.0,
               "tiers": [t.model_dump(exclude_none=True) for t in tiers],
               "refine": True, "confirm": True}
        text = yaml.safe_dump(old, default_flow_style=True, width=10**9).strip()
        over = ["turns=4", "load.duration_s=null"]
        s_old, r_old = load_scenario(TEAM, [*over, f"load.ramp={text}"])
        s_new, r_new = with_step_ramp(load_scenario(TEAM, over)[1], plan)
        assert r_new == r_old and s_new == s_old
        assert json.dumps(r_new, sort_keys=True) == json.dumps(r_old, sort_keys=True)


def test_a_ramp_no_run_could_hold_is_one_line() -> None:
    with pytest.raises(InputError, match="--ramp: max_step_s"):
        step_ramp((1, 2), 60.0, 10.0**9, [])
    with pytest.raises(InputError, match="--ramp"):
        step_ramp((2, 1), 60.0, 600.0, [])


def test_old_and_new_tier_tables_are_read(tmp_path: Path) -> None:
    assert read_tier_table(tmp_path) is None
    kv = {"rows": [{"kv_offload_gib": 0.0, "sessions": 3}], "knee_gib": 0.0}
    (tmp_path / "size-tiers.json").write_text(json.dumps(kv))
    assert read_tier_table(tmp_path) == ("kv", kv["rows"])
    speed = {"rows": [{"tier": "30 tok/s", "ttft_s": 15.0, "sessions": 3}]}
    (tmp_path / "size-tiers.json").write_text(json.dumps(speed))
    assert read_tier_table(tmp_path) == ("speed", speed["rows"])
    (tmp_path / "size-speed-tiers.json").write_text(json.dumps(speed))
    assert read_tier_table(tmp_path) == ("speed", speed["rows"])
    (tmp_path / "size-kv-tiers.json").write_text("[1, 2]")
    with pytest.raises(InputError, match="not a tier table"):
        read_tier_table(tmp_path)


def test_a_base_and_a_twin_beside_it_are_refused(tmp_path: Path) -> None:
    base = sweep.search_base(TEAM, ["turns=2"], folder=tmp_path)
    assert base.folder == tmp_path and base.overrides == ("turns=2",)
    with pytest.raises(InputError, match="search_base"):
        sweep.size(base, [SLO], twin=TWIN)


def _cli(*args: str) -> Any:
    res = CliRunner().invoke(main, [*args, "--json"])
    assert res.exit_code in (0, 1), res.output
    return json.loads(res.stdout)


def _figures(d: Any) -> Any:
    """The answer as its JSON reads back, without where its runs went."""
    d = json.loads(json.dumps(d, default=str))
    return _strip(d)


def _strip(d: Any) -> Any:
    if isinstance(d, list):
        return [_strip(x) for x in d]
    if isinstance(d, dict):
        return {k: _strip(v) for k, v in d.items()
                if k not in ("run_dir", "run_dirs", "run_id", "target")}
    return d


@pytest.mark.slow
def test_size_in_one_call_answers_as_the_command(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)                 # the call's runs go to ./results/size-…
    answer = sweep.size(TEAM, [SLO], twin=TWIN, overrides=["turns=3"], max_sessions=4,
                        repeats=0)
    cli = _cli("size", TEAM, "--twin", TWIN, "--turns", "3", "--max-sessions", "4",
               "--repeats", "0", "--slo", SLO, "--out", str(tmp_path))
    assert _figures(answer.to_dict()) == _figures({k: v for k, v in cli.items()
                                                   if k in answer.to_dict()})
    assert answer.sessions == cli["sessions"] and answer.probes


@pytest.mark.slow
def test_kv_tiers_and_points_in_one_call_answer_as_the_commands(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    table = sweep.kv_tiers(TEAM, [SLO], [0.0, 8.0], twin=TWIN, overrides=["turns=3"],
                           max_sessions=4, repeats=0)
    cli = _cli("size", TEAM, "--twin", TWIN, "--turns", "3", "--max-sessions", "4",
               "--repeats", "0", "--slo", SLO, "--kv-offload-gib", "0,8",
               "--out", str(tmp_path / "size"))
    assert _figures(table.to_dict()) == _figures(cli)
    (folder,) = (tmp_path / "size").glob("size-*")
    assert read_tier_table(folder) == ("kv", cli["rows"])
    rows = sweep.points(TEAM, Counts((1, 2)), twin=TWIN, overrides=["turns=3"]).rows
    cli_rows = _cli("sweep", TEAM, "--twin", TWIN, "--turns", "3", "--sessions", "1,2",
                    "--out", str(tmp_path / "sweep"))
    assert _figures(rows) == _figures(cli_rows)


@pytest.mark.slow
def test_speed_tiers_ramp_and_fleet_in_one_call_answer_as_the_commands(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    common = ["--twin", TWIN, "--turns", "3", "--max-sessions", "4"]
    tiers = sweep.speed_tiers_for([], [30.0, 100.0], None, 0.9)
    table = sweep.speed_tiers(TEAM, tiers, twin=TWIN, overrides=["turns=3"], max_sessions=4,
                              repeats=0)
    cli = _cli("size", TEAM, *common, "--tier", "30", "--tier", "100", "--repeats", "0",
               "--out", str(tmp_path / "tiers"))
    assert _figures(table.to_dict()) == _figures(cli)
    ramp = sweep.ramp(TEAM, [SLO], steps=(1, 2), twin=TWIN, overrides=["turns=3"],
                      max_sessions=4, hold_s=30.0, compare=False)
    cli = _cli("size", TEAM, *common, "--slo", SLO, "--ramp", "1,2", "--hold", "30s",
               "--no-compare", "--out", str(tmp_path / "ramp"))
    assert _figures(ramp.to_dict()) == _figures(cli) and ramp.judged >= 1
    both = sweep.fleet(TEAM, [SLO], 6, router="round_robin", twin=TWIN,
                       overrides=["turns=3"], max_sessions=4, repeats=0)
    cli = _cli("size", TEAM, *common, "--slo", SLO, "--team", "6", "--router", "round_robin",
               "--repeats", "0", "--out", str(tmp_path / "fleet"))
    assert _figures(both.fleet.to_dict()) == _figures(cli["fleet"])
    assert both.card.sessions == cli["sessions"]
