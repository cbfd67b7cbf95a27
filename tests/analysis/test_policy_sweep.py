"""`endurance sweep … --set compaction.kind=a,b`: one row per value, speed beside recall,
the frontier; the argument errors are one line with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from simulator.analysis.policy_sweep import mark_frontier, scheduled_probes, split_listed_set
from simulator.cli import main
from simulator.errors import InputError
from tests.conftest import small_scenario


def _scenario(tmp_path: Path) -> Path:
    p = tmp_path / "r.yaml"
    p.write_text(yaml.safe_dump(small_scenario(turns=24, probes={"facts": 4, "every_turns": 6})))
    return p


@pytest.mark.slow
def test_policy_sweep_json(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["sweep", str(_scenario(tmp_path)), "--set",
                                    "compaction.kind=none,block", "--repeats", "2", "--json",
                                    "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [r["value"] for r in rows] == ["none", "block"]
    none, block = rows
    assert none["replicates"] == 2 and len(none["run_dirs"]) == 2
    assert none["fact_retention"] == 1.0 == none["probe_recall"]   # nothing is dropped
    assert block["fact_retention"] < 1.0
    assert block["probe_recall"] == block["fact_retention"]         # the twin
    assert none["frontier"]                                         # best recall
    assert all(r["sustained_tok_s"] > 0 and r["probe_requests"] > 0 for r in rows)
    folder = Path(none["run_dirs"][0]).parents[1]
    assert (folder / "policy-sweep.json").is_file() and (folder / "policy-sweep.png").is_file()


@pytest.mark.parametrize("args", [
    ["--set", "compaction.kind=none,block", "--set", "seed=1,2"],
    ["--set", "compaction.kind=none,block", "--sessions", "1,2"],
    ["--set", "compaction.kind=none,bogus"],
    ["--repeats", "2"],
])
def test_bad_sweeps_are_one_line(tmp_path: Path, args: list[str]) -> None:
    res = CliRunner().invoke(main, ["sweep", str(_scenario(tmp_path)), *args,
                                    "--out", str(tmp_path / "out")])
    assert res.exit_code == 2, res.output
    assert len(res.output.strip().splitlines()) == 1


def test_split_listed_set() -> None:
    assert split_listed_set(["a=1", "compaction.kind=none, block"]) == \
        ("compaction.kind", ["none", "block"], ["a=1"])
    assert split_listed_set(["probes.at_turns=[1,2]"]) is None
    with pytest.raises(InputError):
        split_listed_set(["a=1,2", "b=3,4"])


def test_frontier() -> None:
    rows = [{"value": "a", "sustained_tok_s": 100.0, "probe_recall": 0.1},
            {"value": "b", "sustained_tok_s": 90.0, "probe_recall": 0.5},
            {"value": "c", "sustained_tok_s": 80.0, "probe_recall": 0.4},
            {"value": "d", "sustained_tok_s": 70.0, "probe_recall": None}]
    assert [r["frontier"] for r in mark_frontier(rows)] == [True, True, False, False]


def test_scheduled_probes_are_the_shared_points() -> None:
    df = pd.DataFrame({"request_kind": ["turn", "probe", "probe", "probe", "summary"],
                       "probe_reason": [None, "compaction", "compaction+turn", "end", None]})
    assert list(scheduled_probes(df).index) == [0, 2, 3, 4]


def test_frontier_prefers_the_scheduled_recall() -> None:
    rows = [{"value": "a", "sustained_tok_s": 100.0, "probe_recall": 0.9,
             "scheduled_probe_recall": 0.1},
            {"value": "b", "sustained_tok_s": 90.0, "probe_recall": 0.2,
             "scheduled_probe_recall": 0.5}]
    assert [r["frontier"] for r in mark_frontier(rows)] == [True, True]
    rows[1]["scheduled_probe_recall"] = 0.05
    assert [r["frontier"] for r in mark_frontier(rows)] == [True, False]
