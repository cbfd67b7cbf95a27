"""A calibration point run both ways gives the same figure: `calibration_runs.run_point`
(what benchmarks/calibration.py prints) and `endurance run` on the same scenario
(what a user gets), read from the run's summary.json."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from simulator.calibration_runs import CODE_EDIT_SCENARIO, run_point
from simulator.cli import main


def test_one_calibration_point_both_ways_gives_the_same_figure(tmp_path: Path) -> None:
    over = ("turns=2",)
    bench = run_point(CODE_EDIT_SCENARIO, twin="a40/qwen3-coder-30b-a3b-awq",
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
    from simulator.analysis.summary import format_summary
    off = run_point(CODE_EDIT_SCENARIO, spec="off", overrides=("turns=2",))
    on = run_point(CODE_EDIT_SCENARIO, spec="ngram:24", overrides=("turns=2",))
    ref = off.summary["ngram_reference_tokens_per_pass"]
    assert off.tokens_per_forward_pass == 1.0 and ref > 3
    assert on.tokens_per_forward_pass is not None
    assert abs(ref - on.tokens_per_forward_pass) < 1e-9
    assert "what n-gram speculation would see" in format_summary(off.summary)
