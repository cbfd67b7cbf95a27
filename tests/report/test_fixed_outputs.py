"""The printed tables and JSON of fixed runs are byte for byte what they were.

Two fixed runs (a synthetic run folder with scraped server metrics, and a small
in-process twin run, both deterministic) are summarised and shown every way a user
sees them: summary.json, the terminal summary, the report's markdown table, a sweep
table and sweep.json rows, a sizing answer and its size.json, a comparison. The text
in data/fixed_outputs.txt was written by the code before the summary became typed
(issue 50); `python -m tests.report.test_fixed_outputs --write` rewrites it, which a
change that means to alter an output does on purpose.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest
import yaml

from simulator.analysis.compare import compare_runs, load_runs
from simulator.analysis.load import load_run, load_saved_summary
from simulator.analysis.run_summary import RunSummary
from simulator.analysis.sizing import Probe, SizingResult, sweep_row
from simulator.analysis.slo import failures, parse_slo
from simulator.analysis.summary import summarize_run
from simulator.analysis.synthetic import synthetic_turns, write_run_dir
from simulator.records.prometheus import parse_metrics, window_rows
from simulator.report.compare import format_comparison
from simulator.report.console import format_sizing, format_summary, format_sweep_table
from simulator.report.html import render_report
from tests.conftest import run_scenario, small_scenario

EXPECTED = Path(__file__).with_name("data") / "fixed_outputs.txt"


def _server_metrics() -> pd.DataFrame:
    """Five scrape windows of a server whose prefix cache hits 80% and KV fills up."""
    text = ("vllm:prefix_cache_queries_total {q}\nvllm:prefix_cache_hits_total {h}\n"
            "vllm:kv_cache_usage_perc {kv}\n")
    snaps = [parse_metrics(text.format(q=1000 * i * i, h=800 * i * i, kv=0.1 * i))
             for i in range(6)]
    return pd.DataFrame([row for i in range(1, 6) for row in window_rows(
        snaps[i - 1], snaps[i], 100.0 * (i - 1), 100.0 * i)])


def _summary_of(run_dir: Path) -> RunSummary:
    manifest, turns, server = load_run(run_dir)
    return RunSummary.from_json(summarize_run(manifest, turns, server,
                                              load_saved_summary(run_dir)))


def _sections(root: Path) -> tuple[list[tuple[str, str]], list[str]]:
    """The outputs, and the strings that differ from one run to the next (the twin
    run's id and folder name), to be masked."""
    synth = write_run_dir(root / "synthetic", synthetic_turns(sessions=3, turns=45),
                          server_metrics=_server_metrics())
    other = write_run_dir(root / "synthetic-b", synthetic_turns(sessions=3, turns=45, seed=1,
                                                                tok_s=90.0))
    scenario = root / "small.yaml"
    scenario.write_text(yaml.safe_dump(small_scenario(sessions=2, turns=12)))
    twin = run_scenario(scenario, root / "runs").run_dir
    out: list[tuple[str, str]] = []
    summaries = {"synthetic": _summary_of(synth), "twin": _summary_of(twin)}
    for name, s in summaries.items():
        out.append((f"{name} summary.json", json.dumps(s.to_json(), indent=2)))
        out.append((f"{name} terminal summary", format_summary(s, target=name)))
    out.append(("twin saved summary.json", (twin / "summary.json").read_text()))
    report = render_report(twin)
    out.append(("twin report markdown", report.markdown.read_text().replace(str(twin), "RUN")))
    rows = [{**sweep_row({"requested_sessions": n}, s), "run_dirs": [f"run-{n}"]}
            for n, s in ((1, summaries["synthetic"]), (2, summaries["twin"]))]
    out.append(("sweep.json rows", json.dumps(rows, indent=2)))
    out.append(("sweep table", format_sweep_table(rows)))
    slos = (parse_slo("per_session_tok_s>=30"), parse_slo("ttft_p95_s<=4"))
    probes = [Probe(n, not failures(s, slos), failures(s, slos), s, run_dir=f"run-{n}")
              for n, s in ((1, summaries["synthetic"]), (2, summaries["twin"]))]
    result = SizingResult(sessions=1, slos=slos, max_sessions=8, probes=probes,
                          binding="ttft_p95_s<=4", binding_kind="latency", answers=[1])
    out.append(("size.json", json.dumps(result.to_dict(), indent=2)))
    out.append(("sizing answer", format_sizing(result, target="fixed")))
    comparison = compare_runs(load_runs([synth, other]))
    out.append(("comparison", format_comparison(comparison)
                .replace(str(synth), "A").replace(str(other), "B")))
    run_id = str(json.loads((twin / "manifest.json").read_text())["run_id"])
    return out, [str(twin), twin.name, run_id]


def render() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        sections, volatile = _sections(Path(tmp))
        text = "".join(f"=== {name}\n{body}\n" for name, body in sections)
        for v in volatile:
            text = text.replace(v, "RUN")
        return text.replace(tmp, "TMP")


@pytest.mark.slow
def test_fixed_runs_print_as_before() -> None:
    got = render().splitlines()
    want = EXPECTED.read_text(encoding="utf-8").splitlines()
    assert got == want


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        EXPECTED.write_text(render(), encoding="utf-8")
    else:
        print(render())
