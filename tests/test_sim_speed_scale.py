"""`benchmarks/sim_speed.py --issue-base`: figures judged on the issue's scale, by what ran
beside the issue's base, not by this machine's raw seconds."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def sim_speed() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sim_speed", ROOT / "benchmarks" / "sim_speed.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(ROOT / "benchmarks"))      # it imports machine.py beside it
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return module


def test_a_machine_twice_as_slow_halves_every_after_figure(sim_speed: ModuleType) -> None:
    base = sim_speed.ISSUE_BASE_CPU_S
    cpu = {"team256": {"before": [2 * base["team256"]] * 2, "after": [9.0, 11.0]},
           "size": {"before": [2 * base["size"]], "after": [130.0]},
           "fleet-size": {"before": [400.0], "after": [250.0]}}
    lines = sim_speed.issue_scale_lines(cpu, True)
    assert "this machine against the issue's: 2.00×" in lines[-1]
    row = {line.split()[0]: line for line in lines[1:-1]}
    assert "5.0 CPU-s (goal ≤ 5: met)" in row["team256"]
    assert "65.0 CPU-s (goal ≤ 60: not met)" in row["size"]
    assert "125.0 CPU-s (goal ≤ 120: not met)" in row["fleet-size"]
    assert row["fleet-size"].split()[1:4] == ["400.0", "250.0", "0.62"]


def test_no_scale_without_a_case_the_issue_measured(sim_speed: ModuleType) -> None:
    lines = sim_speed.issue_scale_lines({"fleet4": {"before": [20.0], "after": [12.0]}}, True)
    assert "CPU-s" not in lines[1] and lines[1].split()[1:] == ["20.0", "12.0", "0.60"]
    assert lines[-1].startswith("this machine against the issue's: unknown")
    # a plain before/after comparison names no scale at all
    plain = sim_speed.issue_scale_lines({"fleet4": {"before": [20.0], "after": [12.0]}}, False)
    assert len(plain) == 2 and "issue" not in " ".join(plain)


def test_a_failed_run_is_no_figure(sim_speed: ModuleType) -> None:
    """A side whose command failed (a checkout without the scenario, a crash) ran for a
    second or two: its CPU is no figure to divide by."""
    runs = [("before", {"rc": 2, "cpu_s": 1.8}), ("after", {"rc": 0, "cpu_s": 17.8}),
            ("before", {"rc": 0, "cpu_s": 20.0}), ("after", {"rc": 0, "cpu_s": 18.0})]
    assert sim_speed.counted_cpu(runs) == {"before": [20.0], "after": [17.8, 18.0]}
    failed = sim_speed.counted_cpu([("before", {"rc": 2, "cpu_s": 1.8}),
                                    ("after", {"rc": 0, "cpu_s": 17.8})])
    assert failed == {"before": [], "after": [17.8]}
    lines = sim_speed.issue_scale_lines({"team256": failed}, True)
    assert lines[1].split()[0] == "team256" and "no ratio: every before run failed" in lines[1]
    assert not any("9.87" in line or "0.10" in line for line in lines)


def test_a_before_that_is_no_checkout_is_refused_before_anything_runs(tmp_path: Path) -> None:
    for before in (tmp_path / "missing", tmp_path):
        out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "sim_speed.py"), "--team",
                              "--before", str(before), "--cases", "team256"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 2, out.stderr
        assert "--before" in out.stderr and "no checkout" in out.stderr
        assert "Traceback" not in out.stderr and "case" not in out.stdout


def test_a_failed_run_says_why_in_its_row(sim_speed: ModuleType) -> None:
    failed = {"rc": 1, "summary": {}, "last": "ModuleNotFoundError: No module named 'x'"}
    assert sim_speed._answer(failed) == "rc 1: ModuleNotFoundError: No module named 'x'"
    assert sim_speed._answer({"rc": 0, "summary": {}, "last": "done"}) == ""
