"""A cold cache per run on a long-lived server (issue 27): the HTTP twin keeps its prefix
cache across runs, so a second run on it read 99.9% from cache, above the client's own
bound; `POST /reset_prefix_cache` (vLLM's name) and `run --reset-prefix-cache` start
each run cold, and the summary warns whenever the server's share exceeds the bound."""

from __future__ import annotations

import json
import urllib.request
from array import array
from pathlib import Path

import pytest
from click.testing import CliRunner

from simulator.analysis.cache_bound import cache_bound_warning
from simulator.cli import main
from simulator.twin.core.block_pool import BlockPool, extend_hash_chain
from tests.conftest import SCENARIOS
from tests.http_twin import twin_server

FAST = ["--set", "think_time_s=0",
        *(x for i in range(5) for x in ("--set", f"turn_templates.{i}.tool.latency_s=0"))]


def test_pool_reset_forgets_every_hash_and_is_refused_while_blocks_are_held() -> None:
    pool = BlockPool(8, 4)
    hashes = extend_hash_chain(array("i", range(8)), 8, 4, [])
    blocks = pool.allocate(2)
    assert blocks is not None
    for b, h in zip(blocks, hashes, strict=True):
        pool.cache_block(b, h)
    assert not pool.reset_prefix_cache()          # a running request holds them
    assert pool.lookup(hashes, 2) == blocks
    pool.free(list(reversed(blocks)))
    assert pool.lookup(hashes, 2) == blocks       # freed blocks stay findable …
    assert pool.reset_prefix_cache()
    assert not pool.lookup(hashes, 2) and pool.num_cached() == 0   # … until the reset
    assert pool.num_free == 8


def test_warning_only_above_the_client_bound() -> None:
    assert cache_bound_warning({"server_cache_read_share": 0.999,
                                "client_reusable_share": 0.963}) is not None
    assert cache_bound_warning({"server_cache_read_share": 0.97,
                                "client_reusable_share": 0.963}) is None
    assert cache_bound_warning({"server_cache_read_share": None,
                                "client_reusable_share": 0.9}) is None


def _run(url: str, out: Path, *extra: str) -> tuple[dict[str, object], str]:
    res = CliRunner().invoke(main, ["run", str(SCENARIOS / "claude-code-endurance.yaml"),
                                    "--endpoint", url, "--turns", "4", "--quiet",
                                    "--out", str(out), *FAST, *extra])
    assert res.exit_code == 0, res.output
    run_dir = Path(res.stdout.strip().splitlines()[-1])
    return json.loads((run_dir / "summary.json").read_text()), res.output


@pytest.mark.slow
def test_a_second_run_on_one_server_warns_and_a_reset_starts_it_cold(tmp_path: Path) -> None:
    with twin_server(time_scale=2000.0, log=tmp_path / "twin.log") as url:
        first, out1 = _run(url, tmp_path)
        warm, out2 = _run(url, tmp_path)
        cold, out3 = _run(url, tmp_path, "--reset-prefix-cache")
        req = urllib.request.Request(url + "/reset_prefix_cache", data=b"", method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            assert json.loads(r.read()) == {"success": True}
    assert "WARNING" not in out1
    assert warm["server_cache_read_share"] > warm["client_reusable_share"] + 0.02  # type: ignore[operator]
    assert "WARNING: the server read" in out2 and "--reset-prefix-cache" in out2
    assert "prefix cache reset: " in out3 and "WARNING" not in out3
    assert cold["server_cache_read_share"] == pytest.approx(first["server_cache_read_share"])


def test_reset_needs_an_endpoint() -> None:
    res = CliRunner().invoke(main, ["run", str(SCENARIOS / "claude-code-endurance.yaml"),
                                    "--reset-prefix-cache"])
    assert res.exit_code == 2 and "needs --endpoint" in res.output


def _sweep(url: str, out: Path, *extra: str) -> list[dict[str, object]]:
    res = CliRunner().invoke(main, ["sweep", str(SCENARIOS / "claude-code-endurance.yaml"),
                                    "--endpoint", url, "--sessions", "1", "--turns", "4",
                                    # two points of the same traffic (a count listed twice is
                                    # refused): the description is in no prompt
                                    "--set", "description=first,second",
                                    "--json", "--out", str(out), *FAST, *extra])
    assert res.exit_code == 0, res.output
    rows: list[dict[str, object]] = json.loads(res.stdout)
    return rows


@pytest.mark.slow
def test_sweep_points_start_cold_with_the_flag(tmp_path: Path) -> None:
    with twin_server(time_scale=2000.0, log=tmp_path / "twin.log") as url:
        warm = _sweep(url, tmp_path)
        cold = _sweep(url, tmp_path, "--reset-prefix-cache")
    share = "mean_server_cache_read_share"             # a --set sweep row (one run each)
    assert warm[1][share] > warm[0][share]  # type: ignore[operator]
    assert cold[0][share] == pytest.approx(cold[1][share])
    res = CliRunner().invoke(main, ["size", str(SCENARIOS / "claude-code-endurance.yaml"),
                                    "--slo", "ttft_p95_s<=9", "--reset-prefix-cache"])
    assert res.exit_code == 2 and "needs --endpoint" in res.output
