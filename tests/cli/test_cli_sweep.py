"""`endurance sweep` and `endurance size` on the in-process twin (virtual time)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from simulator.analysis.load import load_saved_summary
from simulator.analysis.sizing import kv_capacity_sessions
from simulator.cli import main
from simulator.lab import kv_capacity_tokens, run_summary, shared_prefix_tokens
from tests.size_refusals import BAD_ARGUMENTS, NOT_A_SWEEP

ROOT = Path(__file__).resolve().parents[2]
TEAM = str(ROOT / "scenarios" / "claude-code-team.yaml")
TWIN = "a40/qwen3-coder-30b-a3b-awq"
JSON_KEYS = {"requested_sessions", "window_aggregate_tok_s", "window_per_session_tok_s",
             "window_ttft_p50_s", "window_ttft_p95_s", "cache_shared_pct",
             "window_usd_per_mtok", "aggregate_tok_s", "simulated"}


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def test_sweep_json(tmp_path: Path) -> None:
    res = _invoke("sweep", TEAM, "--sessions", "1,2,4", "--turns", "8", "--json",
                  "--out", str(tmp_path))
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)           # stdout is the JSON list and nothing else
    assert isinstance(rows, list) and [r["requested_sessions"] for r in rows] == [1, 2, 4]
    for r in rows:
        assert set(r) >= JSON_KEYS, JSON_KEYS - set(r)
        assert r["simulated"] is True
        assert r["window_aggregate_tok_s"] > 0 and r["window_per_session_tok_s"] > 0
        assert 0 < r["window_ttft_p50_s"] <= r["window_ttft_p95_s"]
        assert 0 <= r["cache_shared_pct"] <= 100 and r["window_usd_per_mtok"] > 0
        # every row traces back to its run: the figures are that run's summary, by name
        (run_dir,) = r["run_dirs"]
        saved = load_saved_summary(run_dir)
        assert saved is not None and saved["requested_sessions"] == r["requested_sessions"]
        assert r["steady_state"] is True \
            and r["achieved_sessions"] >= 0.9 * r["requested_sessions"]
        assert saved["window_aggregate_tok_s"] == r["window_aggregate_tok_s"]
        assert saved["aggregate_tok_s"] == r["aggregate_tok_s"]
    # more sessions share the prefix more and serve more tokens in all
    assert rows[-1]["window_aggregate_tok_s"] > rows[0]["window_aggregate_tok_s"]
    (folder,) = tmp_path.glob("sweep-*")
    assert json.loads((folder / "sweep.json").read_text()) == rows
    assert (folder / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_sweep_table(tmp_path: Path) -> None:
    res = _invoke("sweep", TEAM, "--sessions", "1,2", "--turns", "6", "--out", str(tmp_path))
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0] == "sweep — SIMULATED (twin)"
    assert lines[1].split()[0] == "sessions" and "aggregate tok/s" in lines[1]
    assert [ln.split()[0] for ln in lines[2:4]] == ["1", "2"]
    plot = Path(next(ln for ln in lines if ln.startswith("plot: ")).removeprefix("plot: "))
    assert plot.is_file() and plot.parent.parent == tmp_path
    assert "sessions:" in res.stderr        # per-point progress goes to stderr
    assert any(ln.startswith("swept: hardware a40") and "quantization awq" in ln for ln in lines)


def _size_json(tmp_path: Path, *slos: str, max_sessions: int) -> dict[str, Any]:
    args = ["size", TEAM, "--turns", "8", "--twin", TWIN, "--max-sessions", str(max_sessions),
            "--json", "--out", str(tmp_path)]
    for s in slos:
        args += ["--slo", s]
    res = _invoke(*args)
    assert res.exit_code == 0, res.output
    data: dict[str, Any] = json.loads(res.stdout)
    return data


def test_size_finds_answer_and_binding_constraint(tmp_path: Path) -> None:
    data = _size_json(tmp_path, "per_session_tok_s>=60", "ttft_p95_s<=30", max_sessions=4)
    n = data["sessions"]
    by_n = {p["requested_sessions"]: p for p in data["probes"] if not p["seed_offset"]}
    # the answer passed (twice: probe and confirming repeat) and one more session failed
    assert n >= 1 and by_n[n]["passed"] and data["confirmed"]
    assert [p["requested_sessions"] for p in data["probes"]].count(n) == 2
    assert n + 1 in by_n and not by_n[n + 1]["passed"]
    # an SLO on per_session_tok_s is judged on the steady window's figure
    assert by_n[n]["window_per_session_tok_s"] >= 60 > by_n[n + 1]["window_per_session_tok_s"]
    assert data["binding"].startswith("per_session_tok_s>=60")
    assert data["binding_kind"] in {"throughput", "kv_capacity"}
    # the KV bound is the profile's capacity over the largest probe's peak context
    largest = max(by_n)
    peak = run_summary(data["run_dirs"][str(largest)][0])["context_tokens_max"]
    shared = shared_prefix_tokens(TEAM, ["turns=8"])
    assert data["kv_capacity_sessions"] == kv_capacity_sessions(
        kv_capacity_tokens(TWIN), int(peak), shared)


def test_size_text_names_binding_and_kv_bound(tmp_path: Path) -> None:
    res = _invoke("size", TEAM, "--turns", "6", "--slo", "ttft_p95_s<=60", "--max-sessions", "2",
                  "--out", str(tmp_path))
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "2 session(s) meet ttft_p95_s<=60" in out and "SIMULATED" in out
    assert "binding constraint: --max-sessions 2 [max_sessions]" in out
    assert "KV-capacity bound: " in out and " sessions at peak context" in out


@pytest.mark.parametrize("args, phrase", [
    (["sweep", TEAM, "--sessions", "1,x"], "--sessions"),
    (["sweep", TEAM, "--sessions", "0,2"], "--sessions"),
    (["sweep", TEAM, "--sessions", ","], "--sessions"),
    *((["size", TEAM, *c.args], c.needles[0]) for c in BAD_ARGUMENTS),
])
def test_bad_arguments_exit_2_with_one_line(args: list[str], phrase: str, tmp_path: Path) -> None:
    res = _invoke(*args, "--out", str(tmp_path))
    assert res.exit_code == 2, res.output
    err = res.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err and phrase in err
    assert res.stdout == ""
    assert not list(tmp_path.iterdir()), "nothing is written for bad arguments"


def test_sweep_and_size_take_every_twin_option_run_takes(tmp_path: Path) -> None:
    """`--max-num-batched-tokens`, `--max-num-seqs`, `--kv-dtype`, … reach each point
    (they were `run`-only: a sweep silently could not set them)."""
    res = _invoke("sweep", TEAM, "--sessions", "2", "--turns", "2", "--json",
                  "--max-num-batched-tokens", "4096", "--max-num-seqs", "64",
                  "--kv-dtype", "fp8", "--out", str(tmp_path))
    assert res.exit_code == 0, res.output
    (row,) = json.loads(res.stdout)
    (run_dir,) = row["run_dirs"]
    manifest = json.loads((Path(run_dir) / "manifest.json").read_text())
    assert {"twin.max_num_batched_tokens=4096", "twin.max_num_seqs=64",
            "twin.kv_dtype=fp8"} <= set(manifest["overrides"])
    twin = manifest["scenario_resolved"]["twin"]
    assert twin["max_num_batched_tokens"] == 4096 and twin["max_num_seqs"] == 64
    for bad in (["--max-num-batched-tokens", "0"], ["--kv-offload-gib", "inf"],
                ["--kv-offload-gib", "1e308"]):
        r = _invoke("size", TEAM, "--slo", "ttft_p95_s<=5", *bad, "--out", str(tmp_path / "x"))
        assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("args, phrase", [
    (["sweep", TEAM, "--set", "seed=,,,"], "empty value"),
    (["sweep", TEAM, "--set", "compaction.kind=none,none"], "listed twice"),
    (["sweep", TEAM, "--sessions", "2,2"], "listed twice"),
    (["sweep", TEAM, "--spec", "off,ngram:5", "--set", "compaction.kind=none,prune"],
     "one listed setting"),
    *((["size", TEAM, *c.args], c.needles[0]) for c in NOT_A_SWEEP),
    (["sweep", TEAM, "--endpoint", "http://127.0.0.1:9", "--parallel", "2"], "share the one"),
    (["sweep", TEAM, "--ray-address", "auto"], "--executor ray"),
])
def test_options_that_cannot_combine_are_refused_in_one_line(args: list[str], phrase: str,
                                                             tmp_path: Path) -> None:
    res = _invoke(*args, "--out", str(tmp_path))
    assert res.exit_code == 2, res.output
    err = res.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err and phrase in err, err
    assert not list(tmp_path.iterdir())
