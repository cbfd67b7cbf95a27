"""Bad P/D settings are refused in one line (exit code 2), and good ones compose."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from simulator.cli import main
from simulator.twin.pd.link import LinkQueues
from simulator.twin.pd.policy import LinkSpec, PDConfig, parse_split, prefill_remote
from tests.conftest import SCENARIOS

TEAM = str(SCENARIOS / "claude-code-team.yaml")


@pytest.mark.parametrize("args", [
    ["--pd", "0:2"], ["--pd", "1:0"], ["--pd", "two"], ["--pd", "1:2:3"],
    ["--pd", "1:2", "--set", "fleet.kv_link_gb_s=0"],
    ["--pd", "1:2", "--set", "fleet.kv_link_gb_s=nan"],
    ["--pd", "1:2", "--set", "fleet.kv_link_gb_s=-3"],
    ["--pd", "1:1", "--set", "fleet.kv_link_gb_s=1e-12"],       # issue 57: never ended
    ["--pd", "1:1", "--set", "fleet.kv_link_latency_s=1e6"],
    ["--pd", "1:2", "--set", "fleet.max_local_prefill=-1"],
    ["--pd", "1:2", "--set", "fleet.kv_link=infiniband"],      # the a40 has none
    ["--pd", "1:2", "--replicas", "3"],
    ["--pd"],                                                   # a split needed outside size
    ["--pd", "1:1,1:2"],                                        # a list is for sweep
])
def test_bad_pd_settings_are_refused_in_one_line(args: list[str], tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["run", TEAM, "--sessions", "1", "--turns", "1",
                                    "--quiet", "--out", str(tmp_path), *args])
    assert res.exit_code == 2, res.output
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), res.output
    assert "Traceback" not in res.output
    assert not any(tmp_path.iterdir())


def test_size_pd_needs_a_team(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["size", TEAM, "--slo", "per_session_tok_s>=50", "--pd",
                                    "--out", str(tmp_path)])
    assert res.exit_code == 2 and "--team" in res.output


@pytest.mark.parametrize(("bw", "lat"), [(0.0, 0.0), (math.nan, 0.0), (-1.0, 0.0),
                                         (1e9, -1.0), (1e9, math.nan), (1e9, math.inf),
                                         (1e-3, 0.0), (1e9, 1e6)])
def test_a_link_of_no_bandwidth_or_bad_latency_is_refused(bw: float, lat: float) -> None:
    with pytest.raises(ValueError, match="KV link"):
        LinkSpec("x", bw, lat)


@pytest.mark.parametrize(("p", "d", "t"), [(0, 1, 0), (1, 0, 0), (1, 1, -1)])
def test_zero_instances_or_a_negative_threshold_is_refused(p: int, d: int, t: int) -> None:
    with pytest.raises(ValueError, match="P/D"):
        PDConfig(p, d, LinkSpec("x", 1e9, 0.0), t)


def test_dynamos_rule_and_the_split_parser() -> None:
    assert prefill_remote(5000, 4000, 1000) is False          # 1000 uncached: local
    assert prefill_remote(5001, 4000, 1000) is True
    assert prefill_remote(10, 0, 0) is True
    assert parse_split(" 2:3 ") == (2, 3)


def test_transfers_queue_per_pair_and_pairs_do_not_contend() -> None:
    q = LinkQueues(LinkSpec("x", 1e9, 0.001), bytes_per_token=1000.0)
    a = q.transfer((0, 0), 0.0, 1_000_000)        # 1 GB: 1.001 s
    b = q.transfer((0, 0), 0.5, 1_000_000)        # waits for a
    c = q.transfer((1, 0), 0.5, 1_000_000)        # another pair: no wait
    assert a == pytest.approx(1.001) and b == pytest.approx(2.002) and c == pytest.approx(1.501)
    assert q.counters.transfers == 3 and q.counters.bytes == 3e9
