"""An interval's scenario is passed to its probes as a value (`interval_source`), not
read back from its file: the value is what the file gives back, so every probe resolves
the same scenario, byte for byte, as a probe that loads the file."""

from __future__ import annotations

from pathlib import Path

from simulator.scenario.load import load_scenario, read_scenario, resolve_scenario
from simulator.sweep.team_hours import interval_data, interval_source, plan_intervals
from tests.sweep.test_team_hours import _spec


def test_the_interval_value_is_its_file(tmp_path: Path) -> None:
    spec = _spec()
    data = {"name": "team", "seed": 3, "system": {"tokens": 18_000}, "sessions": 3,
            "turns": 10, "replay": spec.model_dump(exclude_none=True)}
    over = ["fleet.replicas=2", "fleet.router=session_affinity", "goodput.ttft_s=3.0"]
    for k, (iv, streams) in enumerate(plan_intervals(spec, 3600, 300)):
        path = tmp_path / f"iv{k}" / "scenario.yaml"
        src = interval_source(path, interval_data(data, streams, iv, 300))
        assert src.data == read_scenario(path).data
        assert resolve_scenario(src, over) == load_scenario(path, over)
