"""`simulator.sweep.fanout`: K independent points at once, results as the serial run's;
`sweep/size --parallel K` on the in-process twin give the serial JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from simulator.cli import main
from simulator.errors import InputError
from simulator.sweep.fanout import bisection_frontier, map_points

ROOT = Path(__file__).resolve().parents[2]
TEAM = str(ROOT / "scenarios" / "claude-code-team.yaml")


def square_or_fail(x: int) -> int:
    """A top-level (picklable) point function."""
    if x < 0:
        raise InputError(f"negative point {x}")
    return x * x


def test_map_points_serial_is_the_plain_loop_and_bad_arguments_are_refused() -> None:
    assert map_points(square_or_fail, [5, 3, 8, 1, 0]) == [25, 9, 64, 1, 0]
    assert map_points(square_or_fail, [], parallel=2) == []
    with pytest.raises(InputError, match="negative point -1"):
        map_points(square_or_fail, [1, -1])
    with pytest.raises(InputError, match="--parallel must be >= 1"):
        map_points(square_or_fail, [1], parallel=0)
    with pytest.raises(InputError, match="--executor must be one of local, ray"):
        map_points(square_or_fail, [1], executor="dask")


@pytest.mark.slow
def test_map_points_in_processes_keeps_item_order_and_raises_a_points_error() -> None:
    assert map_points(square_or_fail, [5, 3, 8, 1, 0], parallel=2) == [25, 9, 64, 1, 0]
    assert map_points(square_or_fail, [5, 3, 8, 1, 0], parallel=2, cost=float) == \
        [25, 9, 64, 1, 0]
    with pytest.raises(InputError, match="negative point -1"):
        map_points(square_or_fail, [1, -1, 2], parallel=2)


def test_ray_executor_without_ray_is_one_line_naming_the_extra(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)        # `import ray` fails
    with pytest.raises(InputError, match=r"pip install 'endurance\[ray\]'"):
        map_points(square_or_fail, [1], executor="ray")
    res = CliRunner().invoke(main, ["run", TEAM, "--endpoint", "http://127.0.0.1:9",
                                    "--workers", "2", "--executor", "ray",
                                    "--out", str(tmp_path)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert res.output.strip().splitlines() == [
        "error: --executor ray needs Ray, which is not installed: pip install 'endurance[ray]'"]
    assert not list(tmp_path.iterdir())


def test_bisection_frontier_is_the_bisection_tree_breadth_first() -> None:
    assert bisection_frontier(0, 16, 1) == [8]
    assert bisection_frontier(0, 16, 3) == [8, 4, 12]
    assert bisection_frontier(4, 8, 7) == [6, 5, 7]
    assert bisection_frontier(3, 4, 5) == []


def _bisect(lo: int, hi: int, ok: Any) -> list[int]:
    asked = []
    while hi - lo > 1:
        mid = (lo + hi) // 2
        asked.append(mid)
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return asked


@given(st.integers(0, 200), st.integers(2, 300), st.integers(1, 9), st.integers(0, 400))
def test_bisection_rounds_cover_every_serial_probe(lo: int, span: int, k: int,
                                                   threshold: int) -> None:
    """Rounds of `k` frontier points answer every probe the serial bisection makes,
    in at most ceil(serial probes / floor(log2(k + 1))) rounds."""
    hi = lo + span
    ok = lambda n: n <= threshold  # noqa: E731
    serial = _bisect(lo, hi, ok)
    known: dict[int, bool] = {}
    a, b, rounds = lo, hi, 0
    while b - a > 1:
        front = bisection_frontier(a, b, k)
        assert front and all(a < n < b for n in front) and len(set(front)) == len(front)
        known.update({n: ok(n) for n in front})
        rounds += 1
        while b - a > 1 and (a + b) // 2 in known:
            mid = (a + b) // 2
            a, b = (mid, b) if known[mid] else (a, mid)
    assert set(serial) <= set(known)
    depth = max(1, (k + 1).bit_length() - 1)
    assert rounds <= -(-len(serial) // depth)


def _json(*args: str) -> Any:
    res = CliRunner().invoke(main, list(args))
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _without_run_dirs(data: Any) -> Any:
    if isinstance(data, list):
        return [_without_run_dirs(x) for x in data]
    if isinstance(data, dict):
        return {k: _without_run_dirs(v) for k, v in data.items()
                if k not in ("run_dirs", "unused_run_dirs")}
    return data


@pytest.mark.slow
def test_parallel_sweep_and_size_give_the_serial_json(tmp_path: Path) -> None:
    sweep = ["sweep", TEAM, "--sessions", "1,3,2", "--turns", "4", "--json"]
    serial = _json(*sweep, "--out", str(tmp_path / "serial"))
    parallel = _json(*sweep, "--parallel", "2", "--out", str(tmp_path / "parallel"))
    assert [r["sessions"] for r in parallel] == [1, 3, 2]
    assert _without_run_dirs(parallel) == _without_run_dirs(serial)
    for row in parallel:          # each row still traces back to its own run
        (run_dir,) = row["run_dirs"]
        assert json.loads((Path(run_dir) / "summary.json").read_text())["sessions"] == \
            row["sessions"]
    size = ["size", TEAM, "--turns", "4", "--max-sessions", "6", "--slo",
            "per_session_tok_s>=50", "--json"]
    s_serial = _json(*size, "--out", str(tmp_path / "s1"))
    s_parallel = _json(*size, "--parallel", "3", "--out", str(tmp_path / "s3"))
    assert _without_run_dirs(s_parallel) == _without_run_dirs(s_serial)
    assert s_parallel["run_dirs"].keys() == s_serial["run_dirs"].keys()
