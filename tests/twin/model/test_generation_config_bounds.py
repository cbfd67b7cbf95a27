"""Issue 57 item 7: a model profile with `repetition_penalty: .inf` was accepted and
wrote `Infinity` (not JSON) into the run's manifest. A profile's generation config is
bounded as a scenario's sampling is (`scenario.model.SamplingSpec`): finite, the same
ranges; a value past them is one line naming the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from simulator.errors import InputError
from simulator.twin.model.profiles import PROFILE_DIR, load_model

SHIPPED = PROFILE_DIR / "models" / "qwen3-coder-30b-a3b-awq.yaml"


def _profile(tmp_path: Path, **gen: object) -> Path:
    data = yaml.safe_load(SHIPPED.read_text())
    data["generation_config"] = {**data["generation_config"], **gen}
    p = tmp_path / "m.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


@pytest.mark.parametrize(("field", "value"), [
    ("repetition_penalty", float("inf")), ("repetition_penalty", float("nan")),
    ("repetition_penalty", 11.0), ("temperature", float("inf")), ("temperature", 2.5),
    ("top_p", float("nan")), ("top_k", 1 << 21)])
def test_a_generation_config_past_the_sampling_bounds_is_refused(
        tmp_path: Path, field: str, value: float) -> None:
    p = _profile(tmp_path, **{field: value})
    with pytest.raises(InputError) as exc:
        load_model(p)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(f"{p}: generation_config.{field}: "), msg


def test_the_shipped_generation_configs_load(tmp_path: Path) -> None:
    got = load_model(_profile(tmp_path, repetition_penalty=10.0)).generation_config
    assert got is not None and got.repetition_penalty == 10.0
