"""The vLLM release the twin imitates (issue 48 item 7): a named engine setting whose
release-dependent default, hybrids' prefix-cache state retention, follows vLLM's history
(dense up to 0.28; 0 from 0.29, PR 52216; dense with an MTP/EAGLE drafter, PR 55760),
printed by `twin show`; an explicit retention always wins."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from simulator.cli import main
from simulator.errors import InputError
from simulator.scenario.model import TwinSpec
from simulator.twin.core.engine import TwinEngine
from simulator.twin.model.perf_model import build_perf_model
from simulator.twin.model.vllm_versions import parse_version, retention_default

KIMI = "kimi-linear-48b-a3b-awq"


@pytest.mark.parametrize(("version", "eagle", "interval"), [
    ("0.28", False, None), ("0.28", True, None), ("0.11", False, None),
    ("0.29", False, 0), ("v0.29.1", False, 0), ("0.29", True, None), ("0.32", False, 0),
    ("0.32", True, None)])
def test_retention_default_by_release(version: str, eagle: bool, interval: int | None) -> None:
    assert retention_default(version, eagle_drafter=eagle).interval == interval


@pytest.mark.parametrize("bad", ["0.10", "0.33", "1.0", "latest", "0.28.x", ""])
def test_releases_outside_the_model_are_refused(bad: str) -> None:
    with pytest.raises(InputError, match="vllm_version"):
        parse_version(bad)


def _retention(**over: object) -> object:
    pm = build_perf_model("a40", KIMI, overrides=dict(over))
    kept = TwinEngine(pm).kv_cache_manager.retention
    assert kept == pm.engine.prefix_cache_retention_interval
    return kept


def test_the_version_sets_what_the_kv_manager_keeps() -> None:
    assert _retention() == 0                                   # 0.32, the default
    assert _retention(vllm_version="0.28") is None             # dense
    assert _retention(vllm_version="0.28", prefix_cache_retention_interval=0) == 0
    assert _retention(vllm_version="0.32", prefix_cache_retention_interval=None) is None
    mtp = build_perf_model("a40", "qwen3.8-27b-awq", spec="mtp:2")
    assert mtp.engine.prefix_cache_retention_interval is None  # PR 55760
    with pytest.raises(InputError, match="vllm_version"):
        build_perf_model("a40", KIMI, overrides={"vllm_version": "0.9"})


def test_scenario_setting_reads_a_yaml_number_as_a_release() -> None:
    """A number that keeps its two-digit text is that release; one that lost it (0.3:
    0.30 or 0.3?) is refused, "quote it" (issue 57: it ran as 0.30)."""
    spec = TwinSpec.model_validate({"vllm_version": 0.28})
    assert spec.vllm_version == "0.28"
    assert spec.engine_overrides()["vllm_version"] == "0.28"
    with pytest.raises(ValueError, match="quote it"):
        TwinSpec.model_validate({"vllm_version": 0.3})
    assert "vllm_version" not in TwinSpec().engine_overrides()


def test_twin_show_prints_the_release_and_its_default() -> None:
    r = CliRunner().invoke(main, ["twin", "show", "--hardware", "a40", "--model", KIMI,
                                  "--spec", "off", "--vllm-version", "0.28"])
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())
    assert "imitates vLLM 0.28" in flat and "dense" in flat and "PR 52216" in flat
    r = CliRunner().invoke(main, ["twin", "show", "--hardware", "a40", "--model", KIMI,
                                  "--spec", "off"])
    assert "imitates vLLM 0.32" in " ".join(r.output.split())
