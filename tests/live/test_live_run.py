"""Watching real runs (issue 35's "done when"): the dashboard in tmux against the HTTP
twin, `--metrics-port` scraped mid-run and at the end, `endurance watch` following a
`--workers 2` run and replaying it, a fake DCGM exporter's power turned into energy
figures, and no escape code ever written to a pipe.

Every wait is bounded and waits for the state it asserts; servers bind 127.0.0.1 port 0
and are stopped."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.conftest import small_scenario
from tests.http_twin import twin_in_thread
from tests.live.test_exporter_follow import samples, total

ROOT = Path(__file__).resolve().parents[2]
# pytest-xdist workers set COLUMNS=80 and LINES=24: rich would draw the dashboard at 80
# columns whatever the terminal (tmux's 230), wrapping the figures' line (CI failed so)
ENV = {**{k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")},
       "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
FINAL = re.compile(r"run: requests ([\d,]+) · ok turns ([\d,]+) · failed ([\d,]+) · output "
                   r"tokens ([\d,]+) · ([\d,.]+|—) tok/s · TTFT p50 ([\d.]+|—) s p95 "
                   r"([\d.]+|—) s · compactions ([\d,]+)")


def wait_for(what: str, cond: Callable[[], Any], timeout_s: float = 120.0,
             every_s: float = 0.2, show: Callable[[], str] | None = None) -> Any:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        time.sleep(every_s)
    seen = f"; last seen:\n{show()[-3000:]}" if show is not None else ""
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}{seen}")


def scenario(tmp_path: Path, turns: int = 24, sessions: int = 2) -> Path:
    import yaml
    data = small_scenario(turns=turns, sessions=sessions, think_time_s=1.0)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def endurance(*args: str, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "simulator", *args], cwd=ROOT, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def final_figures(text: str) -> dict[str, Any]:
    """The last whole-run line a view printed, as numbers."""
    found = FINAL.findall(text)
    assert found, text[-3000:]
    req, ok, failed, out, tok_s, p50, p95, comp = found[-1]

    def num(x: str) -> float | None:
        return None if x == "—" else float(x.replace(",", ""))
    return {"requests": num(req), "ok_turns": num(ok), "failed_requests": num(failed),
            "output_tokens": num(out), "aggregate_tok_s": num(tok_s), "ttft_p50_s": num(p50),
            "ttft_p95_s": num(p95), "compaction_events": num(comp)}


def assert_equals_summary(shown: dict[str, Any], summary: dict[str, Any]) -> None:
    """What a view showed at the end is the summary's figure, to its printed precision."""
    for key in ("requests", "ok_turns", "failed_requests", "output_tokens",
                "compaction_events"):
        assert shown[key] == summary[key], key
    assert shown["aggregate_tok_s"] == pytest.approx(summary["aggregate_tok_s"], abs=0.006)
    for key in ("ttft_p50_s", "ttft_p95_s"):
        assert shown[key] == pytest.approx(summary[key], abs=6e-5), key


def stop(proc: subprocess.Popen[str]) -> tuple[str, str]:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate(timeout=10)


# ------------------------------------------------------------------ tmux dashboard --
@contextlib.contextmanager
def tmux_session(command: str, width: int = 230, height: int = 70) -> Iterator[str]:
    # a server of its own (-L): a tmux server already running (another test's, a
    # user's) would start the command with that server's environment, not ENV
    name = f"endurance-test-{os.getpid()}-{time.monotonic_ns()}"
    subprocess.run(["tmux", "-L", name, "new-session", "-d", "-s", name, "-x", str(width),
                    "-y", str(height), command], check=True, env=ENV)
    try:
        yield name
    finally:
        subprocess.run(["tmux", "-L", name, "kill-server"], check=False, capture_output=True)


def capture(name: str, history: bool = False) -> str:
    args = ["tmux", "-L", name, "capture-pane", "-p", "-J", "-t", name] + \
        (["-S", "-"] if history else [])
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed "
                    "(.ci/run installs it)")
def test_dashboard_in_tmux_changes_while_it_runs_and_ends_on_the_summary_s_figures(
        tmp_path: Path) -> None:
    path = scenario(tmp_path, turns=30)
    out = tmp_path / "out"
    done = tmp_path / "done"
    with twin_in_thread(time_scale=10.0) as url:
        cmd = (f"cd {ROOT} && {sys.executable} -m simulator run {path} --endpoint {url} "
               f"--out {out} --progress dashboard > {tmp_path / 'stdout'}; "
               f"echo $? > {done}; sleep 600")
        with tmux_session(cmd) as name:
            def shown() -> dict[str, Any] | None:
                text = capture(name)
                if "run clock" not in text or not FINAL.search(text):
                    return None
                figures = final_figures(text)
                return figures if (figures["requests"] or 0) > 0 else None
            # a failure shows the screen (CI once timed out here with no clue)
            first = wait_for("a first frame with requests", shown,
                             show=lambda: capture(name, history=True))
            second = wait_for("a frame whose figures changed",
                              lambda: (f := shown()) and f["requests"] > first["requests"]
                              and f)
            assert second["output_tokens"] > first["output_tokens"]
            wait_for("the run to end", done.exists, timeout_s=300)
            screen = capture(name, history=True)
    assert done.read_text().strip() == "0"
    run_dir = Path((tmp_path / "stdout").read_text().strip().splitlines()[-1])
    summary = json.loads((run_dir / "summary.json").read_text())
    # the dashboard's last frame stays on the screen above the summary
    last_frame = screen.split("=== endurance summary")[0]
    assert "aggregate tok/s (finished requests)" in last_frame and "last 30 s" in last_frame
    assert_equals_summary(final_figures(last_frame), summary)


# ------------------------------------------------------------------ --metrics-port --
COUNTERS = ("_total", "_count", "_sum", "_bucket")


@pytest.mark.slow
def test_metrics_port_scraped_mid_run_and_at_the_end_equals_the_rows(tmp_path: Path) -> None:
    path = scenario(tmp_path, turns=30)
    with twin_in_thread(time_scale=10.0) as url:
        proc = endurance("run", str(path), "--endpoint", url, "--out", str(tmp_path),
                         "--metrics-port", "127.0.0.1:0", "--metrics-hold", "120",
                         "--progress", "off")
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            m = re.search(r"metrics: (http://127\.0\.0\.1:\d+/metrics) \(run (\S+)\)", line)
            assert m, line
            metrics_url, run_id = m.group(1), m.group(2)
            run_dir = tmp_path / run_id
            scrapes: list[dict[Any, float]] = []

            def scrape() -> dict[Any, float]:
                with urllib.request.urlopen(metrics_url, timeout=10) as r:
                    return samples(r.read().decode())

            mid = wait_for("a mid-run scrape with requests", lambda: (
                s := scrape()) and total(s, "endurance:requests_total") > 0
                and not (run_dir / "summary.json").exists() and s)
            scrapes.append(mid)
            while not (run_dir / "summary.json").exists():
                scrapes.append(scrape())
                time.sleep(0.3)
            end = wait_for("the final scrape", lambda: (s := scrape()) and s)
            scrapes.append(end)
        finally:
            stdout, stderr = stop(proc)
    assert proc.returncode == 0, stderr
    assert "stays up" in stdout
    # counters never decrease between scrapes
    for a, b in itertools.pairwise(scrapes):
        for key, v in a.items():
            if key[0].endswith(COUNTERS):
                assert b.get(key, 0.0) >= v, key
    rows = pd.read_parquet(run_dir / "turns.parquet")
    summary = json.loads((run_dir / "summary.json").read_text())
    ok = rows[rows["ok"]]
    assert total(end, "endurance:requests_total", run=run_id) == len(rows)
    assert total(end, "endurance:generation_tokens_total") == ok["output_tokens"].sum()
    assert total(end, "endurance:prompt_tokens_total") == ok["prompt_tokens"].sum()
    assert total(end, "endurance:cache_read_tokens_total") == ok["cache_read_tokens"].sum()
    assert total(end, "endurance:compactions_total") == summary["compaction_events"]
    turns = ok[ok["request_kind"] == "turn"]
    assert total(end, "endurance:time_to_first_token_seconds_count") == \
        turns["ttft_s"].notna().sum()
    assert total(end, "endurance:time_to_first_token_seconds_sum") == pytest.approx(
        turns["ttft_s"].sum())
    assert total(end, "endurance:sessions_active") == 0


# ------------------------------------------------------------------ endurance watch --
@pytest.mark.slow
def test_watch_follows_a_workers_run_to_its_end_and_replays_it(tmp_path: Path) -> None:
    path = scenario(tmp_path, turns=30, sessions=4)
    with twin_in_thread(time_scale=10.0) as url:
        run = endurance("run", str(path), "--endpoint", url, "--out", str(tmp_path),
                        "--workers", "2", "--progress", "off")
        try:
            run_dir = wait_for("the run's directory", lambda: next(
                (d for d in tmp_path.iterdir() if (d / "manifest.json").exists()), None))
            watch = endurance("watch", str(run_dir), "--progress", "plain", "--every", "1")
            w_out, w_err = watch.communicate(timeout=300)
        finally:
            # the watch ends when the run's summary is written; the run may still be
            # exiting then: wait for it to end on its own (SIGTERM then, once, killed a
            # run at load: -15), stopping it only if it does not
            try:
                _r_out, r_err = run.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                _r_out, r_err = stop(run)
    assert run.returncode == 0, r_err
    assert watch.returncode == 0, w_err
    assert f"following {run_dir}" in w_err
    summary = json.loads((run_dir / "summary.json").read_text())
    lines = [x for x in w_out.splitlines() if x.startswith("[endurance]")]
    # it showed the shards' rows while they ran, before the merge…
    live = [x for x in lines if " · run: " in x and not x.startswith("[endurance] run:")]
    assert any(int(re.search(r"run: ([\d,]+) requests", x).group(1).replace(",", "")) > 0
               for x in live), w_out
    # …and ends on the run's own figures
    assert_equals_summary(final_figures(w_out), summary)
    replay = endurance("watch", str(run_dir), "--progress", "plain", "--speed", "0")
    p_out, p_err = replay.communicate(timeout=120)
    assert replay.returncode == 0 and f"replaying {run_dir}" in p_err
    assert_equals_summary(final_figures(p_out), summary)
    paced = endurance("watch", str(run_dir), "--progress", "plain", "--every", "0.2",
                      "--speed", str(max(1.0, summary["wall_window_s"] / 2)))
    q_out, _ = paced.communicate(timeout=120)
    assert paced.returncode == 0 and q_out.count("[endurance] t ") >= 3
    assert_equals_summary(final_figures(q_out), summary)


# ------------------------------------------------------------------ GPU telemetry ---
DCGM_TEXT = """\
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a",Hostname="node"} 180.000000
DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-b",Hostname="node"} 70.000000
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",Hostname="node"} 90
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-b",Hostname="node"} 30
"""


@contextlib.contextmanager
def fake_dcgm() -> Iterator[str]:
    """A DCGM exporter's /metrics (two GPUs at a constant 180 + 70 W, 90% and 30%
    busy) on 127.0.0.1, any free port."""
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = DCGM_TEXT.encode()
            self.send_response(200)
            self.send_header("content-type", "text/plain; version=0.0.4")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/metrics"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.mark.slow
def test_a_fake_dcgm_exporter_gives_energy_figures_checked_by_hand(tmp_path: Path) -> None:
    path = scenario(tmp_path, turns=12)
    with twin_in_thread(time_scale=10.0) as url, fake_dcgm() as dcgm:
        proc = endurance("run", str(path), "--endpoint", url, "--out", str(tmp_path),
                         "--scrape", dcgm, "--progress", "off")
        stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    run_dir = Path(stdout.strip().splitlines()[-1])
    s = json.loads((run_dir / "summary.json").read_text())
    port = dcgm.split(":")[2].split("/")[0]
    assert s["energy_source"] == f"measured from 127.0.0.1:{port}/metrics"
    # by hand: 180 + 70 = 250 W throughout; utilisation (90 + 30) / 2 = 60%
    assert s["gpu_power_mean_w"] == pytest.approx(250.0)
    assert s["gpu_util_mean"] == pytest.approx(0.60)
    wh = 250.0 * s["wall_window_s"] / 3600.0
    assert s["energy_wh"] == pytest.approx(wh)
    assert s["energy_wh_per_mtok"] == pytest.approx(wh / s["output_tokens"] * 1e6)
    assert s["sessions_per_kw"] == pytest.approx(s["achieved_sessions"] / 0.25)
    assert "Wh per 1M output tokens" in stdout or "sessions per kW" in stdout
    assert f"(measured from 127.0.0.1:{port}/metrics)" in stdout


def test_scrape_is_refused_for_the_in_process_twin(tmp_path: Path) -> None:
    proc = endurance("run", str(scenario(tmp_path)), "--scrape", "http://127.0.0.1:9/m",
                     "--out", str(tmp_path))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "--scrape needs --endpoint" in err


# ------------------------------------------------------------------ no terminal -----
def test_no_escape_code_reaches_a_pipe_and_a_status_line_does(tmp_path: Path) -> None:
    proc = endurance("run", str(scenario(tmp_path, turns=6)), "--out", str(tmp_path),
                     "--progress", "dashboard", "--progress-every", "1")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "\x1b" not in err and "\x1b" not in out
    run_dir = Path(out.strip().splitlines()[-1])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert_equals_summary(final_figures(err), summary)
