"""`endurance twin points RUN_DIR` → `endurance twin fit`: fit points from a run's own
turn rows, through the CLI (here a one-session twin run, so the fit must find the
profile that made it)."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from simulator.cli import main
from simulator.run.execute import execute
from simulator.run.spec import RunSpec

SCENARIO = Path(__file__).resolve().parents[3] / "scenarios" / "calibration" / "twin-vs-vllm-cpu.yaml"


def test_points_from_a_run_fit_back_its_profile(tmp_path: Path) -> None:
    res = execute(RunSpec(str(SCENARIO), ["turns=4"], twin="cpu-2core/smollm2-135m",
                          out_dir=tmp_path, show_progress=False), echo=lambda s: None)
    points = tmp_path / "points.yaml"
    out = CliRunner().invoke(main, ["twin", "points", str(res.run_dir), "-o", str(points),
                                    "--hardware", "cpu-2core", "--model", "smollm2-135m"])
    assert out.exit_code == 0, out.output
    doc = yaml.safe_load(points.read_text())
    assert doc["fit"] == ["eta_w", "eta_c"]
    assert {p["kind"] for p in doc["points"]} == {"decode", "prefill"}
    fit = CliRunner().invoke(main, ["twin", "fit", str(points)])
    assert fit.exit_code == 0, fit.output
    # the twin's own rows: its priors (eta_w 0.9, eta_c 0.3) come back
    lines = {ln.split()[1]: ln.split()[3] for ln in fit.output.splitlines()
             if ln.count("│") >= 3 and ln.split()[1] in ("eta_w", "eta_c")}
    assert abs(float(lines["eta_w"]) - 0.9) < 0.09 and abs(float(lines["eta_c"]) - 0.3) < 0.03, fit.output


def test_points_refuse_a_directory_without_rows(tmp_path: Path) -> None:
    out = CliRunner().invoke(main, ["twin", "points", str(tmp_path), "-o", str(tmp_path / "p.yaml")])
    assert out.exit_code == 2 and "no turns.parquet" in out.output


def test_points_refuse_a_corrupted_rows_file_in_one_line(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "turns.parquet").write_bytes(b"PAR1 not a parquet file")
    out = CliRunner().invoke(main, ["twin", "points", str(run), "-o", str(tmp_path / "p.yaml")])
    assert out.exit_code == 2 and "corrupted parquet" in out.output, out.output
    assert not (tmp_path / "p.yaml").exists()


def test_points_never_write_into_the_run_nor_over_a_file_without_force(tmp_path: Path) -> None:
    """`twin points RUN -o RUN/turns.parquet` overwrote the run's rows with YAML."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "turns.parquet").write_bytes(b"rows")
    for target in (run / "turns.parquet", run / "new.yaml"):
        out = CliRunner().invoke(main, ["twin", "points", str(run), "-o", str(target)])
        assert out.exit_code == 2 and "inside the run directory" in out.output, out.output
    assert (run / "turns.parquet").read_bytes() == b"rows"
    existing = tmp_path / "p.yaml"
    existing.write_text("mine")
    out = CliRunner().invoke(main, ["twin", "points", str(run), "-o", str(existing)])
    assert out.exit_code == 2 and "pass --force" in out.output, out.output
    assert existing.read_text() == "mine"
