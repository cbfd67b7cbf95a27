"""`size --interval` split over Ray by interval (issue 58): a small team day on two Ray
workers gives the cards per interval that one process gives, probe for probe."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.importers.team_import import import_team
from simulator.scenario.load import check_data_limits
from simulator.sweep import api
from simulator.sweep.fanout import RayTasks, Serial
from tests.otel_export import team_day, write_json_logs

SLOS = ("ttft_p95_s<=3", "decode_tok_s_median>=40")


def _day(tmp: Path) -> Path:
    logs = write_json_logs(tmp / "logs.jsonl", team_day(58, 6, requests=(3, 6)), batch=50)
    out = tmp / "team.yaml"
    res = import_team([logs], "claude-code-otel", out_path=out)
    import yaml
    text = yaml.dump(res.data, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper),
                     sort_keys=False)
    check_data_limits(res.data, len(text), str(out))
    out.write_text(text)
    return out


@pytest.mark.slow
def test_ray_by_interval_gives_the_one_process_answer(tmp_path: Path) -> None:
    scenario = _day(tmp_path)
    one = api.team(api.search_base(scenario, out=tmp_path / "serial"), SLOS,
                   interval_s=3600, fanout=Serial())
    fx = RayTasks(2)
    try:
        ray = api.team(api.search_base(scenario, out=tmp_path / "ray"), SLOS,
                       interval_s=3600, fanout=fx)
    finally:
        fx.close()      # the Ray it started: left up, every later Ray test here skipped
    assert one.hours is not None and ray.hours is not None
    assert one.hours.complete and ray.hours.complete
    assert [h.cards for h in ray.hours.hours] == [h.cards for h in one.hours.hours]
    assert [[p.cards for p in h.probes] for h in ray.hours.hours] == \
        [[p.cards for p in h.probes] for h in one.hours.hours]
    assert ray.replicas == one.replicas
