"""A fleet's replicas and a P/D pair's instances share one performance model and engine
configuration, built once (not once per instance), each instance its own engine."""

from __future__ import annotations

import pytest

from simulator.endpoints.inprocess import twin
from simulator.endpoints.inprocess.fleet import InProcessFleet
from simulator.endpoints.inprocess.pd import InProcessPD, infinite_link
from simulator.twin.fleet.router import RouterConfig
from simulator.twin.model.perf_model import build_perf_model
from simulator.twin.pd.policy import PDConfig

HW, MODEL = "h100", "qwen3-coder-30b-a3b-awq"


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    made: list[str] = []

    def counting(*args: object, **kwargs: object) -> object:
        made.append(str(args))
        return build_perf_model(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(twin, "build_perf_model", counting)
    return made


def test_fleet_replicas_share_one_setup(builds: list[str]) -> None:
    f = InProcessFleet(HW, MODEL, replicas=4, router=RouterConfig())
    assert len(builds) == 1
    assert all(r.perf is f.replicas[0].perf and r.config is f.replicas[0].config
               for r in f.replicas)
    assert len({id(r.engine) for r in f.replicas}) == 4


def test_pd_instances_share_one_setup(builds: list[str]) -> None:
    p = InProcessPD(HW, MODEL, config=PDConfig(2, 2, infinite_link(), 0))
    assert len(builds) == 1
    assert all(r.perf is p.decodes[0].perf for r in p.instances)
    assert len({id(r.engine) for r in p.instances}) == 4
