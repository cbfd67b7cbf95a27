"""A command runs with the collector's thresholds set for a large, long-lived heap."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from simulator.cli import main
from simulator.cli._app import GC_THRESHOLDS
from tests.conftest import SCENARIOS


@pytest.fixture
def default_thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*before)


@pytest.mark.usefixtures("default_thresholds")
def test_a_command_sets_the_collectors_thresholds() -> None:
    res = CliRunner().invoke(main, ["validate", str(SCENARIOS / "claude-code-team.yaml")])
    assert res.exit_code == 0, res.output
    assert gc.get_threshold() == GC_THRESHOLDS != (700, 10, 10)
