"""report: files from a synthetic run dir, valid embedded PNGs, headless Chromium, load errors."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from PIL import Image

from simulator.analysis.load import load_run
from simulator.analysis.synthetic import synthetic_turns, write_run_dir
from simulator.cli import main
from simulator.errors import InputError
from simulator.records.prometheus import parse_metrics, window_rows
from simulator.report.html import ReportPaths, render_report

CHROMIUM = Path("/usr/bin/chromium")
IMG_RE = re.compile(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"')


def _server_metrics() -> pd.DataFrame:
    text = "vllm:prefix_cache_queries_total {q}\nvllm:prefix_cache_hits_total {h}\n" \
           "vllm:kv_cache_usage_perc {kv}\n"
    snaps = [parse_metrics(text.format(q=1000 * i * i, h=800 * i * i, kv=0.1 * i))
             for i in range(6)]
    rows = []
    for i in range(1, 6):
        rows += window_rows(snaps[i - 1], snaps[i], 100.0 * (i - 1), 100.0 * i)
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("runs") / "run-1"
    return write_run_dir(d, synthetic_turns(sessions=3, turns=45),
                         server_metrics=_server_metrics())


@pytest.fixture(scope="module")
def report(run_dir: Path) -> ReportPaths:
    return render_report(run_dir)


def test_report_files_and_images(report: ReportPaths) -> None:
    paths = report
    names = {p.name for p in paths.images}
    assert names == {"turn_throughput.png", "context_tokens.png", "cache_reuse.png",
                     "ttft_vs_context.png", "session_lanes.png", "timeline.png",
                     "distributions.png"}
    html = paths.html.read_text()
    blobs = IMG_RE.findall(html)
    assert len(blobs) == len(names)
    for blob in blobs:
        img = Image.open(io.BytesIO(base64.b64decode(blob)))
        img.verify()
        assert img.format == "PNG" and img.size[0] >= 600
    assert "SIMULATED" in html and "<script" not in html and "http" not in html.split(
        "<body>")[1].split("data:image")[0]
    md = paths.markdown.read_text()
    assert "![Turn throughput over turns](turn_throughput.png)" in md
    assert "| aggregate tok/s |" in md


def test_cli_report_prints_paths(tmp_path: Path) -> None:
    run_dir = write_run_dir(tmp_path / "small", synthetic_turns(turns=10))
    res = CliRunner().invoke(main, ["report", str(run_dir)])
    assert res.exit_code == 0, res.output
    assert res.output.strip().splitlines()[-1] == str(run_dir / "report.html")


@pytest.mark.slow            # starts a browser
@pytest.mark.skipif(not CHROMIUM.exists() and not os.environ.get("CI"),
                    reason="headless chromium not installed (apt-get install chromium)")
def test_report_opens_in_headless_chromium(report: ReportPaths, tmp_path: Path) -> None:
    html = report.html
    # A test-only copy with a probe that records each image's decoded width in the DOM.
    probe = ('<script>addEventListener("load",()=>document.body.setAttribute('
             '"data-widths",[...document.images].map(i=>i.naturalWidth).join(",")))</script>')
    probe_html = tmp_path / "probe.html"
    probe_html.write_text(html.read_text().replace("</body>", probe + "</body>"))
    flags = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
             "--virtual-time-budget=5000"]
    dom = subprocess.run([*flags, "--dump-dom", probe_html.as_uri()], capture_output=True,
                         text=True, timeout=90, check=True).stdout
    widths = re.search(r'data-widths="([0-9,]*)"', dom)
    assert widths, "page did not finish loading"
    assert [int(w) > 0 for w in widths.group(1).split(",")] == [True] * 7
    shot = tmp_path / "shot.png"
    subprocess.run([*flags, "--window-size=1200,1600", f"--screenshot={shot}", html.as_uri()],
                   capture_output=True, timeout=90, check=True)
    colors = Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 20)
    assert colors is not None and len(colors) > 50   # not a blank page


def test_load_errors_are_one_line_input_errors(tmp_path: Path) -> None:
    good = write_run_dir(tmp_path / "ok", synthetic_turns(turns=5))
    manifest, turns, server = load_run(good)
    assert manifest.simulated is True and len(turns) == 5 and server is None

    cases = []
    cases.append(tmp_path / "absent")
    empty = tmp_path / "empty"
    empty.mkdir()
    cases.append(empty)
    bad_json = write_run_dir(tmp_path / "badjson", synthetic_turns(turns=3))
    (bad_json / "manifest.json").write_text('{"seed": 1,,}')
    cases.append(bad_json)
    bad_parquet = write_run_dir(tmp_path / "badpq", synthetic_turns(turns=3))
    (bad_parquet / "turns.parquet").write_bytes(b"PAR1 truncated garbage")
    cases.append(bad_parquet)
    no_cols = write_run_dir(tmp_path / "nocols", synthetic_turns(turns=3).drop(columns=["e2e_s"]))
    cases.append(no_cols)
    for d in cases:
        with pytest.raises(InputError) as e:
            load_run(d)
        msg = str(e.value)
        assert "\n" not in msg and str(d) in msg
    res = CliRunner().invoke(main, ["report", str(bad_json)])
    assert res.exit_code == 2 and res.output.count("\n") == 1
    assert "corrupted JSON" in res.output and json.loads((good / "manifest.json").read_text())
