"""`endurance twin fit` on hostile points files (issue 38 item 2): a FIFO, binary,
non-finite or out-of-range numbers, nothing to fit — one line, exit 2, no fitted terms
printed for a fit that means nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from simulator.cli import main

HEAD = "hardware: a40\nmodel: qwen3-coder-30b-a3b-awq\nfit: [eta_c]\npoints:\n"
OK = HEAD + ("  - {kind: decode, measured: 100, unit: tok_s, batch: 1, context: 1000}\n"
             "  - {kind: decode, measured: 400, unit: tok_s, batch: 8, context: 1000}\n")
CSV_HEAD = "kind,measured,unit,batch,context\n"

CASES = [
    ("binary-yaml", "p.yaml", bytes(range(128, 256)), "not UTF-8"),
    ("binary-csv", "p.csv", bytes(range(128, 256)), "not UTF-8"),
    ("measured-inf-yaml", "p.yaml", OK.replace("measured: 100", "measured: .inf").encode(),
     "points.0.measured"),
    ("measured-inf-csv", "p.csv", (CSV_HEAD + "decode,inf,tok_s,1,1000\n").encode(),
     "points.0.measured"),
    ("low-nan", "p.yaml", OK.replace("batch: 1,", "batch: 1, low: .nan,").encode(),
     "points.0.low"),
    ("batch-1e12", "p.yaml", OK.replace("batch: 8", "batch: 1000000000000").encode(),
     "points.1.batch"),
    ("context-1e21", "p.yaml", OK.replace("context: 1000}", "context: "
                                          "1000000000000000000000}", 1).encode(),
     "points.0.context"),
    ("all-weights-zero", "p.yaml", OK.replace("context: 1000}", "context: 1000, weight: 0}")
     .encode(), "every point's weight is 0"),
    ("deep-yaml", "p.yaml", ("points: " + "[" * 5000 + "]" * 5000 + "\n").encode(),
     "p.yaml"),
]


@pytest.mark.parametrize(("name", "data", "needle"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_a_hostile_points_file_is_one_line(tmp_path: Path, name: str, data: bytes,
                                           needle: str) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    r = CliRunner().invoke(main, ["twin", "fit", str(path), "--hardware", "a40",
                                  "--model", "qwen3-coder-30b-a3b-awq", "--free", "eta_c"])
    lines = r.output.strip().splitlines()
    assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), r.output
    assert needle in lines[0], lines[0]


def test_a_fifo_is_refused_before_it_is_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "p.yaml"
    os.mkfifo(fifo)
    r = CliRunner().invoke(main, ["twin", "fit", str(fifo)])
    assert r.exit_code == 2 and "a FIFO" in r.output, r.output


def test_an_empty_free_list_is_refused_not_replaced_by_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(OK)
    r = CliRunner().invoke(main, ["twin", "fit", str(path), "--free", ","])
    assert r.exit_code == 2 and "--free ','" in r.output, r.output
