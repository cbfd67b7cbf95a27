"""Issue 57 item 7: an error of `--set sampling.*` that the scenario's own check finds
(penalties on the Anthropic API) blamed line 1 of a file that sets no sampling; it
blames the --set, and the file's line when the file set it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from simulator.errors import ScenarioError
from simulator.scenario.load import load_scenario
from tests.conftest import small_scenario


def test_a_set_sampling_error_blames_the_set(tmp_path: Path) -> None:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(small_scenario()))
    with pytest.raises(ScenarioError) as exc:
        load_scenario(p, ["sampling.presence_penalty=0.5", "endpoint.api=anthropic"])
    msg = str(exc.value)
    assert msg.startswith("--set sampling.presence_penalty: "), msg
    assert str(p) not in msg and "Anthropic Messages API" in msg


def test_the_file_line_is_blamed_when_the_file_set_it(tmp_path: Path) -> None:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({**small_scenario(), "endpoint": {"api": "anthropic"},
                                 "sampling": {"frequency_penalty": 0.2}}, sort_keys=True))
    line = next(i for i, x in enumerate(p.read_text().splitlines(), 1)
                if "frequency_penalty" in x)
    with pytest.raises(ScenarioError) as exc:
        load_scenario(p, [])
    assert str(exc.value).startswith(f"{p}:{line} sampling.frequency_penalty: "), exc.value
