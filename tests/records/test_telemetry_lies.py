"""Telemetry that lies (issue 49): a `--scrape` target is a side channel, never a
measurement it cannot back. Each lying target (garbage, HTML, HTTP 500, silence, a byte
at a time, a closed port, a 1 GB body, a 64 MB line, non-UTF-8 bytes, negative or
infinite power, one GPU exposed twice) is scraped for real over 127.0.0.1 and must end
in a `health()` that says so, in bounded time; a whole run with three lying targets
exits 0, says so once per target on the console, and records it in the manifest and
summary.json, with no energy figure from a target that lied."""

from __future__ import annotations

import asyncio
import json
import math
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from simulator.analysis.energy import energy_figures, fold, telemetry_block
from simulator.records.prometheus import MetricsScraper, parse_metrics
from simulator.records.scrape_bounds import MAX_BODY_BYTES, ScrapeRefused, checked_text
from tests.conftest import small_scenario
from tests.http_twin import twin_in_thread
from tests.lying_servers import (
    Reply,
    byte_a_second,
    garbage_status,
    html_200,
    json_gb,
    long_line,
    lying_server,
    power_text,
    prom,
    silent,
)

ROOT = Path(__file__).resolve().parents[2]
def scrape(url: str, run_s: float = 0.5) -> tuple[dict[str, Any], list[dict[str, Any]], float]:
    """Scrape `url` as a run does (baseline, windows every 0.2 s, a last scrape at the
    stop): its health, the rows it kept and the wall time it took."""
    rows: list[dict[str, Any]] = []
    ended: list[dict[str, Any]] = []

    async def main() -> None:
        sc = MetricsScraper(url, 0.2, rows.extend, on_end=ended.append)
        task = asyncio.create_task(sc.run())
        await sc.ready()
        await asyncio.sleep(run_s)
        sc.stop()
        await asyncio.wait_for(task, 30)

    t0 = time.monotonic()
    asyncio.run(main())
    assert len(ended) == 1
    return ended[0], rows, time.monotonic() - t0


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ------------------------------------------------------------ one target, scraped --
@pytest.mark.parametrize(("reply", "status", "reason"), [
    (prom(b"\xff\xfe" + power_text(100.0)), "failed", "not UTF-8"),
    (prom(b"<html><body>Welcome to nginx</body></html>\n"), "failed", "not Prometheus"),
    (html_200, "failed", "not Prometheus"),
    (garbage_status, "failed", "scrape failed"),
    (prom(b"oops", "500 Internal Server Error"), "failed", "HTTP 500"),
    (json_gb, "failed", "body of 1,000,000,000 bytes announced"),
    (long_line, "failed", f"body over {MAX_BODY_BYTES >> 20} MiB"),
    (prom(power_text(-350.0)), "invalid", "is -350 (negative)"),
    (prom(power_text(math.inf)), "invalid", "is inf (not finite)"),
    (prom(power_text(100.0, math.nan)), "invalid", "is nan (not finite)"),
], ids=["non-utf8", "html-text", "html", "garbage", "http500", "1GB", "64MB-line",
        "negative", "inf", "nan"])
def test_a_lying_target_is_named_and_measures_nothing(reply: Reply, status: str,
                                                      reason: str) -> None:
    with lying_server(reply) as url:
        health, rows, wall = scrape(url + "/metrics")
    assert health["status"] == status and reason in health["reason"], health
    assert health["target"] == url + "/metrics"
    assert rows == []                     # nothing of a lying target is recorded
    assert wall < 10


@pytest.mark.slow      # each waits out the scrape's 2 s timeout once
@pytest.mark.parametrize("reply", [silent, byte_a_second], ids=["never-answers", "1-byte-s"])
def test_a_target_that_never_finishes_costs_one_timeout(reply: Reply) -> None:
    with lying_server(reply) as url:
        health, rows, wall = scrape(url + "/metrics")
    assert health["status"] == "failed" and "TimeoutError" in health["reason"], health
    assert rows == [] and wall < 6


def test_a_closed_port_is_a_failed_target() -> None:
    health, rows, wall = scrape(f"http://127.0.0.1:{closed_port()}/metrics")
    assert health["status"] == "failed" and "scrape failed" in health["reason"]
    assert rows == [] and wall < 10


def test_an_honest_target_is_ok_and_one_gpu_exposed_twice_counts_once() -> None:
    twice = power_text(180.0, 70.0, 180.0, uuids=("GPU-a", "GPU-b", "GPU-a"))
    with lying_server(prom(twice)) as url:
        health, rows, _ = scrape(url + "/metrics")
    assert health["status"] == "ok" and health["windows"] >= 1, health
    assert health["duplicate_series"] >= 1
    power = {r["value"] for r in rows if r["metric"] == "gpu_power_w"}
    assert power == {250.0}               # 180 + 70, not 430


def test_a_target_failing_after_its_baseline_is_failed_not_measured() -> None:
    answers = iter([power_text(100.0)])

    async def then_500(w: asyncio.StreamWriter, _body: bytes = b"") -> None:
        body = next(answers, None)
        await (prom(body) if body is not None else prom(b"x", "500 Oops"))(w)

    with lying_server(then_500) as url:
        health, _, _ = scrape(url + "/metrics")
    assert health["status"] == "failed" and "HTTP 500" in health["reason"], health
    assert health["failed_scrapes"] >= 1


# ------------------------------------------------------------ pure parts --------
def test_body_and_line_bounds() -> None:
    with pytest.raises(ScrapeRefused, match="body over"):
        checked_text(b"x" * (MAX_BODY_BYTES + 1))
    with pytest.raises(ScrapeRefused, match="a line of 100,000 characters"):
        checked_text("a 1\n" + "b" * 100_000 + "\n")
    with pytest.raises(ScrapeRefused, match="not UTF-8 text"):
        checked_text(b"a 1\n\xc3(\n")
    assert checked_text(b"a 1\n") == "a 1\n"


def test_duplicate_series_of_any_dialect_count_once() -> None:
    text = ('vllm:prompt_tokens_total{model_name="m"} 100\n'
            'vllm:prompt_tokens_total{model_name="m"} 100\n'
            'vllm:prompt_tokens_total{model_name="n"} 5\n')
    snap = parse_metrics(text)
    assert snap.counters["prompt_tokens"] == 105 and snap.duplicates == 1


def test_recorded_negative_power_is_no_measurement() -> None:
    """An older run's rows (recorded before the scraper validated): a target with a
    negative or infinite power row gives no figure; an honest one beside it still does."""
    rows = [{"t_start_s": 0.0, "t_end_s": 10.0, "metric": "gpu_power_w", "kind": "gauge",
             "value": v, "source": src}
            for src, v in (("liar", -350.0), ("inf", math.inf), ("ok", 200.0))]
    figs = energy_figures(fold(rows), 3600.0, 1000, 2.0)
    assert figs["gpu_power_mean_w"] == 200.0 and figs["energy_source"] == "measured from ok"
    figs = energy_figures(fold(rows, unmeasured={"ok"}), 3600.0, 1000, 2.0)
    assert figs["gpu_power_mean_w"] is None and figs["energy_wh"] is None


def test_telemetry_block_folds_a_resumed_runs_parts() -> None:
    ev = [{"event": "telemetry", "source": "a", "target": "http://a/m", "status": "ok",
           "reason": None, "scrapes": 5, "failed_scrapes": 0, "windows": 4},
          {"event": "ramp_step"},
          {"event": "telemetry", "source": "a", "target": "http://a/m", "status": "invalid",
           "reason": "negative", "scrapes": 1, "failed_scrapes": 1, "windows": 0}]
    (block,) = telemetry_block(ev)
    assert block["status"] == "invalid" and block["reason"] == "negative"
    assert (block["scrapes"], block["failed_scrapes"], block["windows"]) == (6, 1, 4)


# ------------------------------------------------------------ a whole run -------
@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2], ids=["one-process", "two-workers"])
def test_a_run_with_lying_targets_finishes_and_says_so_once(tmp_path: Path,
                                                           workers: int) -> None:
    """Sharded, a worker scrapes the targets: its health events reach the run's block."""
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(small_scenario(turns=6, sessions=2, think_time_s=0.5)))
    twice = power_text(180.0, 70.0, 70.0, uuids=("GPU-a", "GPU-b", "GPU-b"))
    with twin_in_thread(time_scale=10.0) as url, \
            lying_server(prom(b"\xff" + power_text(100.0))) as non_utf8, \
            lying_server(prom(power_text(-350.0))) as negative, \
            lying_server(prom(twice)) as duplicated:
        targets = [u + "/metrics" for u in (non_utf8, negative, duplicated)]
        proc = subprocess.run(
            [sys.executable, "-m", "simulator", "run", str(path), "--endpoint", url,
             "--out", str(tmp_path), "--progress", "off", "--workers", str(workers),
             *[a for t in targets for a in ("--scrape", t)]],
            cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    out = proc.stdout
    run_dir = Path(out.strip().splitlines()[-1])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    by_target = {t["target"]: t for t in summary["telemetry"]}
    assert manifest["telemetry"] == summary["telemetry"]
    assert by_target[targets[0]]["status"] == "failed"
    assert "not UTF-8" in by_target[targets[0]]["reason"]
    assert by_target[targets[1]]["status"] == "invalid"
    assert "-350" in by_target[targets[1]]["reason"]
    assert by_target[targets[2]]["status"] == "ok"
    # once each on the console, the liars marked as measuring nothing
    assert out.count(f"telemetry: {targets[0]}: failed (") == 1
    assert out.count(f"telemetry: {targets[1]}: invalid (") == 1
    assert out.count("no energy figures from it") == 2
    assert out.count(f"telemetry: {targets[2]}: ok") == 1      # its duplicate named
    # the energy is the honest target's, its GPU exposed twice counted once
    assert summary["gpu_power_mean_w"] == pytest.approx(250.0)
    assert summary["energy_source"] == "measured from " + targets[2].removeprefix("http://")
