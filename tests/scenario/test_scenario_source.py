"""A scenario read once (`read_scenario`) and resolved per run (`resolve_scenario`)
gives what `load_scenario` of the file gives, leaves the read value unchanged, and
names the file's line in an error as a load does."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from simulator.errors import ScenarioError
from simulator.scenario.load import load_scenario, read_scenario, resolve_scenario

BUNDLED = Path(__file__).resolve().parents[2] / "scenarios" / "claude-code-team.yaml"


def test_resolved_on_the_value_as_loaded_from_the_file() -> None:
    src = read_scenario(BUNDLED)
    before = copy.deepcopy(src.data)
    for over in ([], ["sessions=3", "fleet.replicas=2"], ["compaction.kind=prune"]):
        assert resolve_scenario(src, over) == load_scenario(BUNDLED, over)
    assert src.data == before


def test_an_error_names_the_files_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nsessions: 2\nturns: -1\n")
    src = read_scenario(path)
    with pytest.raises(ScenarioError) as got:
        resolve_scenario(src, [])
    with pytest.raises(ScenarioError) as loaded:
        load_scenario(path)
    assert str(got.value) == str(loaded.value) and ":3" in str(got.value)
    with pytest.raises(ScenarioError, match="--set"):
        resolve_scenario(src, ["turns=-2"])
