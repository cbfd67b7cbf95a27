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


def test_the_team_and_goodput_checks_read_the_source_as_a_resolve_does(tmp_path: Path
                                                                      ) -> None:
    """`size` asks whether a scenario is a team day and whether it sets goodput without
    resolving it (a team day's resolve copies and validates 100,000 requests): the
    same answers as resolving it."""
    from dataclasses import replace

    from simulator.sweep.api import search_base
    from simulator.sweep.team_size import is_team_day, team_replay
    spec = _spec()
    data = {"name": "team", "seed": 3, "system": {"tokens": 18_000}, "sessions": 3,
            "turns": 10, "replay": spec.model_dump(exclude_none=True)}
    (iv, streams), = plan_intervals(spec, 86_400, 0)
    day = tmp_path / "day.yaml"
    interval_source(day, interval_data(data, streams, iv, 0))
    bundled = Path(__file__).resolve().parents[2] / "scenarios" / "claude-code-team.yaml"
    for path, over in ((day, ()), (day, ("goodput.ttft_s=2",)), (bundled, ())):
        base = search_base(path, over, folder=tmp_path / "size")
        slow = replace(base, source=None)
        assert is_team_day(base) == (team_replay(slow) is not None) == (path == day)
        keys = base.top_keys()
        assert keys is not None and ("goodput" in keys) == ("goodput" in slow.resolve()[1])
