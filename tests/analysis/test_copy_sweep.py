"""`sweep --copy`: where speculation starts to pay, by copy share, per session count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from simulator.analysis.copy_sweep import break_even, copy_levels, copy_overrides, copy_rows
from simulator.errors import InputError
from simulator.report.sweeps import format_copy_table


def test_levels_are_checked_and_sorted() -> None:
    assert copy_levels("1, 0,0.5") == [0.0, 0.5, 1.0]
    for bad in ("0.5", "0,x", "0,1.5", "0,0.5,0.5"):
        with pytest.raises(InputError, match="--copy"):
            copy_levels(bad)


def test_overrides_touch_only_code_edit_templates() -> None:
    assert copy_overrides([False, True, False, True], 0.25) == [
        "turn_templates.1.repeat_fraction=0.25", "turn_templates.3.repeat_fraction=0.25"]
    with pytest.raises(InputError, match="code_edit"):
        copy_overrides([False, False], 0.5)


def _figures(speed: dict[tuple[float, str, int], list[float]],
             ref: dict[float, float]) -> dict[tuple[float, str, int, int], dict[str, Any]]:
    return {(lv, sp, n, k): {"per_session_tok_s": v, "simulated": True,
                             "ngram_reference_tokens_per_pass": ref[lv]}
            for (lv, sp, n), vs in speed.items() for k, v in enumerate(vs)}


def test_ratio_is_per_seed_and_break_even_is_interpolated() -> None:
    # off runs at 100 tok/s; ngram:24 at 50 / 150 (seed 0) and 60 / 170 (seed 1)
    speed = {(0.0, "off", 1): [100.0, 100.0], (1.0, "off", 1): [100.0, 100.0],
             (0.0, "ngram:24", 1): [50.0, 60.0], (1.0, "ngram:24", 1): [150.0, 170.0]}
    rows = copy_rows(_figures(speed, {0.0: 1.0, 1.0: 11.0}), [0.0, 1.0],
                     ["off", "ngram:24"], [1], 2)
    assert [r["ratio"] for r in rows] == pytest.approx([0.55, 1.6])
    assert (rows[0]["ratio_min"], rows[0]["ratio_max"]) == pytest.approx((0.5, 0.6))
    (b,) = break_even(rows)
    # the mean ratio goes 0.55 → 1.6: crosses 1 at w = 0.45 / 1.05 of the way
    assert b["kind"] == "interpolated" and b["between"] == [0.0, 1.0]
    assert b["copy"] == pytest.approx(0.45 / 1.05)
    assert b["reference_tokens_per_pass"] == pytest.approx(1.0 + 10.0 * 0.45 / 1.05)
    text = format_copy_table(rows)
    assert "interpolated between the levels 0 and 1" in text
    assert "0.55× (0.50–0.60)" in text and "SIMULATED" in text


def test_break_even_below_and_above_the_levels_measured() -> None:
    pays = {(lv, sp, n): [v] for lv in (0.0, 1.0) for n in (1, 8)
            for sp, v in (("off", 100.0), ("ngram:24", 120.0 if n == 1 else 80.0))}
    rows = copy_rows(_figures(pays, {0.0: 1.0, 1.0: 10.0}), [0.0, 1.0],
                     ["off", "ngram:24"], [1, 8], 1)
    kinds = {b["requested_sessions"]: b["kind"] for b in break_even(rows)}
    assert kinds == {1: "below", 8: "above"}
    text = format_copy_table(rows)
    assert "pays at every level measured" in text and "does not pay at any level" in text


def test_sweep_cli_over_copy_levels(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from simulator.cli import main
    res = CliRunner().invoke(main, ["sweep", "scenarios/calibration/code-edit-single-stream.yaml",
                                    "--copy", "0,1", "--sessions", "1", "--turns", "1",
                                    "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "speculation by copy share (vs off)" in res.output
    assert "1 session, ngram:24: pays from copy" in res.output   # the twin: off at 0, on at 1
    assert list(tmp_path.glob("sweep-*/copy-sweep.png"))
    assert len(list(tmp_path.glob("sweep-*/copy-*/*/*/turns.parquet"))) == 4
    bad = CliRunner().invoke(main, ["sweep", "scenarios/claude-code-endurance.yaml",
                                    "--copy", "0,2", "--out", str(tmp_path)])
    assert bad.exit_code == 2 and "--copy" in bad.output
    both = CliRunner().invoke(main, ["sweep", "scenarios/claude-code-endurance.yaml",
                                     "--copy", "0,1", "--set", "compaction.kind=none,prune",
                                     "--out", str(tmp_path)])
    assert both.exit_code == 2 and "does not combine" in both.output
