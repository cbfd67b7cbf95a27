"""A finished small run for the `watch` tests to replay (one per test module)."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.run.execute import execute
from simulator.run.spec import RunSpec
from tests.conftest import small_scenario
from tests.reliability_twin import write_yaml


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("watch")
    scen = write_yaml(tmp / "s.yaml", small_scenario(turns=3, sessions=2))
    res = execute(RunSpec(str(scen), [], out_dir=tmp / "runs", show_progress=False),
                  echo=lambda _: None)
    assert res.status == "completed"
    return Path(res.run_dir)
