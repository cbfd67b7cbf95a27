"""A calibration point run both ways gives the same figure: `sweep.calibration.run_calibration`
(what benchmarks/calibration.py prints) and `endurance run` on the same scenario
(what a user gets), read from the run's summary.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from simulator.cli import main
from simulator.sweep.calibration import CODE_EDIT_SCENARIO, RUNS, run_calibration


def test_one_calibration_point_both_ways_gives_the_same_figure(tmp_path: Path) -> None:
    over = ("turns=2",)
    bench = run_calibration(CODE_EDIT_SCENARIO, twin="a40/qwen3-coder-30b-a3b-awq",
                      spec="ngram:5", overrides=over)
    res = CliRunner().invoke(main, ["run", str(CODE_EDIT_SCENARIO), "--spec", "ngram:5",
                                    "--twin", "a40/qwen3-coder-30b-a3b-awq", "--turns", "2",
                                    "--quiet", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    run_dir = Path(res.output.strip().splitlines()[-1])
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert bench.decode_tok_s_median is not None and bench.decode_tok_s_median > 0
    assert summary["decode_tok_s_median"] == bench.decode_tok_s_median
    assert summary["tokens_per_forward_pass"] == bench.tokens_per_forward_pass
    assert bench.tokens_per_forward_pass is not None and bench.tokens_per_forward_pass > 2


def test_every_run_prints_what_ngram_speculation_would_see() -> None:
    """Speculation off, the summary still carries the reference n-gram figure; with the
    reference setting on for one stream it is the run's own tokens per forward pass."""
    from simulator.report.console import format_summary
    off = run_calibration(CODE_EDIT_SCENARIO, spec="off", overrides=("turns=2",))
    on = run_calibration(CODE_EDIT_SCENARIO, spec="ngram:24", overrides=("turns=2",))
    ref = off.summary["ngram_reference_tokens_per_pass"]
    assert off.tokens_per_forward_pass == 1.0 and ref > 3
    assert on.tokens_per_forward_pass is not None
    assert abs(ref - on.tokens_per_forward_pass) < 1e-9
    assert "what n-gram speculation would see" in format_summary(off.summary)


# one run of each kind of calibration row in the fast subset; the rest run with -m slow
_FAST = {"code-edit ngram:24", "isolated-20k seed 1", "fresh 1 stream ngram:5",
         "kimi 1 ngram:5", "gb10 draft:7", "per-card 1"}


def _cli_summary(args: list[str], out: Path) -> dict[str, object]:
    res = CliRunner().invoke(main, ["run", *args, "--quiet", "--out", str(out)])
    assert res.exit_code == 0, res.output
    run_dir = Path(res.output.strip().splitlines()[-1])
    summary: dict[str, object] = json.loads((run_dir / "summary.json").read_text("utf-8"))
    return summary


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in _FAST else pytest.mark.slow)
                                  for n in RUNS])
def test_every_calibration_run_is_what_endurance_run_gives(name: str, tmp_path: Path) -> None:
    """Each scenario run behind a row of benchmarks/calibration.py gives the bench the
    figures `endurance run` prints for the same arguments (exactly: one path)."""
    run = RUNS[name]
    bench = run.run()
    cli = _cli_summary(run.cli_args(), tmp_path)
    assert bench.decode_tok_s_median is not None and bench.decode_tok_s_median > 0
    for key in ("decode_tok_s_median", "per_session_tok_s", "aggregate_tok_s",
                "tokens_per_forward_pass", "spec_mean_acceptance_length"):
        assert cli.get(key) == bench.summary.get(key), key


def test_every_kind_of_calibration_row_is_checked_in_the_fast_subset() -> None:
    kinds = {n.split(" ")[0] for n in RUNS}
    assert kinds == {n.split(" ")[0] for n in _FAST}
    assert set(RUNS) >= _FAST
