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

from simulator.analysis.search import bisection_frontier
from simulator.cli import main
from simulator.errors import InputError
from simulator.sweep.fanout import Processes, map_points

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
                if k not in ("run_dirs", "unused_run_dirs", "run_dir")}
    return data


def _intervals(run_dirs: list[str]) -> list[tuple[float, float]]:
    out = []
    for d in run_dirs:
        m = json.loads((Path(d) / "manifest.json").read_text())
        out.append((float(m["started_at"]), float(m["ended_at"])))
    return out


def _overlap(run_dirs: list[str]) -> bool:
    """Some two points' runs were open at the same time (wall clock)."""
    end = float("-inf")
    for start, stop in sorted(_intervals(sorted(set(run_dirs)))):
        if start < end:
            return True
        end = max(end, stop)
    return False


def _all_run_dirs(data: Any) -> list[str]:
    if isinstance(data, list):
        return [d for x in data for d in _all_run_dirs(x)]
    if isinstance(data, dict):
        own = data.get("run_dirs")
        dirs = [d for ds in own.values() for d in ds] if isinstance(own, dict) else \
            list(own) if isinstance(own, list) else []
        if isinstance(data.get("run_dir"), str) and data["run_dir"]:
            dirs.append(data["run_dir"])
        return dirs + [d for k, v in data.items() if k != "run_dirs" for d in _all_run_dirs(v)]
    return []


# Every many-run kind, as the CLI takes it (short twin runs).
KINDS: dict[str, list[str]] = {
    "counts": ["sweep", TEAM, "--sessions", "1,3,2", "--turns", "4"],
    "spec": ["sweep", TEAM, "--sessions", "1,2", "--turns", "3", "--spec", "off,ngram:8"],
    "setting": ["sweep", TEAM, "--sessions", "2", "--turns", "3",
                "--set", "compaction.kind=none,prune"],
    "copy": ["sweep", TEAM, "--sessions", "1", "--turns", "2", "--copy", "0,1",
             "--spec", "off,ngram:8"],
    "tiers": ["sweep", TEAM, "--sessions", "1,2", "--turns", "3", "--kv-offload-gib", "0,8"],
    "replicas": ["sweep", TEAM, "--sessions", "2,4", "--turns", "3", "--replicas", "1,2"],
    "size": ["size", TEAM, "--turns", "4", "--max-sessions", "6", "--slo",
             "per_session_tok_s>=50"],
    "size-tiers": ["size", TEAM, "--turns", "3", "--max-sessions", "4", "--slo",
                   "per_session_tok_s>=50", "--kv-offload-gib", "0,8", "--repeats", "0"],
    "size-team": ["size", TEAM, "--turns", "3", "--max-sessions", "4", "--slo",
                  "per_session_tok_s>=50", "--team", "6", "--router", "round_robin",
                  "--repeats", "0"],
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(KINDS))
def test_every_many_run_kind_in_parallel_gives_the_serial_figures_and_fans_out(
        kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--parallel 2` gives exactly the serial JSON (figures, probes, answers), and its
    points were handed to the 2-wide process pool two or more at a time (not silently
    run one by one). Wall-clock overlap is not asserted: on a loaded machine one spawned
    worker can finish a short point before the other has imported."""
    batches: list[tuple[int, int]] = []
    real_map = Processes.map

    def spy(self: Processes, fn: Any, items: Any, *a: Any, **k: Any) -> Any:
        batches.append((self.width, len(items)))
        return real_map(self, fn, items, *a, **k)
    monkeypatch.setattr(Processes, "map", spy)
    args = KINDS[kind]
    code = 1 if kind.startswith("size") else 0

    def run(*extra: str) -> Any:
        res = CliRunner().invoke(main, [*args, "--json", *extra])
        assert res.exit_code in (0, code), res.output
        return json.loads(res.stdout)
    serial = run("--out", str(tmp_path / "serial"))
    assert batches == []                    # serial: no pool
    parallel = run("--parallel", "2", "--out", str(tmp_path / "parallel"))
    assert _without_run_dirs(parallel) == _without_run_dirs(serial)
    assert not _overlap(_all_run_dirs(serial))
    assert any(w == 2 and n >= 2 for w, n in batches), batches


@pytest.mark.slow
def test_a_sweep_row_is_the_figures_of_its_run_by_name(tmp_path: Path) -> None:
    """For each point, every figure in sweep.json equals the same-named figure of that
    point's summary.json (the steady window's under `window_*`, never renamed)."""
    rows = _json("sweep", TEAM, "--sessions", "1,3", "--turns", "4", "--json",
                 "--out", str(tmp_path))
    for row in rows:
        (run_dir,) = row["run_dirs"]
        summary = json.loads((Path(run_dir) / "summary.json").read_text())
        shared = [k for k in row if k in summary]
        assert len(shared) > 50 and "window_aggregate_tok_s" in shared
        assert {k: row[k] for k in shared} == {k: summary[k] for k in shared}
        assert row["requested_sessions"] == summary["requested_sessions"]


def test_a_calibration_point_on_a_file_that_is_no_scenario_is_one_input_error(
        tmp_path: Path) -> None:
    """`twin fit` with a spec_decode point naming /etc/passwd ended in a RuntimeError
    traceback (hostile round 3): the point's InputError is raised as itself."""
    from simulator.sweep.calibration import run_calibration
    bad = tmp_path / "passwd"
    bad.write_text("root:x:0:0:root:/root:/bin/bash\n")
    with pytest.raises(InputError, match="a scenario must be a YAML mapping"):
        run_calibration(bad, twin="a40/qwen3-coder-30b-a3b-awq")
