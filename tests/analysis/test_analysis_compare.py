"""compare: side-by-side figures, paired bootstrap CI, overlay plot, CLI --json."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from simulator.analysis.compare import bootstrap_ratio, compare_runs, load_runs, paired_compare, pct_diff
from simulator.analysis.synthetic import synthetic_turns, write_run_dir
from simulator.cli import main
from simulator.report.compare import format_comparison


def test_identical_runs_ci_includes_one() -> None:
    t = synthetic_turns(turns=90, seed=3)
    res = paired_compare(t, t.copy(), label_a="a", label_b="b")
    assert res.ratio == pytest.approx(1.0)
    assert res.ci_low is not None and res.ci_high is not None
    assert res.ci_low <= 1.0 <= res.ci_high and not res.excludes_one


def test_same_workload_different_noise_includes_one() -> None:
    a = synthetic_turns(turns=150, seed=1, noise=0.1, compaction_every=0)
    b = synthetic_turns(turns=150, seed=2, noise=0.1, compaction_every=0)
    assert not paired_compare(a, b, label_a="a", label_b="b").excludes_one


def test_clearly_slower_run_excludes_one() -> None:
    block = synthetic_turns(turns=120, seed=1, compaction_every=40)
    prune = synthetic_turns(turns=120, seed=2, tok_s=70.0, compaction_every=1,
                            post_compaction_slowdown=1.2)
    res = paired_compare(block, prune, label_a="block", label_b="prune")
    assert res.matched_turns == 120 and res.excludes_one
    assert res.ci_high is not None and res.ci_high < 1.0


def test_bootstrap_is_seeded_and_bounded() -> None:
    rng = np.random.default_rng(0)
    out = rng.integers(100, 800, 500).astype(float)
    e_a, e_b = out / 100.0, out / 80.0
    r1 = bootstrap_ratio(out, e_a, out, e_b, resamples=500, seed=7)
    r2 = bootstrap_ratio(out, e_a, out, e_b, resamples=500, seed=7)
    assert r1 == r2 and r1[0] == pytest.approx(0.8)
    assert bootstrap_ratio(out[:0], e_a[:0], out[:0], e_b[:0]) == (None, None, None)


def test_pct_diff() -> None:
    assert pct_diff(100.0, 90.0) == pytest.approx(-10.0)
    assert pct_diff(0, 5) is None and pct_diff(None, 5) is None and pct_diff(True, 1) is None
    assert pct_diff(1, True) is None and pct_diff(2.0, "3") is None     # not numbers


def _two_runs(tmp_path: Path, *, same: bool = True) -> tuple[Path, Path]:
    a = write_run_dir(tmp_path / "block", synthetic_turns(turns=60, seed=1), label="block")
    b = write_run_dir(tmp_path / "prune",
                      synthetic_turns(turns=60, seed=2, tok_s=60, compaction_every=1,
                                      post_compaction_slowdown=1.1),
                      label="prune", scenario_hash="h0" if same else "other",
                      compaction_kind="prune")
    return a, b


def test_compare_runs_table(tmp_path: Path) -> None:
    a, b = _two_runs(tmp_path)
    result = compare_runs(load_runs([a, b]), resamples=300)
    agg = result["figures"]["aggregate_tok_s"]
    assert result["pct_vs_first"]["aggregate_tok_s"][0] == pytest.approx(
        100 * (agg[1] - agg[0]) / agg[0])
    assert result["paired"][0]["excludes_one"] is True
    assert result["paired"][0]["differs_in"] == ["compaction"]   # still the same workload
    text = format_comparison(result)
    assert "block (SIM)" in text and "CI" in text


def test_different_scenarios_are_not_paired(tmp_path: Path) -> None:
    a, b = _two_runs(tmp_path, same=False)
    result = compare_runs(load_runs([a, b]), resamples=300)
    assert result["paired"] == [] and "no paired comparison" in result["notes"][0]


def test_cli_compare_json(tmp_path: Path) -> None:
    a, b = _two_runs(tmp_path)
    out = tmp_path / "cmp"
    res = CliRunner().invoke(main, ["compare", str(a), str(b), "--json", "--out", str(out),
                                    "--resamples", "200"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert [r["label"] for r in data["runs"]] == ["block", "prune"]
    png = Path(data["overlay_png"])
    assert png.parent == out and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / "compare.json").read_text())["runs"] == data["runs"]


def test_cli_compare_writes_its_own_folder_not_into_a_run(tmp_path: Path) -> None:
    a, b = _two_runs(tmp_path)
    res = CliRunner().invoke(main, ["compare", str(a), str(b), "--resamples", "200"])
    assert res.exit_code == 0, res.output
    png = Path(res.output.split("overlay: ")[1].split()[0])
    assert png.parent.parent == a.parent and png.parent.name.startswith("compare-")
    assert not (a / "compare_overlay.png").exists() and (png.parent / "compare.json").is_file()


def test_cli_compare_needs_two_runs(tmp_path: Path) -> None:
    a, _ = _two_runs(tmp_path)
    res = CliRunner().invoke(main, ["compare", str(a)])
    assert res.exit_code == 2 and "at least two" in res.output
