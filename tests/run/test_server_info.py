"""`ServerInfo`: the server's facts, read once from `/v1/models` (issue 23)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from simulator.records.manifest import Manifest
from simulator.run import server as server_info
from simulator.run.server import ServerInfo
from tests.conftest import small_scenario

TWIN = {"id": "qwen3", "object": "model", "max_model_len": 262_144,
        "endurance_twin": {"simulated": True, "time_scale": 20.0, "hardware": "a40"}}


def test_the_twin_over_http_is_simulated_with_its_time_scale_and_window() -> None:
    info = ServerInfo.from_models([TWIN], "qwen3", "http://127.0.0.1:8000")
    assert (info.simulated, info.time_scale, info.context_limit, info.metrics_url) == \
        (True, 20.0, 262_144, "http://127.0.0.1:8000/metrics")
    assert info.clock().rate == 20.0
    fields = info.stamp(Manifest())
    assert fields.simulated is True and fields.time_scale == 20.0
    assert fields.http_twin_hardware == "a40" and fields.server_max_model_len == 262_144
    again = ServerInfo.from_manifest(fields, "http://127.0.0.1:8000")   # --resume
    assert again == info


@pytest.mark.parametrize("entries", [
    [], [{"id": "m", "max_model_len": True}], [{"id": "m", "max_model_len": -5}],
    [{"id": "m", "endurance_twin": {"simulated": "yes", "time_scale": 20}}],
])
def test_a_real_or_odd_server_is_not_simulated_and_states_no_window(
        entries: list[dict[str, Any]]) -> None:
    info = ServerInfo.from_models(entries, "m", "http://h:1/v1")
    assert not info.simulated and info.time_scale == 1.0 and info.context_limit is None
    assert info.metrics_url == "http://h:1/metrics" and info.stamp(Manifest()) == Manifest()


def test_a_real_server_s_window_is_the_named_model_s() -> None:
    entries = [{"id": "a", "max_model_len": 4096}, {"id": "b", "max_model_len": 8192}]
    assert ServerInfo.from_models(entries, "b", "http://h:1").context_limit == 8192
    assert ServerInfo.from_models(entries, "zzz", "http://h:1").context_limit == 4096


def test_a_run_probes_the_server_once_single_and_sharded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from simulator.run.execute import execute
    from simulator.run.shards import InlineExecutor, execute_sharded
    from simulator.run.spec import RunSpec
    from tests.http_twin import twin_in_thread
    calls: list[str] = []
    real = server_info.models

    def counted(url: str, timeout_s: float) -> list[dict[str, Any]]:
        calls.append(url)
        return real(url, timeout_s)

    monkeypatch.setattr(server_info, "models", counted)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(small_scenario(sessions=2, turns=1, think_time_s=0.0)))
    with twin_in_thread(time_scale=50.0) as url:
        spec = RunSpec(str(path), endpoint_url=url, out_dir=tmp_path / "o", show_progress=False)
        assert execute(spec, echo=lambda _l: None).manifest.time_scale == 50.0
        assert len(calls) == 1
        res = execute_sharded(spec, 2, echo=lambda _l: None, executor=InlineExecutor())
        assert res.manifest.time_scale == 50.0 and len(calls) == 2
