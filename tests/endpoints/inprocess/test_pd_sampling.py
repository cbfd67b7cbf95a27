"""Issue 57 item 7: a P/D run's manifest said `sampling.resolved: null` while its
twins resolved the model's generation config; the P/D group states what its
instances sample with, as one twin and a fleet do."""

from __future__ import annotations

from pathlib import Path

import yaml

from simulator.endpoints.inprocess.pd import InProcessPD, infinite_link
from simulator.endpoints.inprocess.twin import InProcessTwin
from simulator.run.manifest import sampling_manifest
from simulator.scenario.load import load_scenario
from simulator.twin.core.sampling import NEUTRAL
from simulator.twin.pd.policy import PDConfig
from tests.conftest import small_scenario

HW, MODEL = "a40", "qwen3-coder-30b-a3b-awq"


def test_a_pd_group_states_what_it_resolved(tmp_path: Path) -> None:
    pd = InProcessPD(HW, MODEL, config=PDConfig(1, 1, infinite_link(), 0))
    one = InProcessTwin(HW, MODEL)
    assert one.sampling_defaults != NEUTRAL          # the model has a generation config
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(small_scenario(sampling={"top_k": 7})))
    s, _ = load_scenario(p, [])
    got, want = sampling_manifest(s, pd), sampling_manifest(s, one)
    assert got["resolved"] is not None and got == want, got
    assert got["resolved"]["top_k"] == 7  # type: ignore[index]
